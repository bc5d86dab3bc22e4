"""Turn reports and diagnostics into output: pure functions from data to text.

Nothing here prints, reads the environment or touches files: each function returns a string
(or yields lines), so the CLI decides where the text goes and embedding jobs can reuse it.
Every output is byte-deterministic for the same input.

* :func:`render_json` - the ``--format json`` document of spec section 5: indented, each
  point record on one line (the bytes of its ``jsonl`` record).
* :func:`iter_jsonl` - the ``--format jsonl`` stream: a header, each cell's points then the
  cell itself (without its points), and the summary last; one cell in memory at a time.
* :func:`render_table` - the human table (:mod:`kvrules.verdicts.table`).
* :func:`render_diagnostics` - diagnostics as ``text``, ``json`` or ``github`` annotations.
"""
from __future__ import annotations

import json
from dataclasses import replace
from itertools import repeat
from typing import Any, Iterable, Iterator, Literal, Sequence

from kvrules.diagnostics import Diagnostic, sort_diagnostics, text_line
from kvrules.facts.jsontypes import encode
from kvrules.verdicts.model import (KVRULES_VERSION, POINT_FIELDS, CellVerdict, PointVerdict,
                                    PointVerdicts, PolicyIdentity, Report, add_summaries,
                                    summarize)

DiagnosticFormat = Literal["text", "json", "github"]
DIAGNOSTIC_FORMATS: tuple[DiagnosticFormat, ...] = ("text", "json", "github")

# --- JSON and JSON Lines -------------------------------------------------------------------

def render_json(report: Report) -> str:
    """The whole report as one JSON document (spec section 5), ending in a newline."""
    return "".join(iter_json(report.policy, report.cells, report.kvrules_version))


def _indented(value: Any, depth: int) -> str:
    """``value`` indented by two, as it reads ``depth`` levels down."""
    return encode(value, indent=True).decode().replace("\n", "\n" + "  " * depth)


def iter_json(policy: PolicyIdentity, cells: Iterable[CellVerdict],
              kvrules_version: str = KVRULES_VERSION) -> Iterator[str]:
    """The ``--format json`` document in pieces, one cell in memory at a time.

    The report indented by two and a newline, except that a point record is written on one
    line, the bytes of its ``jsonl`` record: a cell of 500 points reads as 500 lines instead
    of 10,000 (one changed verdict is one changed line in a diff), and the document is about
    the size of the ``jsonl`` stream instead of 40% larger. The summary comes last, so
    running totals are all it needs.
    """
    yield (f'{{\n  "kvrules_version": {_indented(kvrules_version, 1)},\n'
           f'  "policy": {_indented(policy.to_dict(), 1)},\n  "cells": [')
    total = summarize([])
    first = True
    for cell in cells:
        yield "\n    " if first else ",\n    "
        yield from _cell_document(cell)
        first = False
        total = add_summaries(total, summarize([cell]))
    yield ("]" if first else "\n  ]") + f',\n  "summary": {_indented(total.to_dict(), 1)}\n}}\n'


def _cell_document(cell: CellVerdict) -> tuple[str, ...]:
    """One cell of the json document, two levels down, in pieces; its points (the cell
    record's last key), one record per line four levels down, as one piece of their own."""
    head = _indented(cell.to_dict(with_points=False), 2)[:-len("\n    }")]
    if not cell.points:
        return (head + ',\n      "points": []\n    }',)
    return (head + ',\n      "points": [\n' + _POINT_INDENT,
            _point_lines(cell.points, ",\n" + _POINT_INDENT), "\n      ]\n    }")


_POINT_INDENT = " " * 8
"""A point record of the json document sits in ``cells[i].points[j]``: four levels down."""
_POINT_KEYS = ("kind", *POINT_FIELDS)


