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
import pickle
from collections.abc import Sequence
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


_RARE = ("_reasons", "_files", "_positions", "_indexes", "_ranks", "_held", "_row")
"""Columns read only to build a copy's whole fact or name its source, never for the report's
coordinates: a pickled table carries them packed, unpacked on their first use."""


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


class PointTable:
    """Every copy of every point of one cell (see the module docstring for the order).

    It holds columns of the values found, not the documents: the raw files are freed once
    the cell is extracted, and a table crosses to another process as a few flat lists.
    """

    def __getstate__(self) -> dict[str, Any]:
        """The columns, the rarely read ones (:data:`_RARE`) packed into one string: a
        worker's table is unpickled by the parent, which mostly reads coordinates (the
        packed lists of lists cost it a third of the unpickling)."""
        state = dict(self.__dict__)
        if "_packed" not in state and all(name in state for name in _RARE):
            rare = tuple(state.pop(name) for name in _RARE)
            state["_packed"] = pickle.dumps(rare, protocol=pickle.HIGHEST_PROTOCOL)
        return state

    def __getattr__(self, name: str) -> Any:
        """A packed column, unpacked with the others on the first use of one (reached only
        for an attribute the table does not have)."""
        packed = self.__dict__.pop("_packed", None) if name in _RARE else None
        if packed is None:
            raise AttributeError(name)
        self.__dict__.update(zip(_RARE, pickle.loads(packed)))
        return self.__dict__[name]

    def __init__(self, copies: list[Copy], n_rows: int) -> None:
        """Prefer :meth:`of_ranks` or :meth:`of_rows`."""
        docs, positions, indexes, ranks, held, row = map(list, zip(*copies)) if copies \
            else ([], [], [], [], [], [])
        results = list(map(operator.getitem, [doc.results() for doc in docs], indexes))
        self._keep(_columns_of(results), [doc.relpath for doc in docs], positions, indexes,
                   ranks, held, row, n_rows)

    def _keep(self, columns: dict[str, list[Any]], files: list[str], positions: list[int],
              indexes: list[int], ranks: list[int], held: list[list[Any]], row: list[int],
              n_rows: int) -> None:
        """Keep the columns of the copies (by point field, see :func:`_columns_of`), in copy
        order (lists this table owns)."""
        self.n_rows = n_rows
        self._size = len(columns["native_regime"])
        self._built: dict[int, Fact] = {}
        self._coordinates = {name: columns[name] for name in COORDINATES}
        self._natives, self._reasons = columns["native_regime"], columns["sample_reasons"]
        self._files, self._positions, self._indexes = files, positions, indexes
        self._ranks, self._held, self._row = ranks, held, row

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
        table = cls.__new__(cls)
        table._keep({name: _copies(found, name, in_order) for name in found[0]}, files,
                    positions, order + list(range(n)) * others, copy_ranks,
                    [held] * len(positions), [-1] * n + row_of * others, n)
        return table

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
        return cls([copy for _, copy in rows] + [(*peer[:5], row_of[peer[5]]) for peer in peers],
                   len(rows))

    @classmethod
    def of_rows(cls, rows: Sequence[PointRow], peers: Sequence[PointRow] = ()) -> "PointTable":
        """A table over facts already built (hand-made cells, policy test cases)."""
        table = cls([], len(rows))
        table._built = dict(enumerate([row.fact for row in rows] + [row.fact for row in peers]))
        table._size = len(table._built)
        table._coordinates = {}
        return table

    def __len__(self) -> int:
        return self._size

    def reported(self) -> "PointTable":
        """This table without the copies on other ranks: what a verdict reads (a row's
        coordinates and source), at half the size when it crosses to another process."""
        if not self._coordinates or self._size == self.n_rows:
            return self
        n = self.n_rows
        table = PointTable([], n)
        table._size = n
        table._built = {i: fact for i, fact in self._built.items() if i < n}
        table._coordinates = {name: column[:n] for name, column in self._coordinates.items()}
        for name in ("_natives", "_reasons", "_files", "_positions", "_indexes", "_ranks",
                     "_held", "_row"):
            setattr(table, name, getattr(self, name)[:n])
        return table

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
        if not self._coordinates:  # a table of built facts only
            return [self._built[i].fields.get(name, absent) for i in range(len(self))]
        values = self._raw_column(name, absent)
        for i, fact in self._built.items():  # built facts may have been edited since
            values[i] = fact.fields.get(name, absent)
        return values

    def _raw_column(self, name: str, absent: Any) -> list[Any]:
        if name in self._coordinates:
            return list(self._coordinates[name])
        if name == "native_regime":
            if _ABSENT not in self._natives:  # (found in C: the usual column)
                return list(self._natives)
            return [absent if n is _ABSENT else n for n in self._natives]
        if name == "native_skip_reason":
            return _skip_reasons(self._natives, absent)
        if name == "sample_reasons":
            return [r or [] for r in self._reasons]
        if name == "rank":
            return list(self._ranks)
        if name == "on_ranks":
            return list(self._held)
        if name == "views":
            return self._views()
        return [self.fact(i).fields.get(name, absent) for i in range(len(self))]

    def _views(self) -> list[list[dict[str, Any]]]:
        """Each copy's view and, on other ranks, the reported row's view before it. A copy
        that agrees with its row in values and JSON types shares the row's view object."""
        columns = [self._coordinates[name] for name in VIEW_KEYS] + [self._natives]
        if all(set(map(type, column)) <= _UNCONFUSED for column in columns):
            same: list[Any] = list(zip(*columns))  # equal tuples: equal values and classes
        else:
            same = list(range(len(self)))  # compared view by view below
        rows = [self._view(i) for i in range(self.n_rows)]
        out: list[list[dict[str, Any]]] = [[v] for v in rows]
        for i in range(self.n_rows, len(self)):
            row = self._row[i]
            if same[i] == same[row]:
                out.append([rows[row], rows[row]])
                continue
            own = self._view(i)
            out.append([rows[row], rows[row] if _plainly_equal(rows[row], own) else own])
        return out

    def views_agreeing(self) -> list[bool] | None:
        """For every copy on another rank, whether its view agrees with its row's (in values
        and JSON types), so its ``views`` holds the row's view twice; None when the table
        holds built facts (an edited fact's views are read from it, copy by copy)."""
        if self._built or not self._coordinates:
            return None
        columns = [self._coordinates[name] for name in VIEW_KEYS] + [self._natives]
        if all(set(map(type, column)) <= _UNCONFUSED for column in columns):
            same: list[Any] = list(zip(*columns))
            return list(map(operator.eq, same[self.n_rows:],
                            [same[row] for row in self._row[self.n_rows:]]))
        return [_plainly_equal(self._view(self._row[i]), self._view(i))
                for i in range(self.n_rows, len(self))]

    def row_of(self, i: int) -> int:
        """The copy of ``i``'s reported row (itself for a row, -1 in a table of built facts)."""
        if not self._coordinates:
            return -1
        return i if i < self.n_rows else self._row[i]

    def view(self, i: int) -> dict[str, Any]:
        """Copy ``i``'s own view: its coordinates and native regime as its rank reports them."""
        return self._view(i)

    def _view(self, i: int) -> dict[str, Any]:
        c = self._coordinates
        view = {"point_type": c["point_type"][i], "batch_size": c["batch_size"][i],
                "total_prefill_tokens": c["total_prefill_tokens"][i],
                "total_kv_read_tokens": c["total_kv_read_tokens"][i]}
        if self._natives[i] is not _ABSENT:
            view["native_regime"] = self._natives[i]
        return view

    def source(self, i: int) -> tuple[str, str]:
        """The file and JSON pointer of copy ``i``'s result."""
        if i in self._built or not self._coordinates:
            return self.fact(i).source()
        return (self._files[i], f"/results/{self._indexes[i]}")

    def fact(self, i: int) -> Fact:
        """The whole fact of copy ``i`` (built once, then the same object)."""
        fact = self._built.get(i)
        if fact is None:
            fact = self._built[i] = self._build(i)
        return fact

    def _build(self, i: int) -> Fact:
        c, row = self._coordinates, self._row[i]
        bid = c["benchmark_id"][i]
        fields: dict[str, Any] = {
            "benchmark_id": bid, "point_type": c["point_type"][i],
            "batch_size": c["batch_size"][i], "total_prefill_tokens": c["total_prefill_tokens"][i],
            "total_kv_read_tokens": c["total_kv_read_tokens"][i],
            "sample_reasons": self._reasons[i] or [], "rank": self._ranks[i],
            "on_ranks": self._held[i],
            "views": [self._view(i)] if row < 0 else [self._view(row), self._view(i)]}
        native = self._natives[i]
        if native is not _ABSENT:
            fields["native_regime"] = native
            reason = _skip_reason(native, _ABSENT)
            if reason is not _ABSENT:
                fields["native_skip_reason"] = reason
        index = self._indexes[i]
        fact_id = f"p{bid}" if row < 0 else f"p{bid}@{self._positions[i]}.{index}"
        return Fact("point", fact_id, fields, base=(self._files[i], f"/results/{index}"),
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
