"""``kvrules aggregate``: the formal rows of spec 6.2 as parquet (or CSV)."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kvrules.cli import options as opt
from kvrules.cli.common import usage_errors, write_text
from kvrules.cli.destination import check_destination

HELP = (
    "Write the formal rows of ok cells as parquet or CSV (spec 6.2).\n\n"
    "Classify CAMPAIGN and write one formal row per physical coordinate of every ok cell to "
    "--output: .parquet (what kvrules publish reads; it records the policy) or .csv. The "
    "kv_seed_regime column comes from the verdicts; error cells are reported and left out.\n\n"
    "Exit status: 0 every cell gave rows, 1 some cell was left out, 2 usage error.")
EPILOG = ("Examples:\n\nkvrules aggregate examples/dense-legacy-stamp-format "
          "--output rows.parquet\n\nkvrules aggregate campaigns/run-42 --output rows.csv")


def aggregate(campaigns: opt.Campaigns,
              output: Annotated[Path, typer.Option(
                  "--output", "-o", metavar="FILE", help="The rows file: .parquet or .csv "
                  "(atomically; never over or inside a CAMPAIGN, --plan or --rules).",
                  show_default=False)],
              rules: opt.Rules = None, plan: opt.Plan = None,
              no_dense_synthetic_kv: opt.NoDense = False, jobs: opt.Jobs = None,
              fmt: opt.FormatOption = opt.Format.text,
              executor: opt.Executor = opt.ExecutorName.local,
              scheduler: opt.Scheduler = None, cache: opt.CacheDir = None,
              no_cache: opt.NoCache = False) -> None:
    from kvrules.consumers.aggregate import aggregate_paths
    from kvrules.consumers.render import render_aggregation, render_json
    from kvrules.consumers.rows import write_rows
    jobs = opt.jobs(jobs)
    with usage_errors():
        check_destination(output, campaigns, (plan, rules))
        with opt.run(executor, jobs, scheduler, opt.verdict_cache(cache, no_cache)) as run:
            result = aggregate_paths(campaigns, opt.policy(rules, no_dense_synthetic_kv),
                                     plan=opt.plan_arg(plan), run=run)
        write_rows(result.rows, output)
        json_out = fmt is opt.Format.json
        write_text(render_json(result) if json_out else render_aggregation(result, str(output)),
                   None)
    raise typer.Exit(result.exit_code)


def register(app: typer.Typer) -> None:
    """Add ``aggregate`` to the root app."""
    app.command("aggregate", help=HELP, epilog=EPILOG, no_args_is_help=True)(aggregate)
