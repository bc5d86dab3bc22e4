"""``kvrules explain --cell``: each qualification condition (D1-D9), on every rank.

A condition is checked by the rules that ``fail`` it. A rule is *rank-scoped* when one of
its positive patterns reads a fact with a ``rank`` field (warm-up, engine, cache specs); it
is then replayed once per rank with only that rank's facts. Otherwise it is cell-scoped. In
each scope a condition fails when one of its rules fired there (its reason and evidence are
shown), and holds when none did (for each, the condition that kept it from firing).
"""
from __future__ import annotations

from dataclasses import dataclass

from typing import Any, Callable

from kvrules.authoring.explain.causes import Cause
from kvrules.authoring.explain.joins import SessionFact, Traced, why_not
from kvrules.authoring.explain.whynot import why_not_of
from kvrules.authoring.explain.rulefacts import Evidence, evidence_of
from kvrules.diagnostics import Diagnostic
from kvrules.policy.model import Pattern, Rule


@dataclass(frozen=True)
class Check:
    """One rule checking a condition in one scope: fired (the condition failed) or not."""

    rule: str
    fired: bool
    detail: str
    evidence: tuple[Evidence, ...] = ()


@dataclass(frozen=True)
class ConditionRow:
    """One condition of an eligibility group: whether it holds and the checks behind it."""

    condition: str
    description: str
    scope: str
    holds: bool
    checks: tuple[Check, ...]


@dataclass(frozen=True)
class GroupExplanation:
    """An eligibility group of a cell: eligible or not, and the conditions that failed."""

    group: str
    eligible: bool
    failed: tuple[str, ...]
    rows: tuple[ConditionRow, ...]


@dataclass(frozen=True)
class PointsByCause:
    """Ineligible points of one cell that share a regime and a root cause."""

    points: tuple[int, ...]
    regime: str | None
    decided_by: str | None
    reason: str
    causes: tuple[Cause, ...]


@dataclass(frozen=True)
class CellExplanation:
    """A cell's verdict explained: its errors, its points by cause and its groups."""

    campaign: str
    cell_id: str
    status: str
    errors: tuple[Diagnostic, ...]
    points: tuple[PointsByCause, ...]
    groups: tuple[GroupExplanation, ...]


def explain_cell(traced: Traced, points: tuple[PointsByCause, ...] = (),
                 errors: tuple[Diagnostic, ...] | None = None) -> CellExplanation:
    """Every qualification group of the policy, condition by condition, scope by scope,
    after the cell's errors and its ineligible points grouped by cause."""
    groups = tuple(_group(traced, name) for name in traced.cp.policy.qualifications)
    v = traced.verdict
    return CellExplanation(v.campaign, v.cell_id, v.status,
                           v.errors if errors is None else errors, points, groups)


def _group(traced: Traced, group: str) -> GroupExplanation:
    spec = traced.cp.policy.qualifications[group]
    checks: dict[str, list[Rule]] = {c: [] for c in spec.get("conditions", {})}
    for rule in traced.cp.policy.rules:
        for action in rule.actions:
            if action.kind == "fail" and action.args["group"] == group:
                checks.setdefault(action.args["condition"], []).append(rule)
    rows = []
    for condition, rules in checks.items():
        text = spec.get("conditions", {}).get(condition, "")
        for scope, only in _scopes(traced, rules):
            found = tuple(_check(traced, rule, scope, only) for rule in rules
                          if _in_scope(traced, rule, scope))
            rows.append(ConditionRow(condition, text, scope, not any(c.fired for c in found),
                                     found))
    q = traced.verdict.qualifications.get(group)
    failed = tuple(dict.fromkeys(f.id for f in q.failed)) if q else ()
    return GroupExplanation(group, bool(q and q.eligible), failed, tuple(rows))


Only = Callable[[Pattern, SessionFact], bool]


def _rank_scoped(traced: Traced, rule: Rule) -> bool:
    return any("rank" in traced.cp.fact_types.get(p.fact, {}) for p in rule.positives)


def _ranks(traced: Traced) -> list[int]:
    return sorted({f.fields["rank"] for kind in ("rank", "warmup")
                   for f in traced.facts.get(kind, []) if isinstance(f.fields.get("rank"), int)})


def _scopes(traced: Traced, rules: list[Rule]) -> list[tuple[str, Only]]:
    out: list[tuple[str, Only]] = []
    if not rules or any(not _rank_scoped(traced, r) for r in rules):
        out.append(("cell", lambda p, f: True))
    if any(_rank_scoped(traced, r) for r in rules):
        for rank in _ranks(traced):
            out.append((f"rank {rank}", _only_rank(traced, rank)))
    return out


def _only_rank(traced: Traced, rank: int) -> Only:
    types = traced.cp.fact_types
    return lambda p, f: "rank" not in types.get(p.fact, {}) or f.fields.get("rank") == rank


def _in_scope(traced: Traced, rule: Rule, scope: str) -> bool:
    return _rank_scoped(traced, rule) == (scope != "cell")


def _check(traced: Traced, rule: Rule, scope: str, only: Only) -> Check:
    """The rule's firing in this scope (reason and evidence), or why it did not fire."""
    for event in traced.evaluation.events:
        if event.rule != rule.id or not _event_in_scope(traced, event.bindings, scope):
            continue
        failed = [traced.by_id(fid) for fid in event.derived]
        reason = next((f.fields.get("reason", "") for f in failed
                       if f is not None and f.type == "condition_failed"), event.reason)
        return Check(rule.id, True, str(reason),
                     tuple(evidence_of(traced, rule, dict(event.bindings))))
    w = why_not_of(traced, rule, "", why_not(traced, rule, only))
    return Check(rule.id, False, w.detail, w.evidence)


def _event_in_scope(traced: Traced, bindings: Any, scope: str) -> bool:
    if scope == "cell":
        return True
    rank = int(scope.split()[1])
    facts = [traced.by_id(fid) for _, fid in bindings]
    return any(f is not None and f.fields.get("rank") == rank for f in facts)
