"""The point facts of one cell, read column by column and built one by one on demand.

A cell holds a point fact per benchmark_id and rank (100,000 in a large campaign), but the
engine sees one fact per point class and the report reads five coordinates per point. So
extraction keeps the values found in the rank documents' results as columns and answers two
questions cheaply: one field over every copy (:meth:`PointTable.column`, a list), and one
copy's whole fact (:meth:`PointTable.fact`, built the first time it is asked for and kept,
so an edited fact is what every later question sees).

Copies come in a fixed order: the reported rows (the lowest rank holding each benchmark_id,
in benchmark_id order), then the copies on every other rank in file order.
"""
from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Iterator, overload

from kvrules.artifacts.model import ABSENT as _ABSENT
from kvrules.artifacts.model import Absent, Document
from kvrules.facts.model import CellFacts, Fact, PointRow

POINT_PATHS = {"native_regime": "/kv_seed_regime", "native_skip_reason": "/kv_seed_regime",
               "sample_reasons": "/point/sample_reasons", "point_type": "/point/point_type",
               "total_kv_read_tokens": "/point/total_kv_read_tokens",
               "batch_size": "/point/batch_size", "benchmark_id": "/point/benchmark_id",
               "total_prefill_tokens": "/point/total_prefill_tokens",
               "rank": "", "on_ranks": "/point/benchmark_id", "views": ""}
"""Pointer suffixes of point fields below ``/results/<i>`` (shared by every point fact)."""

COORDINATES = ("benchmark_id", "point_type", "batch_size", "total_prefill_tokens",
               "total_kv_read_tokens")
VIEW_KEYS = COORDINATES[1:]
"""What must agree across ranks (spec 3), with the native regime: a copy's ``views``."""

SKIP = "skip:"
"""A native regime ``skip:<reason>`` names its reason after this prefix (producer format)."""


_UNCONFUSED = frozenset({str, int, type(None), Absent})
"""Classes no two of which hold equal values (the absent marker's included)."""


_POINT = operator.itemgetter("point")
_COORDINATE_VALUES = operator.itemgetter(*COORDINATES)

Copy = tuple[Document, int, int, int, list[Any], int]
"""One copy: its document, that document's position among the ranks, the result's index,
the rank, the ranks holding its benchmark_id, and the index of its reported row (-1 for a
reported row itself)."""


def _columns_of(results: list[Any]) -> dict[str, list[Any]]:
    """The columns a table keeps, by point field, read from ``results`` items in order."""
    points = list(map(_POINT, results))
    columns = zip(*map(_COORDINATE_VALUES, points)) if points else [[]] * len(COORDINATES)
    return {**dict(zip(COORDINATES, map(list, columns))),
            "native_regime": [result.get("kv_seed_regime", _ABSENT) for result in results],
            "sample_reasons": [p.get("sample_reasons") for p in points]}


def _found(doc: Document) -> dict[str, list[Any]]:
    """One rank document's columns (as :func:`_columns_of` names them): those its structural
    check gathered, else read from its results (a document built by hand need hold nothing
    the table does not read)."""
    c = doc.columns
    if c is None:
        return _columns_of(doc.results())
    return {"benchmark_id": c.benchmark_ids, "point_type": c.point_types,
            "batch_size": c.batch_sizes, "total_prefill_tokens": c.total_prefill_tokens,
            "total_kv_read_tokens": c.total_kv_read_tokens,
            "native_regime": c.kv_seed_regimes, "sample_reasons": c.sample_reasons}


def _copies(found: list[dict[str, list[Any]]], name: str, order: list[int] | None
            ) -> list[Any]:
    """One column over every copy of the usual layout: the first rank's values in
    ``order`` (None: as they are), then every other rank's as they are."""
    first = found[0][name]
    out = list(first) if order is None else [first[i] for i in order]
    for columns in found[1:]:
        out += columns[name]
    return out


_PER_COPY = ("natives", "reasons", "files", "positions", "indexes", "ranks", "held", "row")
"""The per-copy columns besides the coordinates."""


