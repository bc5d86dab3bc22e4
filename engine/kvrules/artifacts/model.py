"""What the artifact stage hands to fact extraction: decoded files with their locations."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kvrules.diagnostics import Diagnostic


@dataclass(frozen=True)
class NonFiniteNumber:
    """A JSON ``NaN``/``Infinity``/``-Infinity`` token, kept as a marker and not a float.

    Python's json module would turn these tokens into floats that satisfy ``number`` and
    ``exclusiveMinimum`` in a schema; the marker fails every JSON type instead, so a
    non-finite ``wall_time`` is reported as invalid. It never appears in valid rank fields
    that kvrules reads, but may sit in fields nobody validates (treat it as "not a number").
    """

    token: str

    def __repr__(self) -> str:
        return self.token


class Absent:
    """The value of a field an object does not hold, where ``None`` would read as JSON
    ``null``. One object in every process: it pickles by name, so columns sent from a
    worker still tell absent from any value."""

    __slots__ = ()

    def __reduce__(self) -> str:
        return "ABSENT"

    def __repr__(self) -> str:
        return "<absent>"


ABSENT = Absent()


@dataclass(frozen=True)
class ResultColumns:
    """Fields of a rank document's ``results``, one list per field in file order: the
    structural check gathers them while it checks every result, and the cross checks and
    fact extraction read them instead of walking a thousand results again.

    ``kv_seed_regimes`` holds :data:`ABSENT` for a result without one; ``sample_reasons``
    holds None for a point without them."""

    point_types: list[Any]
    benchmark_ids: list[Any]
    wall_times: list[Any]
    batch_sizes: list[Any]
    total_prefill_tokens: list[Any]
    total_kv_read_tokens: list[Any]
    kv_seed_regimes: list[Any]
    sample_reasons: list[Any]

    @classmethod
    def read(cls, results: list[dict[str, Any]]) -> "ResultColumns":
        """The columns of schema-valid ``results`` (for a document the fast path did not
        vouch for, or one built by hand)."""
        points = [result["point"] for result in results]
        return cls([point["point_type"] for point in points],
                   [point["benchmark_id"] for point in points],
                   [result["fpms"][0]["wall_time"] for result in results],
                   [point["batch_size"] for point in points],
                   [point["total_prefill_tokens"] for point in points],
                   [point["total_kv_read_tokens"] for point in points],
                   [result.get("kv_seed_regime", ABSENT) for result in results],
                   [point.get("sample_reasons") for point in points])


@dataclass(frozen=True)
class Document:
    """One decoded JSON object and where it came from (``relpath`` is relative to the input).

    ``columns``: a rank document's result columns when validation gathered them. ``raw``:
    the file's bytes, when loading left the ``results`` out of ``data`` (see
    :meth:`results`)."""

    path: Path
    relpath: str
    data: dict[str, Any]
    columns: ResultColumns | None = field(default=None, compare=False, repr=False)
    raw: bytes | None = field(default=None, compare=False, repr=False)
    _decoded: list[list[Any]] = field(default_factory=list, init=False, compare=False,
                                      repr=False)

    def results(self) -> list[Any]:
        """The document's ``results``: in ``data``, or decoded again from ``raw``. Loading
        leaves them out once their columns are gathered, so a cell's next rank file decodes
        into memory just freed instead of beside them; a cell read result by result (an
        error to locate, ranks holding other points) decodes the same bytes again, once."""
        if "results" in self.data or self.raw is None:
            return self.data.get("results", [])  # type: ignore[no-any-return]
        if not self._decoded:
            from kvrules.artifacts.jsonio import decode_json  # (jsonio imports this module)
            self._decoded.append(decode_json(self.raw)["results"])
        return self._decoded[0]

    def result_columns(self) -> ResultColumns:
        """The columns of this rank document's results (schema-valid: every field read is
        there)."""
        return self.columns if self.columns is not None else ResultColumns.read(self.results())

    def benchmark_ids(self) -> list[Any]:
        """The ``benchmark_id`` of every result, in file order (a hand-built document may
        hold nothing else)."""
        if self.columns is not None:
            return self.columns.benchmark_ids
        return [result["point"]["benchmark_id"] for result in self.results()]


@dataclass(frozen=True)
class TextFile:
    """A small text file read literally (``run.sh``); never executed."""

    path: Path
    relpath: str
    text: str


@dataclass
class CellEvidence:
    """Everything on disk about one cell, structurally checked, not judged.

    ``ranks`` are sorted by ``dp.rank`` then path. ``diagnostics`` hold the structural
    evidence errors of spec section 3 (first group); when non-empty the cell is an error
    cell and is not classified, but its readable points are still reported.
    """

    campaign: str
    root: Path
    cell_id: str
    cell_dir: Path
    plan: Document | None = None
    plan_cell: dict[str, Any] | None = None
    plan_cell_index: int | None = None
    generator_overrides: Document | None = None
    generator_request: Document | None = None
    run_sh: TextFile | None = None
    provenance: list[Document] = field(default_factory=list)
    ranks: list[Document] = field(default_factory=list)
    sidecars: list[Document] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)

    @property
    def workload_kind(self) -> str | None:
        """The plan's workload kind, or the single point type seen when there is no plan."""
        if self.plan_cell is not None:
            kind = self.plan_cell.get("workload_kind")
            return kind if isinstance(kind, str) else None
        kinds = {r.get("point", {}).get("point_type") for d in self.ranks
                 for r in d.results() if isinstance(r, dict)}
        return kinds.pop() if len(kinds) == 1 else None
