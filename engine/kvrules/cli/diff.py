"""``kvrules diff``: classify one corpus under two policies and report what changed."""
from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from kvrules.cli import options as opt
from kvrules.cli.common import usage_errors, write_text
from kvrules.cli.destination import check_destination


class Format(str, Enum):
    text = "text"
    json = "json"
    html = "html"


HELP = (
    "Classify the same corpus under two policies (--base and --head, the shipped policy by "
    "default, each with its own parameters) and report every point whose status, regime or "
    "eligibility changed, grouped by (old -> new) with counts and the rules that decided "
    "each side. This is the before/after evidence for reviewing a policy change.\n\n"
    "Exit status: 0 (or 1 with --fail-on-change when anything changed), 2 usage error.")
EPILOG = (
    "Examples:\n\n"
    "kvrules diff --base-param dense_synthetic_kv=true --head-param dense_synthetic_kv=false "
    "examples/dense-legacy-stamp-format examples/dense-native-skip-format\n\n"
    "kvrules diff --base rules/ --head my-policy/ campaigns/* --fail-on-change")

ParamOpt = Annotated[list[str], typer.Option(metavar="NAME=VALUE", show_default=False,
                                             help="A policy parameter (repeatable).")]


def diff(
    paths: Annotated[list[str], typer.Argument(metavar="PATH", show_default=False,
                                               help="Campaign or cell folders.")],
    base: Annotated[Optional[Path], typer.Option(
        "--base", metavar="RULES_A", help="The policy before (default: shipped).",
        show_default=False)] = None,
    head: Annotated[Optional[Path], typer.Option(
        "--head", metavar="RULES_B", help="The policy after (default: shipped).",
        show_default=False)] = None,
    base_param: ParamOpt = [],
    head_param: ParamOpt = [],
    plan: opt.Plan = None,
    fail_on_change: Annotated[bool, typer.Option(
        "--fail-on-change", help="Exit 1 when any point changed.")] = False,
    fmt: Annotated[Format, typer.Option("--format", "-f", case_sensitive=False,
                                        help="text for people, json for tools, html the "
                                        "kvrules report page with the changes marked.")]
    = Format.text,
    output: Annotated[Optional[Path], typer.Option(
        "--output", "-o", metavar="FILE", help="Write to FILE (atomically) instead of stdout; "
        "never over or inside a PATH, --plan, --base or --head.",
        show_default=False)] = None,
    jobs: opt.Jobs = None,
    executor: opt.Executor = opt.ExecutorName.local,
    scheduler: opt.Scheduler = None,
    cache: opt.CacheDir = None,
    no_cache: opt.NoCache = False,
) -> None:
    from kvrules import api
    from kvrules.authoring.diff import (diff_corpus, parse_params, render_diff_html,
                                        render_diff_json, render_diff_text)
    jobs = opt.jobs(jobs)
    with usage_errors():
        check_destination(output, paths, (plan, base, head))
        old = api.load_policy(base, parse_params(base_param) or None)
        new = api.load_policy(head, parse_params(head_param) or None)
        plan_arg = str(plan) if plan else None
        with opt.run(executor, jobs, scheduler, opt.verdict_cache(cache, no_cache)) as run:
            if fmt is Format.html:
                result, text = render_diff_html(paths, old, new, plan_arg, run)
            else:
                result = diff_corpus(paths, old, new, plan_arg, run)
                text = (render_diff_json(result) if fmt is Format.json
                        else render_diff_text(result))
        write_text(text, output)
    raise typer.Exit(result.exit_code(fail_on_change))


def register(app: typer.Typer) -> None:
    """Add ``diff`` to the root app."""
    app.command("diff", help=HELP, epilog=EPILOG, no_args_is_help=True,
                short_help="What a policy change does to a corpus: changed points, grouped "
                           "by old -> new, with the rules responsible.")(diff)
