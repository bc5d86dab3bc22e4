"""The report's data model: verdicts, readiness and formal rows as one JSON-ready document.

Nothing here decides anything. Regimes, eligibility, D-conditions and errors are copied from
the verdicts; readiness comes from :mod:`kvrules.consumers.readiness`; every plotted latency
is a formal row of :mod:`kvrules.consumers.aggregate`, aggregated per campaign (the rows
``kvrules aggregate CAMPAIGN`` writes). A row is joined back to the verdict point that gave it
by its coordinate, with the sample selection of spec 6.2 where a coordinate has several points.
"""
from __future__ import annotations

from dataclasses import dataclass

from collections import Counter
from typing import Any, Iterable, Sequence

from kvrules import api
from kvrules.artifacts.discover import discover
from kvrules.artifacts.load import load_cell
from kvrules.consumers import selection
from kvrules.consumers.aggregate import Aggregation, aggregate_cells
from kvrules.consumers.readiness import CampaignReadiness, CellReadiness, assess, assess_cell
from kvrules.consumers.rows import Row
from kvrules.diagnostics import Diagnostic
from kvrules.verdicts.model import (KVRULES_VERSION, CellVerdict, PointVerdict, PolicyIdentity,
                                    Report)

ERROR_REGIME = "error"
"""Key of points without a formal regime (their cell is in error), as in ``CellVerdict.counts``."""

FIXED_COLOURS: dict[str, str] = {
    "real_kv": "#1b9e77",
    "real_attention_kv_random_kda": "#66a61e",
    "skip:dense_model_content_insensitive": "#7570b3",
    "skip:moe_tp_balanced_by_construction": "#e7298a",
    "fake_fallback": "#d95f02",
    "legacy": "#a6761d",
    "n/a": "#666666",
    ERROR_REGIME: "#e41a1c",
}
"""One fixed colour per regime of the shipped policy, so every report reads the same."""
SPARE_COLOURS = ("#377eb8", "#984ea3", "#ff7f00", "#a65628", "#f781bf", "#4daf4a", "#999999")
"""Colours of regimes a custom policy adds, by their order in the policy."""

Key = tuple[str, str, int]
"""``(campaign, cell_id, benchmark_id)``: how a point is matched between two policies."""


@dataclass(frozen=True)
class Change:
    """A point whose outcome a policy change altered (from :mod:`kvrules.authoring.diff`)."""

    old: str
    new: str
    old_by: str
    new_by: str


@dataclass(frozen=True)
class PolicyInfo:
    """What the page says about a policy: identity, regimes and qualification conditions."""

    identity: PolicyIdentity
    source: str
    regimes: tuple[str, ...]
    conditions: dict[str, tuple[tuple[str, str], ...]]

    def to_dict(self) -> dict[str, Any]:
        return {**self.identity.to_dict(), "source": self.source}


def policy_info(policy: api.Policy) -> PolicyInfo:
    """The identity, declared regimes and ``{group: ((id, description), ...)}`` of a policy."""
    parsed = policy.compiled.policy
    groups = {}
    for name, spec in sorted(dict(parsed.qualifications).items()):
        raw = spec.get("conditions", {}) if isinstance(spec, dict) else {}
        groups[name] = tuple((str(k), str(v)) for k, v in dict(raw).items())
    return PolicyInfo(policy.identity, policy.source or "rules (shipped)",
                      tuple(parsed.regimes), groups)


def colours(regimes: Iterable[str]) -> dict[str, str]:
    """A colour per regime: the fixed one when known, else the next spare colour."""
    out: dict[str, str] = {}
    spare = 0
    for regime in [*regimes, ERROR_REGIME]:
        if regime in out:
            continue
        if regime in FIXED_COLOURS:
            out[regime] = FIXED_COLOURS[regime]
        else:
            out[regime] = SPARE_COLOURS[spare % len(SPARE_COLOURS)]
            spare += 1
    return out


