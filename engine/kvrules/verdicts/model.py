"""The verdict contract (spec section 5): what every consumer reads, and nothing else.

Plain dataclasses with ``to_dict``/``from_dict`` so a report round-trips through JSON and
consumers can be fed either a live classification or a saved report.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, fields
from operator import attrgetter, truth
from typing import Any, overload

from kvrules.diagnostics import Diagnostic
from kvrules.policy.model import PolicyIdentity as PolicyIdentity

KVRULES_VERSION = "0.1.0"


@dataclass(frozen=True)
class FailedCondition:
    """One failed condition of a cell-level qualification (e.g. ``D9``) with its reason."""

    id: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "reason": self.reason}


@dataclass(frozen=True)
class Qualification:
    """A cell-level qualification group such as ``dense_synthetic_kv``."""

    eligible: bool
    failed: tuple[FailedCondition, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"eligible": self.eligible, "failed": [f.to_dict() for f in self.failed]}


@dataclass(slots=True)
class PointVerdict:
    """The verdict of one point (one ``benchmark_id`` of a cell).

    Not frozen: a corpus makes one per point, and a frozen dataclass costs ~4x to build.
    Treat it as read-only all the same.
    """

    cell_id: str
    benchmark_id: int
    point_type: str
    batch_size: int
    total_prefill_tokens: int
    total_kv_read_tokens: int
    native_regime: str | None
    kv_seed_regime: str | None
    eligible: bool
    status: str
    decided_by: str | None
    trace: tuple[str, ...]
    reasons: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "point", "cell_id": self.cell_id, "benchmark_id": self.benchmark_id,
                "point_type": self.point_type, "batch_size": self.batch_size,
                "total_prefill_tokens": self.total_prefill_tokens,
                "total_kv_read_tokens": self.total_kv_read_tokens,
                "native_regime": self.native_regime, "kv_seed_regime": self.kv_seed_regime,
                "eligible": self.eligible, "status": self.status,
                "decided_by": self.decided_by, "trace": list(self.trace),
                "reasons": list(self.reasons)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "PointVerdict":
        return cls(cell_id=d["cell_id"], benchmark_id=d["benchmark_id"],
                   point_type=d["point_type"], batch_size=d["batch_size"],
                   total_prefill_tokens=d["total_prefill_tokens"],
                   total_kv_read_tokens=d["total_kv_read_tokens"],
                   native_regime=d.get("native_regime"), kv_seed_regime=d.get("kv_seed_regime"),
                   eligible=d["eligible"], status=d["status"], decided_by=d.get("decided_by"),
                   trace=tuple(d.get("trace", ())), reasons=tuple(d.get("reasons", ())))


POINT_FIELDS = tuple(f.name for f in fields(PointVerdict))
"""A point verdict's fields in order: the columns of :class:`PointVerdicts`."""
_POINT_FIELD_INDEX = {name: i for i, name in enumerate(POINT_FIELDS)}


