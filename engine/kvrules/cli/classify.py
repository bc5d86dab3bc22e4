"""``kvrules classify``: classify campaign or cell folders and write the report.

This module is the command line only (options, help); :mod:`kvrules.cli.classify_run` does
the work.
"""
from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kvrules.cli import options as opt
from kvrules.cli.classify_run import ClassifyJob, Format, run

HELP = (
    "Decide the KV seed regime of every point under PATH and whether it may be used.\n\n"
    "PATH is a campaign folder (collection-plan.json and cells/) or a single cell folder; "
    "give a single cell its plan with --plan, or dense eligibility cannot be proven.\n\n"
    "Exit status: 0 every cell was classified, 1 some cell has an evidence error, "
    "2 usage error (bad path, invalid rule files, bad option).")

EPILOG = (
    "Examples:\n\n"
    "kvrules classify examples/dense-legacy-stamp-format examples/dp2-peer-ineligible\n\n"
    "kvrules classify campaigns/* --format json --output report.json\n\n"
    "kvrules classify campaign/cells/fpm-llama-decode-tp1 "
    "--plan campaign/collection-plan.json\n\n"
    "kvrules classify campaign --rules my-policy/ --no-dense-synthetic-kv --format jsonl")


def classify(
    paths: Annotated[list[str], typer.Argument(
        metavar="PATH", help="Campaign or cell folders, classified in the order given.",
        show_default=False)],
    rules: opt.Rules = None,
    plan: opt.Plan = None,
    fmt: Annotated[Format, typer.Option(
        "--format", "-f", help="text (a table) for people, json one document, jsonl "
        "streamed records, github workflow annotations of the evidence errors, parquet a "
        "dataset folder (one row per point; needs --output DIR).",
        case_sensitive=False)] = Format.text,
    output: Annotated[Path | None, typer.Option(
        "--output", "-o", metavar="FILE", help="Write the report to FILE (atomically) "
        "instead of stdout; with --format parquet, the dataset folder DIR. Never over or "
        "inside a PATH, --plan or --rules.", show_default=False)] = None,
    overwrite: Annotated[bool, typer.Option(
        "--overwrite", help="With --format parquet: replace an existing --output folder "
        "that kvrules did not write, deleting everything in it (a dataset kvrules wrote, "
        "or an empty folder, is replaced without it).")] = False,
    no_dense_synthetic_kv: opt.NoDense = False,
    no_verify: Annotated[bool, typer.Option(
        "--no-verify", help="Do not check the rule engine's evaluation of each cell against "
        "the reference evaluation of the policy (the report then says verification: off).")]
    = False,
    jobs: opt.Jobs = None,
    max_errors: Annotated[int, typer.Option(
        "--max-errors", min=0, metavar="N", help="Show at most N diagnostics of a usage "
        "error (0: all). The report itself is never truncated.")] = 20,
    cache: opt.CacheDir = None,
    no_cache: opt.NoCache = False,
    executor: opt.Executor = opt.ExecutorName.local,
    scheduler: opt.Scheduler = None,
    progress: Annotated[bool, typer.Option(
        "--progress", help="Report cells, cells/s and an ETA on stderr even when it is "
        "not a terminal (a log line every few seconds).")] = False,
) -> None:
    job = ClassifyJob(paths, rules, plan, fmt, output, no_dense_synthetic_kv, jobs, max_errors,
                      cache, no_cache, executor, scheduler, progress, overwrite, no_verify)
    raise typer.Exit(run(job))


def register(app: typer.Typer) -> None:
    """Add ``classify`` to the root app."""
    app.command("classify", help=HELP, epilog=EPILOG, no_args_is_help=True)(classify)
