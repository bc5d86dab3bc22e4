"""Structural checks that span fields or files, run after per-file schema validation.

These are the spec section 3 errors a JSON Schema cannot express (completion flags, the
cell's workload kind, contiguous benchmark ids, the dp rank set, one run identity, identical
provenance). They only look at schema-valid documents, so field access is safe here.
"""
from __future__ import annotations

import json
import math
from typing import Any

from kvrules.artifacts.jsonio import pointer, render
from kvrules.artifacts.model import Document, ResultColumns
from kvrules.diagnostics import (
    ARTIFACT_INCOMPLETE, ARTIFACT_INVALID, PROVENANCE_MISMATCH, RANK_SET_MISMATCH,
    RUN_IDENTITY_MISMATCH, Diagnostic, evidence_error,
)

_COMPLETE: tuple[tuple[str, Any], ...] = (
    ("status", "complete"), ("valid", True), ("usable", True), ("timing_valid", True),
    ("error", None),
)


def incomplete(doc: Document) -> list[Diagnostic]:
    """One ``artifact_incomplete`` per completion field that does not have its clean value."""
    out = []
    for name, want in _COMPLETE:
        got = doc.data.get(name)
        if not _same(got, want):
            out.append(evidence_error(ARTIFACT_INCOMPLETE,
                                      f"{name} is {render(got)}, expected {render(want)}",
                                      doc.relpath, f"/{name}"))
    return out


def result_checks(doc: Document, kind: str | None) -> list[Diagnostic]:
    """Finite wall times, the cell's point type (when known) and ids contiguous from 1."""
    if _results_plainly_fine(doc.result_columns(), kind):
        return []
    out: list[Diagnostic] = []
    wrong: list[int] = []
    ids: dict[Any, int] = {}
    duplicate: tuple[int, int] | None = None
    for i, result in enumerate(doc.results()):
        point = result["point"]
        if kind is not None and point["point_type"] != kind:
            wrong.append(i)
        wall = result["fpms"][0]["wall_time"]
        if not math.isfinite(wall):  # 1e400 decodes to inf without a NaN/Infinity token
            out.append(evidence_error(ARTIFACT_INVALID,
                                      f"results[{i}].fpms[0].wall_time is not finite",
                                      doc.relpath, f"/results/{i}/fpms/0/wall_time"))
        first = ids.setdefault(point["benchmark_id"], i)
        if first != i and duplicate is None:
            duplicate = (first, i)
    if wrong:
        out.append(_wrong_kind(doc, wrong, kind))
    out.extend(_id_gaps(doc, ids, duplicate))
    return out


def _results_plainly_fine(columns: ResultColumns, kind: str | None) -> bool:
    """The usual case of :func:`result_checks` by columns: no result it would report
    (any doubt returns False, and the result-by-result checks then say what is wrong)."""
    kinds, ids = columns.point_types, columns.benchmark_ids
    return ((kind is None or kinds.count(kind) == len(kinds))
            and all(map(math.isfinite, columns.wall_times))
            and sorted(ids) == list(range(1, len(ids) + 1)))


def _wrong_kind(doc: Document, wrong: list[int], kind: str | None) -> Diagnostic:
    """One diagnostic for the first result of the wrong kind (with a count, not 500 copies)."""
    i = wrong[0]
    got = doc.results()[i]["point"]["point_type"]
    more = f" ({len(wrong)} results disagree)" if len(wrong) > 1 else ""
    return evidence_error(ARTIFACT_INVALID,
                          f"results[{i}].point.point_type is {render(got)} but the cell's "
                          f"workload_kind is {render(kind)}{more}",
                          doc.relpath, f"/results/{i}/point/point_type")


def _id_gaps(doc: Document, ids: dict[Any, int],
             duplicate: tuple[int, int] | None) -> list[Diagnostic]:
    """Benchmark ids, sorted, must be exactly 1..n (n = number of results)."""
    if duplicate is not None:
        first, again = duplicate
        bid = doc.results()[again]["point"]["benchmark_id"]
        return [evidence_error(ARTIFACT_INVALID,
                               f"benchmark_id {bid} appears twice (results[{first}] and "
                               f"results[{again}])", doc.relpath,
                               f"/results/{again}/point/benchmark_id")]
    n = len(ids)
    if all(1 <= bid <= n for bid in ids):
        return []
    missing = [k for k in range(1, n + 1) if k not in ids][:5]
    return [evidence_error(ARTIFACT_INVALID,
                           f"benchmark ids are not contiguous from 1 to {n}: missing "
                           f"{', '.join(map(str, missing))}", doc.relpath, "/results")]