def _point_lines(points: Sequence[PointVerdict], between: str) -> str:
    """The compact record of every point (a JSON Lines record, a line of the json document),
    ``between`` each two. The records are encoded as one array, from the columns the points
    are kept in (a thousand encodings kept alive cost orjson 15 times more), and split where
    a record begins: a ``"`` in a string is escaped, and a point record holds no object."""
    columns = (points.columns if isinstance(points, PointVerdicts)
               else [[getattr(p, name) for p in points] for name in POINT_FIELDS])
    records = [dict(zip(_POINT_KEYS, row)) for row in zip(repeat("point"), *columns)]
    return encode(records)[1:-1].replace(b'},{"kind":', b"}%s{\"kind\":" % between.encode()
                                         ).decode()


def _jsonl_line(record: dict[str, Any]) -> str:
    return encode(record).decode() + "\n"


def iter_jsonl(policy: PolicyIdentity, cells: Iterable[CellVerdict],
               kvrules_version: str = KVRULES_VERSION) -> Iterator[str]:
    """Yield the report as JSON Lines, each string whole records ending in a newline.

    Order: a ``{"kind": "report"}`` header (version and policy), then for every cell its
    ``point`` records followed by the ``cell`` record without ``points``, and a ``summary``
    record last. The records are exactly the ones of :func:`render_json`, so a reader can
    rebuild the report; only running totals are kept, never the cells already written. A
    cell's point records come as one string (a write per record costs more than the record).
    """
    yield _jsonl_line({"kind": "report", "kvrules_version": kvrules_version,
                       "policy": policy.to_dict()})
    total = summarize([])
    for cell in cells:
        if cell.points:
            yield _point_lines(cell.points, "\n") + "\n"
        yield _jsonl_line(cell.to_dict(with_points=False))
        total = add_summaries(total, summarize([cell]))
    yield _jsonl_line(total.to_dict())


_TABLE_NAMES = ("TABLE_WIDTH", "TableRow", "render_table_rows", "table_of", "table_row")
"""Names of :mod:`kvrules.verdicts.table` this module also offers, imported on first use (a
machine-readable report never loads the table's module)."""


def __getattr__(name: str) -> Any:
    if name in _TABLE_NAMES:
        from kvrules.verdicts import table
        return getattr(table, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def render_table(report: Report, width: int | None = None, color: bool = False) -> str:
    """The human table of ``report`` (see :mod:`kvrules.verdicts.table`)."""
    from kvrules.verdicts.table import render_table_rows, table_row
    return render_table_rows(report.policy, [table_row(c) for c in report.cells],
                             report.summary, width, color)


# --- diagnostics ---------------------------------------------------------------------------

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
        lines = [text_line(d) for d in shown]
        more = f"... {omitted} more diagnostics not shown"
    else:
        raise ValueError(f"unknown diagnostics format {fmt!r}; use one of {DIAGNOSTIC_FORMATS}")
    if omitted:
        lines.append(more)
    return "".join(line + "\n" for line in lines)


def iter_github(cells: Iterable[CellVerdict]) -> Iterator[str]:
    """``--format github``: each evidence error as a workflow annotation on its file
    (relative to where the run started, as the campaign was typed), and a closing notice
    with the run's totals, so a pull request shows what a campaign change broke."""
    total = summarize([])
    for cell in cells:
        for diag in sort_diagnostics(cell.errors):
            where = f"{cell.campaign.rstrip('/')}/{diag.file}" if diag.file else cell.campaign
            yield _github_line(replace(diag, file=where,
                                       message=f"{cell.cell_id}: {diag.message}")) + "\n"
        total = add_summaries(total, summarize([cell]))
    yield (f"::notice title=kvrules::{total.cells} cells ({total.cells_error} in error), "
           f"{total.points_eligible}/{total.points} points eligible\n")


__all__ = ["DIAGNOSTIC_FORMATS", "DiagnosticFormat", "TABLE_WIDTH", "TableRow", "iter_json",
           "iter_github", "iter_jsonl", "render_diagnostics", "render_json", "render_table",
           "render_table_rows", "table_of", "table_row"]
