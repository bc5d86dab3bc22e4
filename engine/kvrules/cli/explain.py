"""``kvrules explain``: why a point got its regime (and not another), or why a cell is or is
not dense-eligible, condition by condition on every rank."""
from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from kvrules.cli import options as opt
from kvrules.cli.common import usage_errors, write_text


class Format(str, Enum):
    text = "text"
    json = "json"


HELP = (
    "Explain one cell, or one point of it. The first lines answer: the verdict and its root "
    "cause (for a point that is not eligible, the earlier step that would have given an "
    "eligible regime and what stopped it, such as a qualification's failed conditions), with "
    "the evidence location; without --point, every ineligible point, grouped by cause. Then "
    "the work. For a point: the chain of rules that fired, from "
    "the raw evidence (file, JSON pointer, value) to the verdict, and for every regime that "
    "was not chosen the first condition that failed and the value observed. For a cell: each "
    "qualification condition (D1-D9) on every rank, with the rule that failed it or why each "
    "check held.\n\n"
    "Exit status: 0 the cell is classified, 1 the cell is in error, 2 usage error (unknown "
    "cell or point, several cells and no --cell, bad path, invalid rule files).")
EPILOG = (
    "Examples:\n\n"
    "kvrules explain examples/dense-sliding-window --cell fpm-llama31-8b-decode-tp1 "
    "--point 1\n\n"
    "kvrules explain examples/dense-no-engine-block --fails\n\n"
    "kvrules explain examples/dp2-peer-ineligible --cell fpm-llama31-8b-decode-tp1-dp2")


def explain(
    path: Annotated[str, typer.Argument(metavar="PATH", help="Campaign or cell folder.",
                                        show_default=False)],
    cell: Annotated[Optional[str], typer.Option(
        "--cell", metavar="ID", help="The cell to explain (optional when PATH holds one cell).",
        show_default=False)] = None,
    point: Annotated[Optional[int], typer.Option(
        "--point", metavar="BENCHMARK_ID", help="Explain this point of the cell.",
        show_default=False)] = None,
    rules: opt.Rules = None,
    plan: opt.Plan = None,
    no_dense_synthetic_kv: opt.NoDense = False,
    fails: Annotated[bool, typer.Option(
        "--fails", help="Show only what failed: the root cause, the eligible regimes not "
                        "reached, the conditions that failed and the rules that failed them.")]
    = False,
    fmt: Annotated[Format, typer.Option("--format", "-f", case_sensitive=False,
                                        help="text for people, json for tools.")]
    = Format.text,
) -> None:
    from kvrules.authoring.explain.point import explain as explain_cell_or_point
    from kvrules.authoring.explain.report import render_explanation_json, render_explanation_text
    from kvrules.pipeline import compile_policy
    with usage_errors():
        params = {"dense_synthetic_kv": False} if no_dense_synthetic_kv else None
        policy = compile_policy(str(rules) if rules else None, params)
        x = explain_cell_or_point(path, cell, point, policy, str(plan) if plan else None)
        text = render_explanation_json(x) if fmt is Format.json \
            else render_explanation_text(x, fails)
        write_text(text, None)
    raise typer.Exit(1 if x.status == "error" else 0)


def register(app: typer.Typer) -> None:
    """Add ``explain`` to the root app."""
    app.command("explain", help=HELP, epilog=EPILOG, no_args_is_help=True,
                short_help="Why a point got its regime (and not another), or why a cell is "
                           "or is not dense-eligible.")(explain)
