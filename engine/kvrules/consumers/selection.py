"""Sample selection of spec 6.2: which sample of a physical coordinate gives the formal row.

A *sample* is one verdict point with what the rank artifacts add to it: its ``wall_time`` on
every rank, whether any rank flagged it ``context_clamped``, and its point object on every
rank. Only ``context_clamped`` is read from ``sample_reasons`` for the choice; the regime
stamps are never consulted (the zero-KV prefill rule compares point objects with the
``prefill_real_seed`` stamp ignored, as the spec says).
"""
from __future__ import annotations

from dataclasses import dataclass

from itertools import groupby
from typing import Any, Iterator

from kvrules.artifacts.model import CellEvidence
from kvrules.consumers.codes import COORDINATE_COLLISION, ROW_EVIDENCE_MISSING
from kvrules.diagnostics import Diagnostic, evidence_error
from kvrules.verdicts.model import CellVerdict, PointVerdict

CLAMPED = "context_clamped"
REAL_SEED_STAMP = "prefill_real_seed"
Coordinate = tuple[str, int, int, int]
"""``(point_type, batch_size, total_prefill_tokens, total_kv_read_tokens)``."""


@dataclass(frozen=True)
class Sample:
    """A verdict point and its measurement on each rank (in rank order)."""

    point: PointVerdict
    clamped: bool
    raw_points: tuple[dict[str, Any], ...]
    wall_times: tuple[float, ...]
    result_index: int

    @property
    def coordinate(self) -> Coordinate:
        p = self.point
        return (p.point_type, p.batch_size, p.total_prefill_tokens, p.total_kv_read_tokens)


def samples(cell: CellVerdict, ev: CellEvidence) -> tuple[list[Sample], list[Diagnostic]]:
    """Every verdict point joined with its result on every rank, by ``benchmark_id``."""
    by_rank = [{r["point"]["benchmark_id"]: (i, r) for i, r in enumerate(d.results())}
               for d in ev.ranks]
    out: list[Sample] = []
    errors: list[Diagnostic] = []
    for point in cell.points:
        found = [rank.get(point.benchmark_id) for rank in by_rank]
        if not found or any(f is None for f in found):
            errors.append(_missing(point, ev))
            continue
        results = [f[1] for f in found if f is not None]
        raw = tuple(r["point"] for r in results)
        out.append(Sample(point, any(CLAMPED in (p.get("sample_reasons") or ()) for p in raw),
                          raw, tuple(float(r["fpms"][0]["wall_time"]) for r in results),
                          found[0][0] if found[0] else 0))
    return out, errors


def by_coordinate(items: list[Sample]) -> Iterator[tuple[Coordinate, list[Sample]]]:
    """Samples grouped by coordinate, in coordinate order, by ``benchmark_id`` within."""
    ordered = sorted(items, key=lambda s: (s.coordinate, s.point.benchmark_id))
    for coordinate, group in groupby(ordered, key=lambda s: s.coordinate):
        yield coordinate, list(group)


def select(group: list[Sample]) -> Sample | None:
    """The sample that gives the row, or None for a ``coordinate_collision``.

    Unclamped samples are the candidates: one is taken; none (all clamped) takes the lowest
    ``benchmark_id``; several are a collision unless the zero-KV prefill exception applies.
    """
    candidates = [s for s in group if not s.clamped]
    if len(candidates) == 1:
        return candidates[0]
    if not candidates:
        return min(group, key=lambda s: s.point.benchmark_id)
    return zero_kv_prefill(candidates)


def zero_kv_prefill(candidates: list[Sample]) -> Sample | None:
    """The one native ``not_applicable`` zero-KV prefill sample when every other candidate is
    native ``real_prefix`` with the same point once ``benchmark_id`` and the
    ``prefill_real_seed`` stamp are ignored; otherwise None.

    Why: a producer may measure a zero-KV prefill both unseeded and as the root of a real
    prefix chain; the two are the same measurement, and the unseeded one is the formal row.
    """
    na = [s for s in candidates if s.point.native_regime == "not_applicable"
          and s.point.point_type == "prefill" and s.point.total_kv_read_tokens == 0]
    if len(na) != 1:
        return None
    others = [s for s in candidates if s is not na[0]]
    if all(s.point.native_regime == "real_prefix" and _same_point(s, na[0]) for s in others):
        return na[0]
    return None


def _normalized(point: dict[str, Any]) -> dict[str, Any]:
    reasons = [r for r in (point.get("sample_reasons") or ()) if r != REAL_SEED_STAMP]
    rest = {k: v for k, v in point.items() if k not in ("benchmark_id", "sample_reasons")}
    return {**rest, "sample_reasons": reasons}


def _same_point(a: Sample, b: Sample) -> bool:
    return all(_normalized(x) == _normalized(y) for x, y in zip(a.raw_points, b.raw_points))


def collision(coordinate: Coordinate, group: list[Sample], ev: CellEvidence) -> Diagnostic:
    """The ``coordinate_collision`` error, at the first colliding result of rank 0."""
    ids = ", ".join(str(s.point.benchmark_id) for s in group if not s.clamped)
    kind, batch, prefill, kv = coordinate
    first = next(s for s in group if not s.clamped)
    return evidence_error(
        COORDINATE_COLLISION, f"{kind} batch_size {batch}, total_prefill_tokens {prefill}, "
        f"total_kv_read_tokens {kv}: benchmarks {ids} are all unclamped samples of one "
        "coordinate and the zero-KV prefill exception does not apply",
        ev.ranks[0].relpath, f"/results/{first.result_index}/point")


def _missing(point: PointVerdict, ev: CellEvidence) -> Diagnostic:
    absent = next((d for d in ev.ranks if not any(
        r["point"]["benchmark_id"] == point.benchmark_id for r in d.results())), None)
    file = absent.relpath if absent is not None else f"cells/{ev.cell_id}/raw"
    return evidence_error(ROW_EVIDENCE_MISSING, f"benchmark {point.benchmark_id} of the "
                          "verdicts has no result in this rank artifact (the evidence changed "
                          "after classification?)", file, "/results")
