"""The human table of a classify run: plain text that fits the screen and never splits ids.

People copy cell ids and regimes from it into ``explain --cell``, so no value is ever
broken across lines. Every campaign shares one header; a campaign's name heads its rows.
Given a width (a terminal), columns that do not fit are left out, least useful first, and a
last line says which; without one (a file, a pipe) every column is shown and nothing wraps.
Pure text in, text out: byte-deterministic for the same cells, width and options.
"""
from __future__ import annotations

from dataclasses import dataclass

import json
import textwrap
from functools import cached_property
from typing import Iterable

from kvrules.diagnostics import Diagnostic, sort_diagnostics, text_line
from kvrules.verdicts.model import (CellVerdict, PolicyIdentity, Summary, add_summaries,
                                    summarize)

TABLE_WIDTH = 120
"""Width callers use when they want a bounded table but know no terminal (readiness)."""

GAP = "  "
INDENT = "  "
"""Rows sit under their campaign's name."""

_BOLD, _RED, _GREEN, _RESET = "\x1b[1m", "\x1b[31m", "\x1b[32m", "\x1b[0m"


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
    """``eligible``, or ``no`` with each failed condition id once; ``-`` for a cell in
    error (its evidence decides nothing, so no qualification is claimed for it)."""
    if cell.status == "error":
        return "-"
    q = cell.qualifications[name]
    if q.eligible:
        return "eligible"
    failed = ", ".join(dict.fromkeys(f.id for f in q.failed))
    return f"no ({failed})" if failed else "no"


def _outcome(cell: CellVerdict) -> str:
    """Regime counts of a classified cell, one per line; the error codes of an error cell."""
    if cell.status == "error" and cell.errors:
        return "\n".join(dict.fromkeys(e.code for e in cell.errors))
    return "\n".join(f"{regime} {n}" for regime, n in cell.counts.items()) or "-"


@dataclass(frozen=True)
class _Column:
    """One column of the table: header, a value per row, and when it is dropped to fit."""

    header: str
    values: tuple[str, ...]
    drop_rank: int  # 0: always shown; otherwise left out first when lowest

    @cached_property
    def width(self) -> int:
        return max(len(line) for text in (self.header, *self.values)
                   for line in text.split("\n"))


def _columns(rows: list[TableRow]) -> list[_Column]:
    """Cell, status and outcome always; then, in the order they are given up to fit a
    width: workload first, the qualification columns, the eligible counts last."""
    names = sorted({name for row in rows for name in row.qualifications})
    return [
        _Column("cell", tuple(r.cell_id for r in rows), 0),
        _Column("workload", tuple(r.workload for r in rows), 1),
        _Column("status", tuple(r.status for r in rows), 0),
        _Column("points", tuple(r.points for r in rows), 3),
        _Column("regimes / errors", tuple(r.outcome for r in rows), 0),
        *(_Column(name.replace("_", " "), tuple(r.qualifications.get(name, "-") for r in rows),
                  2) for name in names)]


def _table_width(columns: list[_Column]) -> int:
    return len(INDENT) + sum(c.width for c in columns) + len(GAP) * (len(columns) - 1)


def fit(columns: list[_Column], width: int | None) -> tuple[list[_Column], list[_Column]]:
    """The columns shown within ``width`` (all when None) and those left out."""
    shown = list(columns)
    hidden: list[_Column] = []
    by_rank = sorted((c for c in columns if c.drop_rank), key=lambda c: c.drop_rank)
    while width is not None and _table_width(shown) > width and by_rank:
        column = by_rank.pop(0)
        shown.remove(column)
        hidden.append(column)
    return shown, hidden


def _row_lines(columns: list[_Column], index: int, color: bool) -> list[str]:
    """One table row; a multi-line value (several regimes) takes several lines."""
    cells = [c.values[index].split("\n") for c in columns]
    height = max(len(lines) for lines in cells)
    out = []
    for n in range(height):
        parts = []
        for column, lines in zip(columns, cells):
            text = lines[n] if n < len(lines) else ""
            pad = " " * (column.width - len(text))
            if color and column.header == "status" and text:
                text = (_RED if text == "error" else _GREEN) + text + _RESET
            parts.append(text + pad)
        out.append((INDENT + GAP.join(parts)).rstrip())
    return out


def _header_lines(columns: list[_Column], ascii_only: bool) -> list[str]:
    header = INDENT + GAP.join(c.header.ljust(c.width) for c in columns)
    rule = ("-" if ascii_only else "\u2500") * (_table_width(columns) - len(INDENT))
    return [header.rstrip(), INDENT + rule]


def _by_campaign(rows: list[TableRow]) -> list[tuple[str, list[int]]]:
    """Row indexes of consecutive cells of one campaign, in report order."""
    groups: list[tuple[str, list[int]]] = []
    for i, row in enumerate(rows):
        if not groups or groups[-1][0] != row.campaign:
            groups.append((row.campaign, []))
        groups[-1][1].append(i)
    return groups


def _error_lines(rows: list[TableRow]) -> list[str]:
    lines = [f"  {row.cell_id}: {text_line(diag, prefix=row.campaign)}"
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


def render_table_rows(policy: PolicyIdentity, rows: list[TableRow], summary: Summary,
                      width: int | None = None, color: bool = False,
                      ascii_only: bool = False) -> str:
    """The table of the cells' rows, their errors, the run's summary and the policy.

    ``width``: the terminal's columns (None: as wide as the content); ``color`` adds ANSI
    styles (a terminal only); ``ascii_only`` draws the rule with ``-`` for terminals whose
    encoding has no box-drawing characters.
    """
    columns, hidden = fit(_columns(rows), width)
    lines: list[str] = []
    if rows:
        lines += _header_lines(columns, ascii_only)
    for n, (campaign, indexes) in enumerate(_by_campaign(rows)):
        if n:
            lines.append("")
        lines.append(f"{_BOLD}{campaign}{_RESET}" if color else campaign)
        for i in indexes:
            lines += _row_lines(columns, i, color)
    if rows:
        lines.append("")
    prose = [*_error_lines(rows), _summary_line(summary), _policy_line(policy)]
    if hidden:
        names = ", ".join(c.header for c in hidden)
        prose.append(f"(not shown to fit {width} columns: {names}; "
                     "--format json has everything)")
    lines += prose if width is None else [w for line in prose for w in _wrapped(line, width)]
    return "\n".join(lines) + "\n"


def _wrapped(line: str, width: int) -> list[str]:
    """``line`` broken at spaces only (a path, an id or a regime is never split)."""
    indent = " " * (len(line) - len(line.lstrip(" ")) + 2)
    return textwrap.wrap(line, width, subsequent_indent=indent, break_long_words=False,
                         break_on_hyphens=False) or [line]


def table_of(policy: PolicyIdentity, cells: Iterable[CellVerdict], width: int | None = None,
             color: bool = False, ascii_only: bool = False) -> str:
    """The table of a stream of cells, keeping only their rows (flat memory)."""
    rows: list[TableRow] = []
    total = summarize([])
    for cell in cells:
        rows.append(table_row(cell))
        total = add_summaries(total, summarize([cell]))
    return render_table_rows(policy, rows, total, width, color, ascii_only)
