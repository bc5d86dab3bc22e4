"""``kvrules classify``: classify campaign or cell folders and write the report."""
from __future__ import annotations

import os
import shutil
import sys
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Iterable, Iterator

import typer

from kvrules.cli import consumer_options as opt
from kvrules.cli.common import CellProgress, check_output, usage_errors, write_lines

if TYPE_CHECKING:  # the library is imported when the command runs, not for --help
    from kvrules.cache.verdicts import VerdictCache
    from kvrules.verdicts.model import CellVerdict, PolicyIdentity


class Format(str, Enum):
    text = "text"
    json = "json"
    jsonl = "jsonl"
    github = "github"
    parquet = "parquet"


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


class _ExitTap:
    """Pass cell verdicts through while remembering whether any cell was in error."""

    def __init__(self, cells: Iterable[CellVerdict]) -> None:
        self._cells = cells
        self.exit_code = 0

    def __iter__(self) -> Iterator[CellVerdict]:
        for cell in self._cells:
            if cell.status == "error":
                self.exit_code = 1
            yield cell


def _policy_identity(policy: Any) -> "PolicyIdentity":
    from kvrules.verdicts.model import PolicyIdentity
    identity = getattr(policy, "identity", None)
    if not isinstance(identity, PolicyIdentity):
        raise TypeError(f"load_policy() returned {type(policy).__name__} without a "
                        "PolicyIdentity 'identity' attribute")
    return identity


def _lines(fmt: Format, policy: Any, cells: Iterable["CellVerdict"],
           output: Path | None) -> Iterable[str]:
    """The report in the chosen format, produced as the cells arrive (jsonl and json are
    written cell by cell; the table keeps one short row per cell until the end). On a
    terminal the table fits its width; in a file or a pipe it is never wrapped."""
    from kvrules.verdicts.render import iter_github, iter_json, iter_jsonl
    identity = _policy_identity(policy)
    if fmt is Format.jsonl:
        return iter_jsonl(identity, cells)
    if fmt is Format.json:
        return iter_json(identity, cells)
    if fmt is Format.github:
        return iter_github(cells)
    from kvrules.verdicts.table import TABLE_WIDTH, table_of  # the table's module, for it only
    if output is None and sys.stdout.isatty():
        width = shutil.get_terminal_size((TABLE_WIDTH, 24)).columns
        return [table_of(identity, cells, width=width, color=not os.environ.get("NO_COLOR"),
                         ascii_only=not _encodes(sys.stdout, "\u2500"))]
    return [table_of(identity, cells, ascii_only=output is None
                     and not _encodes(sys.stdout, "\u2500"))]


def _encodes(stream: Any, text: str) -> bool:
    """Whether ``stream``'s encoding can write ``text`` (``PYTHONIOENCODING=ascii``)."""
    try:
        text.encode(getattr(stream, "encoding", None) or "utf-8")
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def classify(
    paths: Annotated[list[str], typer.Argument(
        metavar="PATH", help="Campaign or cell folders, classified in the order given.",
        show_default=False)],
    rules: Annotated[Path | None, typer.Option(
        "--rules", metavar="DIR", help="Policy directory to use instead of the shipped one.",
        show_default=False)] = None,
    plan: Annotated[Path | None, typer.Option(
        "--plan", metavar="FILE", help="collection-plan.json for a single cell folder.",
        show_default=False)] = None,
    fmt: Annotated[Format, typer.Option(
        "--format", "-f", help="text (a table) for people, json one document, jsonl "
        "streamed records, github workflow annotations of the evidence errors, parquet a "
        "dataset folder (one row per point; needs --output DIR).",
        case_sensitive=False)] = Format.text,
    output: Annotated[Path | None, typer.Option(
        "--output", "-o", metavar="FILE", help="Write the report to FILE (atomically) "
        "instead of stdout.", show_default=False)] = None,
    no_dense_synthetic_kv: Annotated[bool, typer.Option(
        "--no-dense-synthetic-kv", help="Turn dense synthetic KV classification off (D1): "
        "the legacy classification, exactly.")] = False,
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
    _classify(paths, rules, plan, fmt, output, no_dense_synthetic_kv, opt.jobs(jobs),
              max_errors, opt.verdict_cache(cache, no_cache), executor, scheduler, progress)


def _check_destination(fmt: Format, output: Path | None) -> None:
    """A report goes to a file or stdout; a parquet dataset to a folder named by --output."""
    if fmt is not Format.parquet:
        check_output(output)
        return
    from kvrules.diagnostics import KvrulesUsageError
    if output is None or output == Path("-"):
        raise KvrulesUsageError("--format parquet writes a folder: give it with --output DIR")
    if output.exists() and not output.is_dir():
        raise KvrulesUsageError(f"cannot write {output}: it is not a directory")


def _cache_summary(cache: "VerdictCache | None", asked: bool = False) -> None:
    """How many cells came from the cache, on a terminal's stderr (or with ``--progress``)
    only: the report, logs and pipes keep the same bytes whether cells were cached or not."""
    if cache is not None and (asked or sys.stderr.isatty()):
        total = cache.hits + cache.misses
        sys.stderr.write(f"kvrules: {cache.hits} of {total} cells from the verdict cache "
                         f"({cache.root})\n")


def _classify(paths: list[str], rules: Path | None, plan: Path | None, fmt: Format,
              output: Path | None, no_dense_synthetic_kv: bool, jobs: int,
              max_errors: int, cache: "VerdictCache | None", executor: opt.ExecutorName,
              scheduler: str | None, show_progress: bool = False) -> None:
    from kvrules import api
    plan_arg = str(plan) if plan is not None else None
    with usage_errors(max_errors):
        _check_destination(fmt, output)
        parameters = {"dense_synthetic_kv": False} if no_dense_synthetic_kv else None
        policy = api.load_policy(rules, parameters=parameters)
        shared_tty = fmt is not Format.text and output is None and sys.stdout.isatty()
        with CellProgress(enabled=not shared_tty, force=show_progress) as progress, \
                opt.running(executor, jobs, scheduler):
            cells = _ExitTap(api.iter_classify(paths, policy, plan=plan_arg, jobs=jobs,
                                               progress=progress, cache=cache))
            if fmt is Format.parquet:
                from kvrules.verdicts.dataset import write_dataset
                write_dataset(cells, output)  # type: ignore[arg-type]
            else:
                write_lines(_lines(fmt, policy, cells, output), output)
        _cache_summary(cache, show_progress)
    raise typer.Exit(cells.exit_code)


def register(app: typer.Typer) -> None:
    """Add ``classify`` to the root app."""
    app.command("classify", help=HELP, epilog=EPILOG, no_args_is_help=True)(classify)