class PointVerdicts(Sequence[PointVerdict]):
    """A cell's point verdicts kept as columns, one per field of :class:`PointVerdict` in
    order; the objects are built the first time the points are read one by one, then kept.

    Reports are written from the columns: building a hundred thousand objects only to read
    their fields back cost a tenth of a run's CPU. Equal to any sequence of the same point
    verdicts (a tuple included), and pickled as its columns.
    """

    __slots__ = ("columns", "_built")

    def __init__(self, columns: Sequence[Sequence[Any]]) -> None:
        if len(columns) != len(POINT_FIELDS) or len({len(c) for c in columns}) > 1:
            raise ValueError("one column per point verdict field, all of one length")
        self.columns: tuple[Sequence[Any], ...] = tuple(columns)
        self._built: tuple[PointVerdict, ...] | None = None

    def column(self, name: str) -> Sequence[Any]:
        """The field ``name`` of every point, in order."""
        return self.columns[_POINT_FIELD_INDEX[name]]

    def point(self, i: int) -> PointVerdict:
        """Point ``i`` alone (an object of its own when the points were not read yet)."""
        if self._built is not None:
            return self._built[i]
        return PointVerdict(*(column[i] for column in self.columns))

    def _points(self) -> tuple[PointVerdict, ...]:
        if self._built is None:
            self._built = tuple(map(PointVerdict, *self.columns))
        return self._built

    def __len__(self) -> int:
        return len(self.columns[0])

    @overload
    def __getitem__(self, i: int) -> PointVerdict: ...
    @overload
    def __getitem__(self, i: slice) -> tuple[PointVerdict, ...]: ...

    def __getitem__(self, i: int | slice) -> PointVerdict | tuple[PointVerdict, ...]:
        return self._points()[i]

    def __iter__(self) -> Iterator[PointVerdict]:
        return iter(self._points())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PointVerdicts):
            return self.columns == other.columns
        if isinstance(other, Sequence):
            return self._points() == tuple(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # like the tuple of unhashable points it stands for

    def __reduce__(self) -> tuple[Any, ...]:
        return (PointVerdicts, (tuple(map(list, self.columns)),))

    def __repr__(self) -> str:
        return f"PointVerdicts({list(self._points())!r})"


def _point_column(points: Sequence[PointVerdict], name: str) -> Iterable[Any]:
    """One field of every point: a column as it is kept, or read off each object."""
    if isinstance(points, PointVerdicts):
        return points.column(name)
    return map(attrgetter(name), points)


@dataclass(frozen=True)
class CellVerdict:
    """The verdict of one cell: status, evidence errors, qualifications and its points."""

    campaign: str
    cell_id: str
    workload_kind: str | None
    status: str
    errors: tuple[Diagnostic, ...]
    qualifications: dict[str, Qualification]
    points: Sequence[PointVerdict]
    trace: tuple[str, ...] = ()

    @property
    def counts(self) -> dict[str, int]:
        """Points per formal regime (sorted keys); error points count under ``error``."""
        out = Counter(_point_column(self.points, "kv_seed_regime"))  # a loop in C
        if None in out:
            out["error"] = out.get("error", 0) + out.pop(None)
        return dict(sorted(out.items()))

    @property
    def points_eligible(self) -> int:
        return sum(map(truth, _point_column(self.points, "eligible")))

    def to_dict(self, with_points: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": "cell", "campaign": self.campaign, "cell_id": self.cell_id,
            "workload_kind": self.workload_kind, "status": self.status,
            "errors": [e.to_dict() for e in self.errors]}
        for name, q in sorted(self.qualifications.items()):
            out[name] = q.to_dict()
        out.update({"counts": self.counts, "points_total": len(self.points),
                    "points_eligible": self.points_eligible, "trace": list(self.trace)})
        if with_points:
            out["points"] = [p.to_dict() for p in self.points]
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any], qualification_names: tuple[str, ...] = ()) -> "CellVerdict":
        quals = {}
        for name in qualification_names or tuple(k for k, v in d.items()
                                                 if isinstance(v, dict) and "failed" in v):
            if name in d:
                q = d[name]
                quals[name] = Qualification(q["eligible"], tuple(
                    FailedCondition(f["id"], f["reason"]) for f in q["failed"]))
        return cls(campaign=d["campaign"], cell_id=d["cell_id"],
                   workload_kind=d.get("workload_kind"), status=d["status"],
                   errors=tuple(Diagnostic.from_dict(e) for e in d.get("errors", [])),
                   qualifications=quals,
                   points=tuple(PointVerdict.from_dict(p) for p in d.get("points", [])),
                   trace=tuple(d.get("trace", ())))


@dataclass(frozen=True)
class Summary:
    """The report's counts: cells, cells in error, points, eligible points, by regime."""

    cells: int
    cells_error: int
    points: int
    points_eligible: int
    counts: dict[str, int]

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "summary", "cells": self.cells, "cells_error": self.cells_error,
                "points": self.points, "points_eligible": self.points_eligible,
                "counts": dict(sorted(self.counts.items()))}


def summarize(cells: list[CellVerdict]) -> Summary:
    """Totals over cells, in a fixed key order."""
    counts: dict[str, int] = {}
    for c in cells:
        for k, v in c.counts.items():
            counts[k] = counts.get(k, 0) + v
    return Summary(cells=len(cells), cells_error=sum(1 for c in cells if c.status == "error"),
                   points=sum(len(c.points) for c in cells),
                   points_eligible=sum(c.points_eligible for c in cells), counts=counts)


def add_summaries(a: Summary, b: Summary) -> Summary:
    """Running totals of a stream of cells (the cells themselves are not kept)."""
    counts = dict(a.counts)
    for regime, n in b.counts.items():
        counts[regime] = counts.get(regime, 0) + n
    return Summary(cells=a.cells + b.cells, cells_error=a.cells_error + b.cells_error,
                   points=a.points + b.points,
                   points_eligible=a.points_eligible + b.points_eligible, counts=counts)


@dataclass(frozen=True)
class Report:
    """One classification run: the policy that decided and every cell verdict."""

    policy: PolicyIdentity
    cells: tuple[CellVerdict, ...]
    kvrules_version: str = KVRULES_VERSION

    @property
    def summary(self) -> Summary:
        return summarize(list(self.cells))

    @property
    def exit_code(self) -> int:
        """0 when every cell was classified, 1 when any cell is in error."""
        return 1 if any(c.status == "error" for c in self.cells) else 0

    def to_dict(self) -> dict[str, Any]:
        return {"kvrules_version": self.kvrules_version, "policy": self.policy.to_dict(),
                "cells": [c.to_dict() for c in self.cells],
                "summary": self.summary.to_dict()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Report":
        p = d["policy"]
        return cls(policy=PolicyIdentity(p["name"], p["version"], p["digest"],
                                         p.get("parameters", {})),
                   cells=tuple(CellVerdict.from_dict(c) for c in d["cells"]),
                   kvrules_version=d.get("kvrules_version", KVRULES_VERSION))
