"""Turn reports and diagnostics into output: pure functions from data to text.

Nothing here prints, reads the environment or touches files: each function returns a string
(or yields lines), so the CLI decides where the text goes and embedding jobs can reuse it.
Every output is byte-deterministic for the same input.

* :func:`render_json` - the ``--format json`` document of spec section 5.
* :func:`iter_jsonl` - the ``--format jsonl`` stream: a header, each cell's points then the
  cell itself (without its points), and the summary last; one cell in memory at a time.
* :func:`render_table` - the human table (one row per cell, then the errors and a summary).
* :func:`render_diagnostics` - diagnostics as ``text``, ``json`` or ``github`` annotations.
"""
from __future__ import annotations

import json
from io import StringIO
from typing import Any, Iterable, Iterator, Literal

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from kvrules.diagnostics import Diagnostic, sort_diagnostics
from kvrules.verdicts.model import (KVRULES_VERSION, CellVerdict, PolicyIdentity, Report,
                                    Summary, summarize)

DiagnosticFormat = Literal["text", "json", "github"]
DIAGNOSTIC_FORMATS: tuple[DiagnosticFormat, ...] = ("text", "json", "github")

TABLE_WIDTH = 120
"""Default width of :func:`render_table` when the caller does not know its terminal."""


# --- JSON and JSON Lines -------------------------------------------------------------------

def render_json(report: Report) -> str:
    """The whole report as one JSON document (spec section 5), ending in a newline."""
    return json.dumps(report.to_dict(), indent=2, sort_keys=False, ensure_ascii=False) + "\n"


