"""Build cell and point verdicts from an evaluation: read the engine's verdict facts only.

No eligibility logic lives here: regimes come from ``verdict_regime`` facts, eligibility
from ``verdict_eligible``, qualifications from ``qualified``/``condition_failed``, and
errors from ``evidence_error`` facts and structural diagnostics. What is missing or
contradictory fails closed (an error, never eligible).
"""
from __future__ import annotations

from dataclasses import dataclass

from operator import attrgetter
from typing import Any

from kvrules.diagnostics import (ENGINE_DISAGREEMENT, ENGINE_FAILURE, POLICY_CONFLICT, POLICY_UNDECIDED, Diagnostic,
                                 evidence_error, sort_diagnostics)
from kvrules.facts.model import CellFacts, Fact
from kvrules.facts.points import COORDINATES, point_table
from kvrules.policy.compiled import CompiledPolicy
from kvrules.backend.events import Evaluation
from kvrules.verdicts.model import CellVerdict, FailedCondition, PointVerdicts, Qualification


def _by_type(ev: Evaluation, kind: str) -> list[Any]:
    return [d for d in ev.derived if d.type == kind]


def _errors(cell: CellFacts, ev: Evaluation, facts: dict[str, Fact]) -> list[Diagnostic]:
    out = list(cell.diagnostics)
    for d in _by_type(ev, "evidence_error"):
        fact = facts.get(d.fields.get("at_fact", ""))
        file, ptr = fact.source(d.fields.get("at_field") or None) if fact else ("", "")
        out.append(evidence_error(d.fields["code"], d.fields["message"], file, ptr, d.by))
    for failure in ev.failures:
        out.append(evidence_error(ENGINE_FAILURE, failure, "", ""))
    for difference in ev.disagreements:
        out.append(evidence_error(ENGINE_DISAGREEMENT, difference, "", ""))
    return out


def _qualifications(cp: CompiledPolicy, ev: Evaluation) -> dict[str, Qualification]:
    out = {}
    for group in cp.policy.qualifications:
        failed = sorted({(d.fields["condition"], d.fields["reason"])
                         for d in _by_type(ev, "condition_failed") if d.fields["group"] == group})
        eligible = any(d.fields["group"] == group for d in _by_type(ev, "qualified"))
        out[group] = Qualification(eligible and not failed,
                                   tuple(FailedCondition(i, r) for i, r in failed))
    return out


def _decisions(ev: Evaluation) -> tuple[dict[str, list[Any]], set[str]]:
    regimes: dict[str, list[Any]] = {}
    for d in _by_type(ev, "verdict_regime"):
        regimes.setdefault(d.fields["point"], []).append(d)
    eligible = {d.fields["point"] for d in _by_type(ev, "verdict_eligible")}
    return regimes, eligible


@dataclass(frozen=True)
class _ClassVerdict:
    """What every point of one class shares: regime, eligibility, trace (computed once)."""

    regime: Any
    eligible: bool
    decided_by: str | None
    trace: tuple[str, ...]
    reasons: tuple[str, ...]
    problem: str | None


def _class_verdict(cls: str, ev: Evaluation, regimes: dict[str, list[Any]],
                   eligible: set[str]) -> _ClassVerdict:
    decided = regimes.get(cls, [])
    values = sorted({canonical_value(d.fields.get("value")) for d in decided})
    events = [e for e in ev.events if cls in e.points]
    problem = None
    if not decided:
        problem = POLICY_UNDECIDED
    elif len(values) > 1:
        problem = POLICY_CONFLICT
    first = decided[0].fields if decided else {}
    return _ClassVerdict(first.get("value"), cls in eligible, first.get("decided_by"),
                         tuple(e.rule for e in events), tuple(e.reason for e in events), problem)


def _problem_error(problem: str, benchmark_id: int, verdict: _ClassVerdict,
                   row_source: tuple[str, str]) -> Diagnostic:
    if problem == POLICY_UNDECIDED:
        return evidence_error(problem, f"benchmark {benchmark_id}: no rule decided a regime",
                              *row_source)
    return evidence_error(problem, f"benchmark {benchmark_id}: rules decided more than one "
                          "regime", *row_source)


def build_cell(cp: CompiledPolicy, cell: CellFacts, ev: Evaluation,
               class_of: dict[int, str], class_facts: list[Fact]) -> CellVerdict:
    """The verdict of one cell (its points in benchmark_id order)."""
    facts = {f.id: f for f in cell.facts + class_facts}
    errors = _errors(cell, ev, facts)
    regimes, eligible = _decisions(ev)
    shared = {cls: _class_verdict(cls, ev, regimes, eligible) for cls in set(class_of.values())}
    table = point_table(cell)
    n = table.n_rows
    bids = table.column("benchmark_id")[:n]
    verdicts = list(map(shared.__getitem__, map(class_of.__getitem__, bids)))
    if not errors and any(verdict.problem for verdict in shared.values()):
        for i, (bid, verdict) in enumerate(zip(bids, verdicts)):
            if verdict.problem:
                errors.append(_problem_error(verdict.problem, bid, verdict,
                                             table.source(i)))
    ok = not errors
    natives = [native if isinstance(native, str) else None
               for native in table.column("native_regime")[:n]]
    decided: list[Any] = [[None] * n, [False] * n, [None] * n]  # regime, eligible, by
    if ok:
        decided = [list(map(attrgetter(name), verdicts))
                   for name in ("regime", "eligible", "decided_by")]
    points = PointVerdicts([
        [cell.cell_id] * n, bids, *(table.column(name)[:n] for name in COORDINATES[1:]),
        natives, decided[0], decided[1], ["ok" if ok else "error"] * n, decided[2],
        list(map(attrgetter("trace"), verdicts)), list(map(attrgetter("reasons"), verdicts))])
    cell_events = [e for e in ev.events if not e.points]
    return CellVerdict(campaign=cell.campaign, cell_id=cell.cell_id,
                       workload_kind=cell.workload_kind, status="ok" if ok else "error",
                       errors=tuple(sort_diagnostics(set(errors))),
                       qualifications=_qualifications(cp, ev), points=points,
                       trace=tuple(e.rule for e in cell_events))


def canonical_value(value: Any) -> str:
    import json
    return json.dumps(value, sort_keys=True)