def uniform_point_type(docs: list[Document]) -> list[Diagnostic]:
    """Without a plan kind, every point of the cell must share the first point's type."""
    first: tuple[Document, int, str] | None = None
    for doc in docs:
        for i, result in enumerate(doc.results()):
            kind = result["point"]["point_type"]
            if first is None:
                first = (doc, i, kind)
            elif kind != first[2]:
                return [evidence_error(
                    ARTIFACT_INVALID,
                    f"results[{i}].point.point_type is {render(kind)} but "
                    f"{first[0].relpath} results[{first[1]}] is {render(first[2])}; without "
                    "a plan workload_kind all points of a cell must share one point type",
                    doc.relpath, f"/results/{i}/point/point_type")]
    return []


def rank_set(docs: list[Document], dp: int | None, why: str, raw_rel: str,
             all_loaded: bool) -> list[Diagnostic]:
    """dp ranks must be exactly 0..dp-1, each once, with ``dp.size == dp``.

    ``dp`` is None when the plan is broken (only duplicates are checked then); missing ranks
    are reported only when every rank file was readable, since an unreadable file may be
    the "missing" rank and already has its own diagnostic.
    """
    out: list[Diagnostic] = []
    seen: dict[int, str] = {}
    for doc in docs:
        rank, size = doc.data["dp"]["rank"], doc.data["dp"]["size"]
        if rank in seen:
            out.append(evidence_error(RANK_SET_MISMATCH,
                                      f"dp.rank {rank} appears twice (also in {seen[rank]})",
                                      doc.relpath, "/dp/rank"))
        seen.setdefault(rank, doc.relpath)
        if dp is not None and not _same(size, dp):
            out.append(evidence_error(RANK_SET_MISMATCH,
                                      f"dp.size is {render(size)} but {why}",
                                      doc.relpath, "/dp/size"))
        if dp is not None and rank >= dp:
            out.append(evidence_error(RANK_SET_MISMATCH,
                                      f"dp.rank {rank} is outside 0..{dp - 1} ({why})",
                                      doc.relpath, "/dp/rank"))
    missing = _missing_ranks(seen, dp or 0, _SHOWN + 1)
    if missing and all_loaded and docs:
        more = ", ..." if len(missing) > _SHOWN else ""
        out.append(evidence_error(RANK_SET_MISMATCH,
                                  f"dp ranks found {sorted(seen)} are not exactly "
                                  f"0..{dp - 1 if dp else 0} ({why}): missing rank(s) "
                                  f"{', '.join(map(str, missing[:_SHOWN]))}{more}", raw_rel))
    return out


_SHOWN = 32
"""At most this many missing ranks are listed in a message."""


def _missing_ranks(seen: dict[int, str], dp: int, shown: int) -> list[int]:
    """The first ``shown`` ranks of ``0..dp-1`` not in ``seen``, without iterating to ``dp``.

    A plan may say ``dp: 10**100``; the scan stops after ``len(seen) + shown`` candidates.
    """
    out: list[int] = []
    rank = 0
    while rank < dp and len(out) < shown:
        if rank not in seen:
            out.append(rank)
        rank += 1
    return out


def run_identity(docs: list[Document]) -> list[Diagnostic]:
    """Every rank must carry the run_id and grid_digest of the first rank."""
    out = []
    for doc in docs[1:]:
        for name in ("run_id", "grid_digest"):
            want, got = docs[0].data[name], doc.data[name]
            if got != want:
                out.append(evidence_error(RUN_IDENTITY_MISMATCH,
                                          f"{name} {render(got)} differs from {render(want)} "
                                          f"in {docs[0].relpath}", doc.relpath, f"/{name}"))
    return out


def provenance_mismatch(docs: list[Document]) -> list[Diagnostic]:
    """Every pod's collector provenance must be identical to the first pod's."""
    out = []
    for doc in docs[1:]:
        try:
            where = first_difference(docs[0].data, doc.data)
        except RecursionError:  # nesting too deep to compare: not provably identical
            where = []
        if where is not None:
            ptr = pointer(where)
            out.append(evidence_error(PROVENANCE_MISMATCH,
                                      f"collector provenance differs from {docs[0].relpath} "
                                      f"at {ptr or 'the document root'}",
                                      doc.relpath, ptr))
    return out


def first_difference(a: Any, b: Any, path: tuple[Any, ...] = ()) -> list[Any] | None:
    """Path of the first difference between two JSON values (1, 1.0 and true all differ)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            if key not in a or key not in b:
                return [*path, key]
            found = first_difference(a[key], b[key], (*path, key))
            if found is not None:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b)):
            found = first_difference(x, y, (*path, i))
            if found is not None:
                return found
        return None if len(a) == len(b) else [*path, min(len(a), len(b))]
    return None if _same(a, b) else list(path)


def _same(a: Any, b: Any) -> bool:
    """JSON equality: ``true`` is not ``1`` and ``1`` is not ``1.0``, also when nested."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (dict, list)):
        return _canonical(a) == _canonical(b)
    return bool(a == b)


def _canonical(value: Any) -> str:
    """Key-sorted JSON text; distinguishes the types Python's ``==`` conflates."""
    return json.dumps(value, sort_keys=True, default=repr)