def _jsonl_line(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"


def _add_summaries(a: Summary, b: Summary) -> Summary:
    counts = dict(a.counts)
    for regime, n in b.counts.items():
        counts[regime] = counts.get(regime, 0) + n
    return Summary(cells=a.cells + b.cells, cells_error=a.cells_error + b.cells_error,
                   points=a.points + b.points,
                   points_eligible=a.points_eligible + b.points_eligible, counts=counts)


def iter_jsonl(policy: PolicyIdentity, cells: Iterable[CellVerdict],
               kvrules_version: str = KVRULES_VERSION) -> Iterator[str]:
    """Yield the report as JSON Lines, each string one record ending in a newline.

    Order: a ``{"kind": "report"}`` header (version and policy), then for every cell its
    ``point`` records followed by the ``cell`` record without ``points``, and a ``summary``
    record last. The records are exactly the ones of :func:`render_json`, so a reader can
    rebuild the report; only running totals are kept, never the cells already written.
    """
    yield _jsonl_line({"kind": "report", "kvrules_version": kvrules_version,
                       "policy": policy.to_dict()})
    total = summarize([])
    for cell in cells:
        for point in cell.points:
            yield _jsonl_line(point.to_dict())
        yield _jsonl_line(cell.to_dict(with_points=False))
        total = _add_summaries(total, summarize([cell]))
    yield _jsonl_line(total.to_dict())


# --- the human table -----------------------------------------------------------------------

def _qualification_names(report: Report) -> list[str]:
    return sorted({name for cell in report.cells for name in cell.qualifications})


def _qualification_cell(cell: CellVerdict, name: str) -> str:
    q = cell.qualifications.get(name)
    if q is None:
        return "-"
    if q.eligible:
        return "eligible"
    failed = ", ".join(f.id for f in q.failed)
    return f"no ({failed})" if failed else "no"


def _outcome(cell: CellVerdict) -> str:
    """Regime counts of a classified cell, one per line; the error codes of an error cell."""
    if cell.status == "error" and cell.errors:
        return "\n".join(dict.fromkeys(e.code for e in cell.errors))
    return "\n".join(f"{regime} {n}" for regime, n in cell.counts.items()) or "-"


def _campaign_table(cells: list[CellVerdict], names: list[str]) -> Table:
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1, 0, 0),
                  highlight=False)
    table.add_column("cell", overflow="fold", min_width=8)
    table.add_column("workload", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("points", no_wrap=True)
    table.add_column("regimes / errors", overflow="fold", min_width=13)
    for name in names:
        table.add_column(name.replace("_", " "), overflow="fold", min_width=8)
    for cell in cells:
        status = Text(cell.status, style="red" if cell.status == "error" else "green")
        points = f"{cell.points_eligible}/{len(cell.points)} eligible"
        table.add_row(Text(cell.cell_id), Text(cell.workload_kind or "-"), status, Text(points),
                      Text(_outcome(cell)), *(Text(_qualification_cell(cell, n)) for n in names))
    return table


def _by_campaign(cells: Iterable[CellVerdict]) -> list[tuple[str, list[CellVerdict]]]:
    """Consecutive cells of one campaign, in report order."""
    groups: list[tuple[str, list[CellVerdict]]] = []
    for cell in cells:
        if not groups or groups[-1][0] != cell.campaign:
            groups.append((cell.campaign, []))
        groups[-1][1].append(cell)
    return groups


def _error_lines(report: Report) -> list[str]:
    lines = []
    for cell in report.cells:
        for diag in sort_diagnostics(cell.errors):
            lines.append(f"  {cell.cell_id}: {_text_line(diag, prefix=cell.campaign)}")
    return ["errors:", *lines] if lines else []


def _policy_line(policy: PolicyIdentity) -> str:
    params = " ".join(f"{k}={json.dumps(v)}" for k, v in sorted(policy.parameters.items()))
    digest = policy.digest[:19] + ("..." if len(policy.digest) > 19 else "")
    return " ".join(x for x in ("policy", policy.name, policy.version, digest, params) if x)


def _summary_line(summary: Summary) -> str:
    cells = f"{summary.cells} cell{'s' if summary.cells != 1 else ''}"
    counts = ", ".join(f"{regime} {n}" for regime, n in sorted(summary.counts.items()))
    line = (f"{cells} ({summary.cells_error} in error), "
            f"{summary.points_eligible}/{summary.points} points eligible")
    return f"{line}: {counts}" if counts else line


def render_table(report: Report, width: int = TABLE_WIDTH, color: bool = False) -> str:
    """A table for people: one row per cell, the cell errors, a summary and the policy.

    Rendered with rich into a string; ``color`` adds ANSI styles (only for a terminal).
    Without color the output is plain text and byte-deterministic for a given ``width``.
    """
    out = StringIO()
    console = Console(file=out, width=width, force_terminal=color, no_color=not color,
                      color_system="standard" if color else None, highlight=False,
                      emoji=False, markup=False, legacy_windows=False)
    names = _qualification_names(report)
    for campaign, cells in _by_campaign(report.cells):
        console.print(Text(campaign, style="bold"), soft_wrap=True)
        console.print(_campaign_table(cells, names))
        console.print()
    for line in [*_error_lines(report), _summary_line(report.summary),
                 _policy_line(report.policy)]:
        console.print(Text(line), soft_wrap=True)
    return "\n".join(line.rstrip() for line in out.getvalue().splitlines()) + "\n"


# --- diagnostics ---------------------------------------------------------------------------

def _text_line(diag: Diagnostic, prefix: str = "") -> str:
    location = diag.location()
    if prefix:
        location = f"{prefix.rstrip('/')}/{location}" if diag.file else prefix + location
    code = diag.code if diag.severity == "error" else f"{diag.code} ({diag.severity})"
    rule = f" (rule: {diag.rule})" if diag.rule else ""
    head = f"{location}: " if location else ""
    return f"{head}{code}: {diag.message}{rule}"


def _gh_escape(value: str, is_property: bool) -> str:
    value = value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return value.replace(":", "%3A").replace(",", "%2C") if is_property else value


def _github_line(diag: Diagnostic) -> str:
    level = {"error": "error", "warning": "warning"}.get(diag.severity, "notice")
    props = {"file": diag.file or None, "line": diag.line, "col": diag.column,
             "title": diag.code}
    fields = ",".join(f"{k}={_gh_escape(str(v), True)}" for k, v in props.items()
                      if v is not None)
    where = f" (at {diag.pointer})" if diag.pointer else ""
    rule = f" (rule: {diag.rule})" if diag.rule else ""
    return f"::{level} {fields}::{_gh_escape(diag.message + where + rule, False)}"


def render_diagnostics(diags: Iterable[Diagnostic], fmt: DiagnosticFormat = "text",
                       limit: int | None = None) -> str:
    """Sorted diagnostics in one format, at most ``limit`` of them (``None`` or 0: all).

    ``text``: ``file:line:col: code: message`` (or ``file#pointer: code: message``);
    ``json``: ``{"diagnostics": [...], "omitted": n}``; ``github``: workflow annotations
    (``::error file=...,line=...::message``). Omitted diagnostics are counted, never lost
    silently.
    """
    ordered = sort_diagnostics(diags)
    shown = ordered[:limit] if limit else ordered
    omitted = len(ordered) - len(shown)
    if fmt == "json":
        doc = {"diagnostics": [d.to_dict() for d in shown], "omitted": omitted}
        return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
    if fmt == "github":
        lines = [_github_line(d) for d in shown]
        more = f"::notice::{omitted} more diagnostics not shown"
    elif fmt == "text":
        lines = [_text_line(d) for d in shown]
        more = f"... {omitted} more diagnostics not shown"
    else:
        raise ValueError(f"unknown diagnostics format {fmt!r}; use one of {DIAGNOSTIC_FORMATS}")
    if omitted:
        lines.append(more)
    return "".join(line + "\n" for line in lines)
