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
from dataclasses import dataclass
from io import StringIO
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Literal

import orjson

from kvrules.artifacts.jsonio import DIGITS_AS_ZERO
from kvrules.diagnostics import Diagnostic, sort_diagnostics
from kvrules.verdicts.model import (KVRULES_VERSION, CellVerdict, PolicyIdentity, Report,
                                    Summary, summarize)

if TYPE_CHECKING:
    from rich.table import Table

DiagnosticFormat = Literal["text", "json", "github"]
DIAGNOSTIC_FORMATS: tuple[DiagnosticFormat, ...] = ("text", "json", "github")

TABLE_WIDTH = 120
"""Default width of :func:`render_table` when the caller does not know its terminal."""


# --- JSON and JSON Lines -------------------------------------------------------------------



def _dumps(value: Any, indent: bool) -> str:
    """``json.dumps(value, ensure_ascii=False)`` (compact or ``indent=2``), the same bytes,
    through orjson where it provably agrees.

    orjson refuses what the stdlib writes differently (ints beyond 64 bits, lone surrogates,
    non-str keys). Floats it writes in other notations (``0.00001`` for ``1e-05``) and
    infinities as ``null``: with every digit read as ``0`` a float shows as ``0.`` or
    ``0e``, so output holding either, or ``null``, takes the stdlib encoder (strings
    holding them, and real nulls, are rare in reports and only cost that)."""
    try:
        out = orjson.dumps(value, option=orjson.OPT_INDENT_2 if indent else 0)
    except (TypeError, orjson.JSONEncodeError):
        out = b""
    if out:
        masked = out.translate(DIGITS_AS_ZERO)
        if b"0." not in masked and b"0e" not in masked and b"null" not in out:
            return out.decode()
    if indent:
        return json.dumps(value, indent=2, ensure_ascii=False)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def render_json(report: Report) -> str:
    """The whole report as one JSON document (spec section 5), ending in a newline."""
    return "".join(iter_json(report.policy, report.cells, report.kvrules_version))


def _nested(text: str, depth: int) -> str:
    """``text`` (a value dumped with indent=2) as it reads ``depth`` levels down."""
    return text.replace("\n", "\n" + "  " * depth)


def iter_json(policy: PolicyIdentity, cells: Iterable[CellVerdict],
              kvrules_version: str = KVRULES_VERSION) -> Iterator[str]:
    """The ``--format json`` document in pieces, one cell in memory at a time.

    The bytes are exactly ``json.dumps(report.to_dict(), indent=2, ensure_ascii=False)`` and
    a newline: the summary comes last, so running totals are all it needs.
    """
    yield (f'{{\n  "kvrules_version": {_dumps(kvrules_version, True)},\n'
           f'  "policy": {_nested(_dumps(policy.to_dict(), True), 1)},\n  "cells": [')
    total = summarize([])
    first = True
    for cell in cells:
        yield ("\n    " if first else ",\n    ") + _nested(_dumps(cell.to_dict(), True), 2)
        first = False
        total = _add_summaries(total, summarize([cell]))
    yield ("]" if first else "\n  ]") + \
        f',\n  "summary": {_nested(_dumps(total.to_dict(), True), 1)}\n}}\n'


def _jsonl_line(record: dict[str, Any]) -> str:
    return _dumps(record, False) + "\n"


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

@dataclass(frozen=True)
class TableRow:
    """What the table shows of one cell: a few strings, not its points (a long run holds
    one of these per cell, never the verdicts themselves)."""

    campaign: str
    cell_id: str
    workload: str
    status: str
    points: str
    outcome: str
    qualifications: dict[str, str]
    errors: tuple[Diagnostic, ...]


def table_row(cell: CellVerdict) -> TableRow:
    """The table's view of ``cell``."""
    return TableRow(cell.campaign, cell.cell_id, cell.workload_kind or "-", cell.status,
                    f"{cell.points_eligible}/{len(cell.points)} eligible", _outcome(cell),
                    {name: _qualification_cell(cell, name) for name in cell.qualifications},
                    tuple(sort_diagnostics(cell.errors)))


def _qualification_cell(cell: CellVerdict, name: str) -> str:
    q = cell.qualifications[name]
    if q.eligible:
        return "eligible"
    failed = ", ".join(f.id for f in q.failed)
    return f"no ({failed})" if failed else "no"


def _outcome(cell: CellVerdict) -> str:
    """Regime counts of a classified cell, one per line; the error codes of an error cell."""
    if cell.status == "error" and cell.errors:
        return "\n".join(dict.fromkeys(e.code for e in cell.errors))
    return "\n".join(f"{regime} {n}" for regime, n in cell.counts.items()) or "-"


def _campaign_table(rows: list[TableRow], names: list[str]) -> "Table":
    from rich import box
    from rich.table import Table
    from rich.text import Text
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1, 0, 0),
                  highlight=False)
    table.add_column("cell", overflow="fold", min_width=8)
    table.add_column("workload", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("points", no_wrap=True)
    table.add_column("regimes / errors", overflow="fold", min_width=13)
    for name in names:
        table.add_column(name.replace("_", " "), overflow="fold", min_width=8)
    for row in rows:
        status = Text(row.status, style="red" if row.status == "error" else "green")
        table.add_row(Text(row.cell_id), Text(row.workload), status, Text(row.points),
                      Text(row.outcome),
                      *(Text(row.qualifications.get(n, "-")) for n in names))
    return table


def _by_campaign(rows: Iterable[TableRow]) -> list[tuple[str, list[TableRow]]]:
    """Consecutive rows of one campaign, in report order."""
    groups: list[tuple[str, list[TableRow]]] = []
    for row in rows:
        if not groups or groups[-1][0] != row.campaign:
            groups.append((row.campaign, []))
        groups[-1][1].append(row)
    return groups


def _error_lines(rows: list[TableRow]) -> list[str]:
    lines = [f"  {row.cell_id}: {_text_line(diag, prefix=row.campaign)}"
             for row in rows for diag in row.errors]
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
    return render_table_rows(report.policy, [table_row(c) for c in report.cells],
                             report.summary, width, color)


def table_of(policy: PolicyIdentity, cells: Iterable[CellVerdict], width: int = TABLE_WIDTH,
             color: bool = False) -> str:
    """:func:`render_table` of a stream of cells, keeping only their rows (flat memory)."""
    rows: list[TableRow] = []
    total = summarize([])
    for cell in cells:
        rows.append(table_row(cell))
        total = _add_summaries(total, summarize([cell]))
    return render_table_rows(policy, rows, total, width, color)


def render_table_rows(policy: PolicyIdentity, rows: list[TableRow], summary: Summary,
                      width: int = TABLE_WIDTH, color: bool = False) -> str:
    """The table of :func:`render_table` from the cells' rows and the run's summary."""
    from rich.console import Console
    from rich.text import Text
    out = StringIO()
    console = Console(file=out, width=width, force_terminal=color, no_color=not color,
                      color_system="standard" if color else None, highlight=False,
                      emoji=False, markup=False, legacy_windows=False)
    names = sorted({name for row in rows for name in row.qualifications})
    for campaign, group in _by_campaign(rows):
        console.print(Text(campaign, style="bold"), soft_wrap=True)
        console.print(_campaign_table(group, names))
        console.print()
    for line in [*_error_lines(rows), _summary_line(summary), _policy_line(policy)]:
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