@dataclass(eq=False, repr=False)
class PointTable:
    """Every copy of every point of one cell (see the module docstring for the order).

    It holds columns of the values found, in copy order, not the documents: the raw files
    are freed once the cell is extracted, and a table crosses to another process as a few
    flat lists. A table of built facts only (:meth:`of_rows`) has no columns.
    """

    n_rows: int
    coordinates: dict[str, list[Any]]
    """Each of :data:`COORDINATES` by name (empty in a table of built facts only)."""
    natives: list[Any]
    """The native regime (``kv_seed_regime``), :data:`ABSENT` where a result has none."""
    reasons: list[Any]
    """``sample_reasons`` as found (None where a point has none)."""
    files: list[str]
    positions: list[int]
    """The position of the copy's document among the ranks."""
    indexes: list[int]
    """The copy's index in its document's ``results``."""
    ranks: list[int]
    held: list[list[Any]]
    """The ranks holding the copy's benchmark_id (one list shared by its copies)."""
    row: list[int]
    """The copy of the copy's reported row (-1 for a reported row itself)."""
    built: dict[int, Fact] = field(default_factory=dict)
    """The facts built so far, by copy (what columns read for them: they may be edited)."""

    @classmethod
    def of_ranks(cls, ranks: list[Document]) -> "PointTable":
        """The table of a cell's rank documents (sorted by rank, as loading gives them)."""
        ids = [doc.benchmark_ids() for doc in ranks]
        numbers = [rank_of(doc) for doc in ranks]
        if ids and all(i == ids[0] for i in ids) and len(set(numbers)) == len(numbers) \
                and len(set(ids[0])) == len(ids[0]):
            return cls._same_points(ranks, ids[0], numbers)
        return cls._any_points(ranks, numbers)

    @classmethod
    def _same_points(cls, ranks: list[Document], ids: list[Any],
                     numbers: list[int]) -> "PointTable":
        """Every rank holds the same benchmark_ids once each, in the same order (the usual
        campaign): each id's row is on the first rank, its copies follow rank by rank.
        Every column is whole-list arithmetic (no loop over copies in Python)."""
        n, others = len(ids), len(ranks) - 1
        order = sorted(range(n), key=ids.__getitem__)
        row_of = [0] * n
        for row, i in enumerate(order):
            row_of[i] = row
        files, positions, copy_ranks = [ranks[0].relpath] * n, [0] * n, [numbers[0]] * n
        for r, doc in enumerate(ranks[1:], 1):
            files += [doc.relpath] * n
            positions += [r] * n
            copy_ranks += [numbers[r]] * n
        held = list(numbers)  # every copy's holders: one list, as _any_points shares a
        # benchmark_id's between its copies (a pickled table then holds it once)
        found = list(map(_found, ranks))
        in_order = None if order == list(range(n)) else order
        return cls._of_columns({name: _copies(found, name, in_order) for name in found[0]},
                               n, files, positions, order + list(range(n)) * others,
                               copy_ranks, [held] * len(positions), [-1] * n + row_of * others)

    @classmethod
    def _any_points(cls, ranks: list[Document], numbers: list[int]) -> "PointTable":
        """Any layout. One pass: a benchmark_id's first copy is met before the others, and
        its list of holding ranks is shared by all its copies and complete at the end."""
        rows: list[tuple[Any, Copy]] = []
        peers: list[tuple[Document, int, int, int, list[Any], Any]] = []
        holders: dict[Any, list[Any]] = {}
        for r, doc in enumerate(ranks):
            rank = numbers[r]
            for i, result in enumerate(doc.results()):
                bid = result["point"]["benchmark_id"]
                held = holders.get(bid)
                if held is None:
                    holders[bid] = held = [rank]
                    rows.append((bid, (doc, r, i, rank, held, -1)))
                    continue
                if held[-1] != rank:
                    held.append(rank)
                peers.append((doc, r, i, rank, held, bid))
        rows.sort(key=lambda row: row[0])
        row_of = {bid: n for n, (bid, _) in enumerate(rows)}
        copies = [copy for _, copy in rows] + [(*peer[:5], row_of[peer[5]]) for peer in peers]
        docs, positions, indexes, copy_ranks, held_by, row = \
            map(list, zip(*copies)) if copies else ([], [], [], [], [], [])
        results = list(map(operator.getitem, [doc.results() for doc in docs], indexes))
        return cls._of_columns(_columns_of(results), len(rows), [doc.relpath for doc in docs],
                               positions, indexes, copy_ranks, held_by, row)

    @classmethod
    def _of_columns(cls, columns: dict[str, list[Any]], n_rows: int, files: list[str],
                    positions: list[int], indexes: list[int], ranks: list[int],
                    held: list[list[Any]], row: list[int]) -> "PointTable":
        """The table of the columns :func:`_columns_of` names and the others, by copy."""
        return cls(n_rows, {name: columns[name] for name in COORDINATES},
                   columns["native_regime"], columns["sample_reasons"], files, positions,
                   indexes, ranks, held, row)

    @classmethod
    def of_rows(cls, rows: Sequence[PointRow], peers: Sequence[PointRow] = ()) -> "PointTable":
        """A table over facts already built (hand-made cells, policy test cases)."""
        facts = [row.fact for row in rows] + [row.fact for row in peers]
        return cls(len(rows), {}, [], [], [], [], [], [], [], [], dict(enumerate(facts)))

    def __len__(self) -> int:
        return len(self.natives) if self.coordinates else len(self.built)

    def reported(self) -> "PointTable":
        """This table without the copies on other ranks: what a verdict reads (a row's
        coordinates and source), at half the size when it crosses to another process."""
        n = self.n_rows
        if not self.coordinates or len(self) == n:
            return self
        return replace(self, coordinates={k: v[:n] for k, v in self.coordinates.items()},
                       built={i: fact for i, fact in self.built.items() if i < n},
                       **{name: getattr(self, name)[:n] for name in _PER_COPY})

    @property
    def rows(self) -> "PointRows":
        """The reported rows, as :class:`PointRow` built on demand."""
        return PointRows(self, 0, self.n_rows)

    @property
    def peers(self) -> "PointRows":
        """The copies on every other rank, as :class:`PointRow` built on demand."""
        return PointRows(self, self.n_rows, len(self))

    def column(self, name: str, absent: Any = None) -> list[Any]:
        """The field ``name`` of every copy's fact (``absent`` where the fact lacks it)."""
        if not self.coordinates:  # a table of built facts only
            return [self.built[i].fields.get(name, absent) for i in range(len(self))]
        values = self._raw_column(name, absent)
        for i, fact in self.built.items():  # built facts may have been edited since
            values[i] = fact.fields.get(name, absent)
        return values

    def _raw_column(self, name: str, absent: Any) -> list[Any]:
        if name in self.coordinates:
            return list(self.coordinates[name])
        if name == "native_regime":
            if _ABSENT not in self.natives:  # (found in C: the usual column)
                return list(self.natives)
            return [absent if n is _ABSENT else n for n in self.natives]
        if name == "native_skip_reason":
            return _skip_reasons(self.natives, absent)
        if name == "sample_reasons":
            return [r or [] for r in self.reasons]
        if name == "rank":
            return list(self.ranks)
        if name == "on_ranks":
            return list(self.held)
        if name == "views":
            return self._views()
        return [self.fact(i).fields.get(name, absent) for i in range(len(self))]

    def _same(self) -> list[Any] | None:
        """Every copy's view as a tuple, when equal tuples mean equal values of the same
        classes (else None: views are compared one by one)."""
        columns = [self.coordinates[name] for name in VIEW_KEYS] + [self.natives]
        if all(set(map(type, column)) <= _UNCONFUSED for column in columns):
            return list(zip(*columns))
        return None

    def _views(self) -> list[list[dict[str, Any]]]:
        """Each copy's view and, on other ranks, the reported row's view before it. A copy
        that agrees with its row in values and JSON types shares the row's view object."""
        same = self._same() or list(range(len(self)))  # indexes: compared view by view
        rows = [self.view(i) for i in range(self.n_rows)]
        out: list[list[dict[str, Any]]] = [[v] for v in rows]
        for i in range(self.n_rows, len(self)):
            row = self.row[i]
            if same[i] == same[row]:
                out.append([rows[row], rows[row]])
                continue
            own = self.view(i)
            out.append([rows[row], rows[row] if _plainly_equal(rows[row], own) else own])
        return out

    def views_agreeing(self) -> list[bool] | None:
        """For every copy on another rank, whether its view agrees with its row's (in values
        and JSON types), so its ``views`` holds the row's view twice; None when the table
        holds built facts (an edited fact's views are read from it, copy by copy)."""
        if self.built or not self.coordinates:
            return None
        same = self._same()
        if same is not None:
            return list(map(operator.eq, same[self.n_rows:],
                            [same[row] for row in self.row[self.n_rows:]]))
        return [_plainly_equal(self.view(self.row[i]), self.view(i))
                for i in range(self.n_rows, len(self))]

    def row_of(self, i: int) -> int:
        """The copy of ``i``'s reported row (itself for a row, -1 in a table of built facts)."""
        if not self.coordinates:
            return -1
        return i if i < self.n_rows else self.row[i]

    def view(self, i: int) -> dict[str, Any]:
        """Copy ``i``'s own view: its coordinates and native regime as its rank reports them."""
        c = self.coordinates
        view = {"point_type": c["point_type"][i], "batch_size": c["batch_size"][i],
                "total_prefill_tokens": c["total_prefill_tokens"][i],
                "total_kv_read_tokens": c["total_kv_read_tokens"][i]}
        if self.natives[i] is not _ABSENT:
            view["native_regime"] = self.natives[i]
        return view

    def source(self, i: int) -> tuple[str, str]:
        """The file and JSON pointer of copy ``i``'s result."""
        if i in self.built or not self.coordinates:
            return self.fact(i).source()
        return (self.files[i], f"/results/{self.indexes[i]}")

    def fact(self, i: int) -> Fact:
        """The whole fact of copy ``i`` (built once, then the same object)."""
        fact = self.built.get(i)
        if fact is None:
            fact = self.built[i] = self._build(i)
        return fact

    def _build(self, i: int) -> Fact:
        c, row = self.coordinates, self.row[i]
        bid = c["benchmark_id"][i]
        fields: dict[str, Any] = {name: c[name][i] for name in COORDINATES}
        fields.update(sample_reasons=self.reasons[i] or [], rank=self.ranks[i],
                      on_ranks=self.held[i],
                      views=[self.view(i)] if row < 0 else [self.view(row), self.view(i)])
        native = self.natives[i]
        if native is not _ABSENT:
            fields["native_regime"] = native
            reason = _skip_reason(native, _ABSENT)
            if reason is not _ABSENT:
                fields["native_skip_reason"] = reason
        index = self.indexes[i]
        fact_id = f"p{bid}" if row < 0 else f"p{bid}@{self.positions[i]}.{index}"
        return Fact("point", fact_id, fields, base=(self.files[i], f"/results/{index}"),
                    paths=POINT_PATHS)


