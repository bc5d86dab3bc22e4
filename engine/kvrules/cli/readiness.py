"""``kvrules readiness``: may these campaigns go on to full collection? (spec 6.1)."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kvrules.cli import options as opt
from kvrules.cli.common import usage_errors, write_text
from kvrules.cli.destination import check_destination

HELP = (
    "Say per cell whether a campaign is ready for full collection (spec 6.1).\n\n"
    "Classify CAMPAIGN fresh and say per cell whether it is ready, blocked or incomplete, "
    "with the blockers as sentences, and whether the campaign is ready for full collection. "
    "Never writes inside the campaign; does not assess an already published table.\n\n"
    "Exit status: 0 every campaign is ready, 1 some cell is blocked or incomplete, 2 usage "
    "error.")
EPILOG = ("Examples:\n\nkvrules readiness examples/dense-legacy-stamp-format\n\n"
          "kvrules readiness campaigns/run-42 --format json --output readiness.json")


def readiness(campaigns: opt.Campaigns, rules: opt.Rules = None, plan: opt.Plan = None,
              fmt: opt.FormatOption = opt.Format.text,
              output: Annotated[Path | None, typer.Option(
                  "--output", "-o", metavar="FILE", help="Write the report to FILE "
                  "(atomically; never over or inside a CAMPAIGN, --plan or --rules).",
                  show_default=False)] = None,
              no_dense_synthetic_kv: opt.NoDense = False, jobs: opt.Jobs = None,
              executor: opt.Executor = opt.ExecutorName.local,
              scheduler: opt.Scheduler = None, cache: opt.CacheDir = None,
              no_cache: opt.NoCache = False) -> None:
    from kvrules.consumers.readiness import readiness as assess
    from kvrules.consumers.render import render_json, render_readiness
    jobs = opt.jobs(jobs)
    with usage_errors():
        check_destination(output, campaigns, (plan, rules))
        with opt.run(executor, jobs, scheduler, opt.verdict_cache(cache, no_cache)) as run:
            report = assess(campaigns, opt.policy(rules, no_dense_synthetic_kv),
                            plan=opt.plan_arg(plan), run=run)
        text = render_json(report) if fmt is opt.Format.json else render_readiness(report)
        write_text(text, output)
    raise typer.Exit(report.exit_code)


def register(app: typer.Typer) -> None:
    """Add ``readiness`` to the root app."""
    app.command("readiness", help=HELP, epilog=EPILOG, no_args_is_help=True)(readiness)
