"""Readiness (spec 6.1): may this campaign go on to full collection?

Read from verdicts only, so a different policy gives a different answer. Per cell:

* ``incomplete`` - the cell's only evidence error is ``no_rank_artifacts`` (nothing collected).
* ``blocked`` - the cell is in error; or it is a decode cell without a warm-up block; or no
  point is eligible.
* ``ready`` - otherwise.

"A decode cell has no warm-up block" is read from the verdicts, not from the artifacts: a
decode point gets the formal regime ``legacy`` exactly when the cell has no ``kvwarm`` block
(spec 4.1 step 2, the only step that yields ``legacy``), so a decode cell with a ``legacy``
point is a cell whose runtime did not report its warm-up protocol, whatever its strategy.

Readiness classifies the campaign fresh with the current policy; it never reads, assesses or
upgrades an already published table, and it never writes inside the campaign.
"""
from __future__ import annotations

from dataclasses import dataclass

from typing import Any, Sequence

from kvrules import api
from kvrules.diagnostics import NO_RANK_ARTIFACTS, Diagnostic
from kvrules.verdicts.model import KVRULES_VERSION, CellVerdict, PolicyIdentity, Report

READY, BLOCKED, INCOMPLETE = "ready", "blocked", "incomplete"
NOTE = ("Readiness classified the campaign fresh with the current policy; it does not assess "
        "or upgrade an already published table.")
ABSENT = "absent"
"""Key of ``native_regime_counts`` for points whose artifacts carry no native regime."""


@dataclass(frozen=True)
class CellReadiness:
    """One cell's readiness with the counts it was decided from."""

    cell_id: str
    workload_kind: str | None
    status: str
    blockers: tuple[str, ...]
    native_regime_counts: dict[str, int]
    formal_regime_counts: dict[str, int]
    points_eligible: int
    points_total: int

    @property
    def eligible_text(self) -> str:
        """``"12/12 eligible"``."""
        return f"{self.points_eligible}/{self.points_total} eligible"

    def to_dict(self) -> dict[str, Any]:
        return {"cell_id": self.cell_id, "workload_kind": self.workload_kind,
                "status": self.status, "blockers": list(self.blockers),
                "native_regime_counts": self.native_regime_counts,
                "formal_regime_counts": self.formal_regime_counts,
                "points_eligible": self.points_eligible, "points_total": self.points_total,
                "eligible": self.eligible_text}


@dataclass(frozen=True)
class CampaignReadiness:
    """The cells of one input path, in classification order."""

    campaign: str
    cells: tuple[CellReadiness, ...]

    @property
    def ready_for_full_collection(self) -> bool:
        """True when the campaign has cells and every one is ready."""
        return bool(self.cells) and all(c.status == READY for c in self.cells)

    def to_dict(self) -> dict[str, Any]:
        return {"campaign": self.campaign,
                "ready_for_full_collection": self.ready_for_full_collection,
                "cells": [c.to_dict() for c in self.cells]}


@dataclass(frozen=True)
class ReadinessReport:
    """Readiness of every campaign and the policy that classified them."""

    policy: PolicyIdentity
    campaigns: tuple[CampaignReadiness, ...]
    note: str = NOTE

    @property
    def exit_code(self) -> int:
        """0 when every campaign is ready for full collection, else 1."""
        return 0 if all(c.ready_for_full_collection for c in self.campaigns) else 1

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "readiness", "kvrules_version": KVRULES_VERSION,
                "policy": self.policy.to_dict(), "note": self.note,
                "ready_for_full_collection": self.exit_code == 0,
                "campaigns": [c.to_dict() for c in self.campaigns]}


def readiness(paths: Sequence[str], policy: api.Policy, plan: str | None = None,
              run: api.Run = api.Run()) -> ReadinessReport:
    """Classify ``paths`` with ``policy`` on ``run`` and assess every cell."""
    return assess(run.classify(paths, policy, plan))


def assess(report: Report) -> ReadinessReport:
    """Readiness of a classification report, campaigns in input order."""
    campaigns: dict[str, list[CellReadiness]] = {}
    for cell in report.cells:
        campaigns.setdefault(cell.campaign, []).append(assess_cell(cell))
    return ReadinessReport(report.policy, tuple(
        CampaignReadiness(name, tuple(cells)) for name, cells in campaigns.items()))


def assess_cell(cell: CellVerdict) -> CellReadiness:
    """``ready``, ``blocked`` or ``incomplete`` with one sentence per blocker."""
    if cell.status != "ok":
        incomplete = bool(cell.errors) and all(e.code == NO_RANK_ARTIFACTS for e in cell.errors)
        status, blockers = (INCOMPLETE if incomplete else BLOCKED), _error_blockers(cell)
    else:
        blockers = _verdict_blockers(cell)
        status = BLOCKED if blockers else READY
    return CellReadiness(cell.cell_id, cell.workload_kind, status, tuple(blockers),
                         _native_counts(cell), cell.counts, cell.points_eligible,
                         len(cell.points))


def _error_blockers(cell: CellVerdict) -> list[str]:
    if not cell.errors:
        return [f"The cell is in error ({cell.status}) without a reported cause."]
    return [_error_sentence(e) for e in cell.errors]


def _error_sentence(error: Diagnostic) -> str:
    if error.code == NO_RANK_ARTIFACTS:
        return f"No rank artifact has been collected yet ({error.file})."
    where = error.location()
    return f"Evidence error {error.code} in {where}: {error.message.rstrip('.')}."


def _verdict_blockers(cell: CellVerdict) -> list[str]:
    blockers = []
    legacy = sum(1 for p in cell.points if p.kv_seed_regime == "legacy")
    if cell.workload_kind == "decode" and legacy:
        blockers.append(f"The decode cell has no warm-up block: the runtime did not report "
                        f"its warm-up protocol ({legacy} of {len(cell.points)} points are "
                        "legacy).")
    if cell.points_eligible == 0:
        counts = ", ".join(f"{n} {regime}" for regime, n in cell.counts.items()) or "no points"
        blockers.append(f"No point is eligible for direct use (0/{len(cell.points)}: "
                        f"{counts}).")
    return blockers


def _native_counts(cell: CellVerdict) -> dict[str, int]:
    out: dict[str, int] = {}
    for point in cell.points:
        key = point.native_regime if point.native_regime is not None else ABSENT
        out[key] = out.get(key, 0) + 1
    return dict(sorted(out.items()))
