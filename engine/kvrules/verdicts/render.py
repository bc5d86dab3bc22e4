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
from operator import attrgetter
from typing import Any, Iterable, Iterator, Literal, Sequence

import orjson

from kvrules.artifacts.jsonio import DIGITS_AS_ZERO
from kvrules.diagnostics import Diagnostic, sort_diagnostics, text_line
from kvrules.verdicts.model import (KVRULES_VERSION, CellVerdict, PointVerdict, PointVerdicts,
                                    PolicyIdentity, Report, add_summaries, summarize)

DiagnosticFormat = Literal["text", "json", "github"]
DIAGNOSTIC_FORMATS: tuple[DiagnosticFormat, ...] = ("text", "json", "github")

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

    The layout is ``json.dumps(report.to_dict(), indent=2, ensure_ascii=False)`` and a
    newline, except that a point record is written on one line, the bytes of its ``jsonl``
    record: a cell of 500 points reads as 500 lines instead of 10,000 (one changed verdict
    is one changed line in a diff), and the document is about the size of the ``jsonl``
    stream instead of 40% larger. The summary comes last, so running totals are all it needs.
    """
    yield (f'{{\n  "kvrules_version": {_dumps(kvrules_version, True)},\n'
           f'  "policy": {_nested(_dumps(policy.to_dict(), True), 1)},\n  "cells": [')
    total = summarize([])
    points = PointRecords()
    first = True
    for cell in cells:
        yield "\n    " if first else ",\n    "
        yield from _cell_document(cell, points)
        first = False
        total = add_summaries(total, summarize([cell]))
    yield ("]" if first else "\n  ]") + \
        f',\n  "summary": {_nested(_dumps(total.to_dict(), True), 1)}\n}}\n'


def _cell_document(cell: CellVerdict, points: "PointRecords") -> tuple[str, ...]:
    """One cell of the json document, two levels down, in pieces; its points (``points`` is
    the cell record's last key), one record per line four levels down, come from ``points``
    as one piece of their own (hundreds of kilobytes: added to the others, they were copied
    twice more per cell, a third of the renderer's time)."""
    head = _nested(_dumps(cell.to_dict(with_points=False), True), 2)[:-len("\n    }")]
    if not cell.points:
        return (head + ',\n      "points": []\n    }',)
    return (head + ',\n      "points": [\n' + _POINT_INDENT,
            points.joined(cell.points, ",\n" + _POINT_INDENT, ""), "\n      ]\n    }")


_COORDINATES = ("benchmark_id", "batch_size", "total_prefill_tokens", "total_kv_read_tokens")
_POINT_INDENT = " " * 8
"""A point record of the json document sits in ``cells[i].points[j]``: four levels down."""


class PointRecords:
    """Point records as :func:`_dumps` writes them, a hundred thousand per report at speed.

    Points of one class share everything after their coordinates (regimes, status, trace,
    reasons), so that part is encoded once per distinct verdict and the rest is formatted:
    an ``int`` reads the same in every JSON encoder (``str(int)``). A point with any other
    field type takes the general encoder. A record is compact JSON without a newline: a
    JSON Lines record, and a line of the json document.
    """

    def __init__(self) -> None:
        self._verdicts: dict[tuple[Any, ...], str] = {}
        self._strings: dict[str, str] = {}

    def records(self, points: Sequence[PointVerdict]) -> list[str]:
        """The records of a cell's points, field by field: each field's values are gathered
        and their types checked once for all points."""
        columns = _plain_columns(points)
        if columns is None:
            return list(map(self.record, points))
        return self._formatted(columns, points)

    def record(self, point: PointVerdict) -> str:
        """One point's record."""
        columns = _plain_columns((point,))
        if columns is None:
            return self._general(point)
        return self._formatted(columns, (point,))[0]

    def lines(self, points: Sequence[PointVerdict]) -> str:
        """The JSON Lines text of a cell's points, every record ending in a newline."""
        return self.joined(points, "\n", "\n")

    def joined(self, points: Sequence[PointVerdict], between: str, end: str) -> str:
        """A cell's records as one text, each followed by ``between`` and the last by
        ``end``, joined once: a class's verdict part (most of a record) goes into the text
        without being copied into a record string of its own first."""
        columns = _plain_columns(points)
        if columns is None:
            return between.join(self.records(points)) + end if len(points) else ""
        coordinates, verdict = columns[:6], columns[6:]
        tails = self._tails(verdict, points)
        if not tails:
            return ""
        followed = {tail: tail + between for tail in set(tails)}
        parts = [""] * (2 * len(tails))
        parts[::2] = self._heads(coordinates)
        parts[1::2] = map(followed.__getitem__, tails)
        parts[-1] = tails[-1] + end
        return "".join(parts)

    def _formatted(self, columns: list[Sequence[Any]], points: Sequence[PointVerdict]
                   ) -> list[str]:
        """Records of plain points from their columns: the coordinates are formatted, the
        verdict part is looked up (encoded for its first point)."""
        coordinates, verdict = columns[:6], columns[6:]
        return list(map(str.__add__, self._heads(coordinates), self._tails(verdict, points)))

    def _heads(self, coordinates: list[Sequence[Any]]) -> list[str]:
        """The records' beginnings, up to the verdict part: kind and coordinates."""
        (cell_ids, bids, point_types, batches, prefills, kv_reads) = coordinates
        rows = zip(self._strings_of(cell_ids), bids, self._strings_of(point_types), batches,
                   prefills, kv_reads)
        return [f'{{"kind":"point","cell_id":{c},"benchmark_id":{b},"point_type":{t},'
                f'"batch_size":{n},"total_prefill_tokens":{p},"total_kv_read_tokens":{k},'
                for c, b, t, n, p, k in rows]

    def _tails(self, verdict: list[Sequence[Any]], points: Sequence[PointVerdict]
               ) -> list[str]:
        """The encoded verdict part of every point, by the point's verdict fields (points of
        one class share it; ``verdict`` holds their columns); the memo is emptied before a
        cell, never during one."""
        known = self._verdicts
        if len(known) > 4096:
            known.clear()
        keys: list[tuple[Any, ...]] | None = None
        if len(points) and all(column.count(column[0]) == len(column)  # one verdict (the
                               for column in verdict):  # usual cell, found in C)
            some = {tuple(column[0] for column in verdict): 0}
        else:
            keys = list(zip(*verdict))
            some = dict(zip(keys, range(len(keys))))  # a point of every key
        for key, i in some.items():
            if key not in known:  # (its tail is written from the key's fields alone)
                known[key] = self._tail(_point(points, i))
        if keys is None:
            return [known[next(iter(some))]] * len(points)
        return list(map(known.__getitem__, keys))

    def _strings_of(self, values: Sequence[str]) -> Iterable[str]:
        """The JSON text of every string of a column that holds a few distinct ones (a
        cell's id, its point types), looked up in C."""
        texts = {value: self._string(value) for value in set(values)}
        return map(texts.__getitem__, values)

    def _string(self, value: str) -> str:
        out = self._strings.get(value)
        if out is None:
            if len(self._strings) > 4096:
                self._strings.clear()
            out = self._strings[value] = _dumps(value, False)
        return out

    def _tail(self, point: PointVerdict) -> str:
        """The verdict part of the record: its keys after the coordinates, then the end."""
        part = point.to_dict()
        for name in ("kind", "cell_id", "point_type", *_COORDINATES):
            del part[name]
        return _dumps(part, False)[1:]

    def _general(self, point: PointVerdict) -> str:
        return _dumps(point.to_dict(), False)


_COLUMNS = [(attrgetter(name), kinds) for name, kinds in (
    ("cell_id", {str}), ("benchmark_id", {int}), ("point_type", {str}), ("batch_size", {int}),
    ("total_prefill_tokens", {int}), ("total_kv_read_tokens", {int}),
    ("native_regime", {str, type(None)}), ("kv_seed_regime", {str, type(None)}),
    ("eligible", {bool}), ("status", {str}), ("decided_by", {str, type(None)}),
    ("trace", {tuple}), ("reasons", {tuple}))]
"""A record's fields in order (coordinates, then the verdict part that keys a record's
tail), and the classes the formatted path takes."""


def _plain_columns(points: Sequence[PointVerdict]) -> list[Sequence[Any]] | None:
    """Each field's values over all points, or None when some value is not of a class the
    formatted path writes as the general encoder would: int coordinates (not bools),
    strings where strings belong, tuples of anything (the verdict part goes through the
    general encoder; the classes also keep ``1`` and ``True`` apart in its memo). Points
    kept as columns give theirs."""
    kept = points.columns if isinstance(points, PointVerdicts) else None
    columns: list[Sequence[Any]] = []
    for n, (get, kinds) in enumerate(_COLUMNS):
        column = kept[n] if kept is not None else list(map(get, points))
        if not set(map(type, column)) <= kinds:
            return None
        columns.append(column)
    return columns


def _point(points: Sequence[PointVerdict], i: int) -> PointVerdict:
    """Point ``i``, without building the others of points kept as columns."""
    return points.point(i) if isinstance(points, PointVerdicts) else points[i]


def _jsonl_line(record: dict[str, Any]) -> str:
    return _dumps(record, False) + "\n"


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
    lines = PointRecords().lines
    for cell in cells:
        if cell.points:
            yield lines(cell.points)
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
