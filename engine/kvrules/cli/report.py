"""``kvrules report``: one self-contained HTML page of the verdicts and their latencies."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kvrules.cli import options as opt
from kvrules.cli.common import usage_errors, write_text
from kvrules.cli.destination import check_destination
from kvrules.diagnostics import KvrulesUsageError

HELP = (
    "Write one self-contained HTML page of what the policy decided.\n\n"
    "Classify CAMPAIGN and write --output: a summary (cells by readiness, points by formal "
    "regime, the policy), then per cell latency_ms against total_kv_read_tokens (log scale) "
    "from the formal rows of kvrules aggregate, one line per batch size, each point coloured "
    "by its formal regime, filled when eligible; the D1-D9 marks with their reasons; the "
    "evidence errors with file and JSON pointer. The page works offline (plotly inlined, no "
    "network request) and draws a cell when it is scrolled into view. Needs plotly "
    "(pip install 'kvrules[report]').\n\n"
    "Exit status: 0 the page was written, 2 usage error.")
EPILOG = ("Examples:\n\nkvrules report examples/dense-sliding-window --output report.html\n\n"
          "kvrules report campaigns/* --rules my-policy/ -o report.html")


def report(campaigns: opt.Campaigns,
           output: Annotated[Path, typer.Option(
               "--output", "-o", metavar="FILE", help="The HTML file to write (atomically; "
               "never over or inside a CAMPAIGN, --plan or --rules).", show_default=False)],
           rules: opt.Rules = None, plan: opt.Plan = None,
           no_dense_synthetic_kv: opt.NoDense = False, jobs: opt.Jobs = None) -> None:
    from kvrules import api
    from kvrules.consumers.report import plotly_js, render_page, report_document
    jobs = opt.jobs(jobs)
    with usage_errors():
        check_destination(output, campaigns, (plan, rules))
        if output.suffix.lower() not in (".html", ".htm"):
            raise KvrulesUsageError(f"{output}: the report file must end in .html")
        plotly_js()
        doc = report_document(campaigns, opt.policy(rules, no_dense_synthetic_kv),
                              plan=opt.plan_arg(plan), run=api.Run(api.LocalExecutor(jobs)))
        write_text(render_page(doc), output)
        cells = len(doc["cells"])
        size = output.stat().st_size / 1e6
        typer.echo(f"wrote {output}: {cells} cell{'s' if cells != 1 else ''}, "
                   f"{doc['summary']['rows']['total']} formal rows, {size:.1f} MB")
    raise typer.Exit(0)


def register(app: typer.Typer) -> None:
    """Add ``report`` to the root app."""
    app.command("report", help=HELP, epilog=EPILOG, no_args_is_help=True)(report)
