"""Text and JSON output of the consumers: pure functions from results to strings.

Like :mod:`kvrules.verdicts.render`, nothing here prints or touches files, and every output
is byte-deterministic for the same result. JSON is each result's ``to_dict`` (one document);
text is for people. Diagnostics are rendered by :func:`kvrules.verdicts.render.render_diagnostics`.
"""
from __future__ import annotations

import json
from dataclasses import replace
from io import StringIO
from typing import Any, Iterable

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from kvrules.consumers.aggregate import Aggregation
from kvrules.consumers.publish import Publication, TablePublication
from kvrules.consumers.readiness import CampaignReadiness, ReadinessReport
from kvrules.consumers.verify import Verification
from kvrules.diagnostics import Diagnostic
from kvrules.verdicts.render import TABLE_WIDTH, render_diagnostics


def render_json(result: Any) -> str:
    """Any consumer result as one JSON document ending in a newline."""
    return json.dumps(result.to_dict(), indent=2, ensure_ascii=False) + "\n"


def _counts(counts: dict[str, int]) -> str:
    return "\n".join(f"{name} {n}" for name, n in counts.items()) or "-"


def _readiness_table(campaign: CampaignReadiness) -> Table:
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1, 0, 0),
                  highlight=False)
    for name in ("cell", "workload", "readiness", "points", "formal regimes", "native regimes"):
        table.add_column(name, overflow="fold")
    for cell in campaign.cells:
        table.add_row(cell.cell_id, cell.workload_kind or "-", cell.status, cell.eligible_text,
                      _counts(cell.formal_regime_counts), _counts(cell.native_regime_counts))
    return table


def _console(out: StringIO, width: int) -> Console:
    return Console(file=out, width=width, force_terminal=False, no_color=True,
                   color_system=None, highlight=False, emoji=False, markup=False)


def render_readiness(report: ReadinessReport, width: int = TABLE_WIDTH) -> str:
    """Per campaign: a row per cell, its blockers, and whether it is ready for collection."""
    out = StringIO()
    console = _console(out, width)
    for campaign in report.campaigns:
        console.print(Text(campaign.campaign), soft_wrap=True)
        console.print(_readiness_table(campaign))
        for cell in campaign.cells:
            for blocker in cell.blockers:
                console.print(Text(f"  {cell.cell_id} ({cell.status}): {blocker}"),
                              soft_wrap=True)
        ready = "yes" if campaign.ready_for_full_collection else "no"
        console.print(Text(f"ready for full collection: {ready}"))
        console.print()
    policy = report.policy
    console.print(Text(f"policy {policy.name} {policy.version}; {report.note}"), soft_wrap=True)
    return "\n".join(line.rstrip() for line in out.getvalue().splitlines()) + "\n"


def _in_campaign(campaign: str, errors: Iterable[Diagnostic]) -> list[Diagnostic]:
    """Diagnostics with ``file`` prefixed by the folder they are relative to, as typed."""
    base = campaign.rstrip("/")
    return [replace(e, file=f"{base}/{e.file}" if e.file else base) for e in errors]


def render_aggregation(result: Aggregation, output: str) -> str:
    """What was written where, and every cell left out with its errors."""
    rows, cells = result.rows.table.num_rows, len(result.cells)
    policy = result.rows.policy
    params = " ".join(f"{k}={json.dumps(v)}" for k, v in sorted(policy.parameters.items()))
    lines = [f"wrote {rows} row{'s' * (rows != 1)} of {cells} cell{'s' * (cells != 1)} to "
             f"{output} (policy {policy.name} {policy.version} {params})".rstrip()]
    if result.left_out:
        lines.append(f"left out {len(result.left_out)} cell(s):")
        errors = [d for c in result.left_out for d in _in_campaign(c.campaign, c.errors)]
        lines.append(render_diagnostics(errors, "text").rstrip("\n"))
    return "\n".join(lines) + "\n"


def _table_lines(table: TablePublication) -> list[str]:
    merge = table.merge
    state = "written" if table.written else "unchanged on disk"
    lines = [f"{table.table}: {table.row_count} rows, {merge.rows_added} added ({state})"]
    lines += [f"  published {c}" for c in merge.published]
    lines += [f"  already published, identical: {c}" for c in merge.unchanged]
    lines += [f"  skipped {s.cell_id}: already published by run {s.published_run['runtime_run_id']}"
              f" (this run {s.incoming_run['runtime_run_id']}); first publisher wins"
              for s in merge.skipped]
    marker = table.classification
    lines.append(f"  kv_seed_classification: {marker['policy']}: {', '.join(marker['cells'])}"
                 if marker else "  kv_seed_classification: none (no dense rows)")
    return lines


def render_publication(result: Publication) -> str:
    """Per table what was published, skipped or unchanged; or why nothing was written."""
    if result.errors:
        head = f"nothing published into {result.root}: {len(result.errors)} problem(s)"
        return head + "\n" + render_diagnostics(_in_campaign(result.root, result.errors))
    if not result.tables:
        return f"no rows to publish into {result.root}\n"
    return "\n".join(line for t in result.tables for line in _table_lines(t)) + "\n"


def render_verification(result: Verification) -> str:
    """One line per table (ok or failed) and the failures under it."""
    lines = []
    for table in result.tables:
        if table.ok:
            dense = ", ".join(table.dense_cells) or "none"
            lines.append(f"{table.table}: ok ({table.row_count} rows; dense cells: {dense})")
        else:
            lines.append(f"{table.table}: FAILED")
            problems = _in_campaign(result.root, table.problems)
            lines.append(render_diagnostics(problems, "text").rstrip("\n"))
    return "\n".join(lines) + "\n"