def rank_of(doc: Document) -> int:
    """The data-parallel rank an artifact reports (``dp.rank``)."""
    return int(doc.data["dp"]["rank"])


def _skip_reason(native: Any, absent: Any) -> Any:
    """The ``<reason>`` of a native ``skip:<reason>`` regime (a producer format's split)."""
    if native.__class__ is str and native.startswith(SKIP):
        return native[len(SKIP):]
    return absent


def _plainly_equal(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Same keys in the same order holding equal values of the same classes."""
    return a == b and list(a) == list(b) and all(
        x.__class__ is y.__class__ for x, y in zip(a.values(), b.values()))


class PointRows(Sequence[PointRow]):
    """A slice of a :class:`PointTable` as rows; each row's fact is built when read."""

    def __init__(self, table: PointTable, start: int, stop: int) -> None:
        self.table, self.start, self.stop = table, start, stop

    def __len__(self) -> int:
        return self.stop - self.start

    @overload
    def __getitem__(self, i: int) -> PointRow: ...
    @overload
    def __getitem__(self, i: slice) -> list[PointRow]: ...

    def __getitem__(self, i: int | slice) -> PointRow | list[PointRow]:
        if isinstance(i, slice):
            return [self[n] for n in range(len(self))[i]]
        n = range(self.start, self.stop)[i]  # negative indexes and bounds as a list's
        return PointRow(self.table.fact(n))

    def __iter__(self) -> Iterator[PointRow]:
        return (PointRow(self.table.fact(n)) for n in range(self.start, self.stop))


def _skip_reasons(natives: list[Any], absent: Any) -> list[Any]:
    """:func:`_skip_reason` of every copy's native regime, worked out once per distinct
    regime when no two classes of the column hold equal values (a cell has a few)."""
    if set(map(type, natives)) <= _UNCONFUSED:
        reasons = {native: _skip_reason(native, absent) for native in set(natives)}
        return list(map(reasons.__getitem__, natives))
    return [_skip_reason(native, absent) for native in natives]


def point_table(cell: CellFacts) -> PointTable:
    """The table behind a cell's points: the extracted one, or one over hand-built rows."""
    points, peers = cell.points, cell.peer_points
    if isinstance(points, PointRows) and isinstance(peers, PointRows) and \
            points.table is peers.table and len(points) + len(peers) == len(points.table):
        return points.table
    return PointTable.of_rows(points, peers)