def build_document(report: Report, info: PolicyInfo, plan: str | None = None,
                   changes: dict[Key, Change] | None = None,
                   extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The whole page as data: summary, policy, regimes and colours, and every cell."""
    readiness = assess(report)
    rows = _rows_by_campaign(report, plan)
    changes = changes or {}
    cells = [_cell(cell, assess_cell(cell), rows, info, plan, changes) for cell in report.cells]
    regimes = _regimes(info, report)
    doc: dict[str, Any] = {
        "kind": "kvrules-report", "kvrules_version": KVRULES_VERSION,
        "policy": info.to_dict(), "regimes": regimes, "colours": colours(regimes),
        "conditions": {g: [list(c) for c in conds] for g, conds in info.conditions.items()},
        "summary": _summary(report, readiness.campaigns, cells), "cells": cells}
    doc.update(extra or {})
    return doc


def _regimes(info: PolicyInfo, report: Report) -> list[str]:
    """The policy's regimes in its order, then any other regime the verdicts carry."""
    seen = list(dict.fromkeys(info.regimes))
    for cell in report.cells:
        seen += [r for r in cell.counts if r not in seen and r != ERROR_REGIME]
    return [*seen, ERROR_REGIME]


# --- formal rows -------------------------------------------------------------------------

CellRows = dict[tuple[str, str], tuple[list[Row], tuple[Diagnostic, ...]]]
"""``(campaign, cell_id) -> (formal rows, errors that left the cell out)``."""


def _rows_by_campaign(report: Report, plan: str | None) -> CellRows:
    """Aggregate each campaign on its own: its rows are those ``kvrules aggregate`` writes."""
    campaigns: dict[str, list[CellVerdict]] = {}
    for cell in report.cells:
        campaigns.setdefault(cell.campaign, []).append(cell)
    out: CellRows = {}
    for campaign, cells in campaigns.items():
        agg = aggregate_cells(cells, report.policy, plan)
        out.update(_split(campaign, agg))
    return out


def _split(campaign: str, agg: Aggregation) -> CellRows:
    out: CellRows = {}
    by_id: dict[str, list[Row]] = {}
    for row in agg.rows.table.to_pylist():
        by_id.setdefault(row["cell_id"], []).append(row)
    for done in agg.cells:
        out[(campaign, done.cell_id)] = (by_id.get(done.cell_id, []), ())
    for left in agg.left_out:
        out.setdefault((campaign, left.cell_id), ([], left.errors))
    return out


def _coordinate(row: Row) -> selection.Coordinate:
    return (row["workload_kind"], row["batch_size"], row["total_prefill_tokens"],
            row["total_kv_read_tokens"])


def _chosen_points(cell: CellVerdict, plan: str | None) -> dict[selection.Coordinate,
                                                                  PointVerdict]:
    """The verdict point that gave each coordinate's row.

    A coordinate with one point is that point; several points (clamped repeats, the zero-KV
    prefill exception) are resolved by the sample selection aggregation itself used.
    """
    groups: dict[selection.Coordinate, list[PointVerdict]] = {}
    for p in cell.points:
        coordinate = (p.point_type, p.batch_size, p.total_prefill_tokens, p.total_kv_read_tokens)
        groups.setdefault(coordinate, []).append(p)
    chosen = {c: ps[0] for c, ps in groups.items() if len(ps) == 1}
    if len(chosen) < len(groups):
        ref = next(r for r in discover([cell.campaign], plan) if r.cell_id == cell.cell_id)
        samples, _ = selection.samples(cell, load_cell(ref, keep_results=True))
        for coordinate, group in selection.by_coordinate(samples):
            picked = selection.select(group)
            if picked is not None:
                chosen[coordinate] = picked.point
    return chosen


# --- one cell ----------------------------------------------------------------------------

def _diagnostic(d: Diagnostic) -> dict[str, Any]:
    return {"code": d.code, "message": d.message, "file": d.file, "pointer": d.pointer,
            "rule": d.rule}


def _qualifications(cell: CellVerdict, info: PolicyInfo) -> list[dict[str, Any]]:
    """Every declared condition of every group as passed or failed, with the failure reasons."""
    out = []
    for group, conditions in info.conditions.items():
        q = cell.qualifications.get(group)
        failed: dict[str, list[str]] = {}
        for f in q.failed if q is not None else ():
            failed.setdefault(f.id, []).append(f.reason)
        known = [cid for cid, _ in conditions]
        rows = [{"id": cid, "description": text, "passed": q is not None and cid not in failed,
                 "reasons": failed.get(cid, [])} for cid, text in conditions]
        rows += [{"id": cid, "description": "", "passed": False, "reasons": reasons}
                 for cid, reasons in failed.items() if cid not in known]
        out.append({"group": group, "evaluated": q is not None,
                    "eligible": bool(q is not None and q.eligible), "conditions": rows})
    return out


def _point(p: PointVerdict, changes: dict[Key, Change], campaign: str) -> dict[str, Any]:
    out = {"benchmark_id": p.benchmark_id, "point_type": p.point_type,
           "batch_size": p.batch_size, "total_prefill_tokens": p.total_prefill_tokens,
           "total_kv_read_tokens": p.total_kv_read_tokens, "native_regime": p.native_regime,
           "kv_seed_regime": p.kv_seed_regime, "eligible": p.eligible, "status": p.status,
           "decided_by": p.decided_by}
    change = changes.get((campaign, p.cell_id, p.benchmark_id))
    if change is not None:
        out["change"] = _change(change)
    return out


def _change(change: Change) -> dict[str, str]:
    return {"old": change.old, "new": change.new, "old_by": change.old_by,
            "new_by": change.new_by}


def _plot_rows(cell: CellVerdict, rows: list[Row], plan: str | None,
               changes: dict[Key, Change]) -> list[dict[str, Any]]:
    """Each formal row with the verdict point that gave it (``point``: its index in the cell).

    The coordinate, ``latency_ms`` and ``kv_seed_regime`` are the row's; the benchmark id,
    native regime, eligibility and deciding rule are the verdict point's.
    """
    if not rows:
        return []
    chosen = _chosen_points(cell, plan)
    index = {id(p): i for i, p in enumerate(cell.points)}
    out = []
    for row in rows:
        p = chosen.get(_coordinate(row))
        change = changes.get((cell.campaign, cell.cell_id, p.benchmark_id)) if p else None
        out.append({"point": index[id(p)] if p else None,
                    "workload_kind": row["workload_kind"], "batch_size": row["batch_size"],
                    "total_prefill_tokens": row["total_prefill_tokens"],
                    "total_kv_read_tokens": row["total_kv_read_tokens"],
                    "latency_ms": row["latency_ms"], "kv_seed_regime": row["kv_seed_regime"],
                    "benchmark_id": p.benchmark_id if p else None,
                    "native_regime": p.native_regime if p else None,
                    "eligible": bool(p and p.eligible),
                    "decided_by": p.decided_by if p else None, "changed": change is not None})
        if change is not None:
            out[-1]["change"] = _change(change)
    return out


def _cell(cell: CellVerdict, ready: CellReadiness, rows: CellRows, info: PolicyInfo,
          plan: str | None, changes: dict[Key, Change]) -> dict[str, Any]:
    cell_rows, left_out = rows.get((cell.campaign, cell.cell_id), ([], ()))
    points = [_point(p, changes, cell.campaign) for p in cell.points]
    return {"campaign": cell.campaign, "cell_id": cell.cell_id,
            "workload_kind": cell.workload_kind, "status": cell.status,
            "readiness": ready.status, "blockers": list(ready.blockers),
            "errors": [_diagnostic(e) for e in cell.errors],
            "left_out": [_diagnostic(e) for e in left_out] if cell.status == "ok" else [],
            "qualifications": _qualifications(cell, info), "counts": cell.counts,
            "points_total": len(cell.points), "points_eligible": cell.points_eligible,
            "changed": sum(1 for p in points if "change" in p),
            "rows": _plot_rows(cell, cell_rows, plan, changes), "points": points}


# --- summary -----------------------------------------------------------------------------

def _summary(report: Report, campaigns: Sequence[CampaignReadiness],
             cells: list[dict[str, Any]]) -> dict[str, Any]:
    """Campaigns and cells by readiness, points by formal regime, rows by formal regime."""
    by_campaign = []
    for camp in campaigns:
        tally = Counter(c.status for c in camp.cells)
        by_campaign.append({"campaign": camp.campaign, "cells": len(camp.cells),
                            "ready": tally["ready"], "blocked": tally["blocked"],
                            "incomplete": tally["incomplete"],
                            "ready_for_full_collection": camp.ready_for_full_collection})
    eligible: Counter[str] = Counter()
    for cell in report.cells:
        for p in cell.points:
            if p.eligible:
                eligible[p.kv_seed_regime or ERROR_REGIME] += 1
    row_counts = Counter(r["kv_seed_regime"] for c in cells for r in c["rows"])
    summary = report.summary
    return {"campaigns": by_campaign,
            "cells": {"total": len(cells),
                      **{k: sum(c[k] for c in by_campaign)
                         for k in ("ready", "blocked", "incomplete")}},
            "points": {"total": summary.points, "eligible": summary.points_eligible,
                       "by_regime": dict(sorted(summary.counts.items())),
                       "eligible_by_regime": dict(sorted(eligible.items()))},
            "rows": {"total": sum(row_counts.values()),
                     "by_regime": dict(sorted(row_counts.items()))}}
