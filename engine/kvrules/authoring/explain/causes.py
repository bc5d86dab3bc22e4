"""The root cause of a verdict, read from what the rules derived (nothing decided here).

A point is not eligible because every step of its decision that comes before the deciding
one and would have given an eligible regime was stopped by something. Which regimes are
eligible is read from the rules with an ``eligible`` action (their ``verdict_regime``
pattern, replayed on the step's value); what stopped a step is its first blocker
(:func:`kvrules.authoring.explain.joins.why_not`). A step that needs a qualification the cell
does not have is stopped by that qualification's failed conditions, each listed once with
the reasons of the rules that failed it and where in the evidence they looked.
"""
from __future__ import annotations

from dataclasses import dataclass

from typing import Any

from kvrules.authoring.explain.joins import Blocker, Only, Traced, why_not
from kvrules.authoring.explain.phrases import value_text
from kvrules.authoring.policyinfo import FACT_KEYS, Decider, deciders
from kvrules.authoring.explain.rulefacts import Evidence, evidence_of
from kvrules.authoring.explain.whynot import why_not_of
from kvrules.policy.evaluate import atoms, eval_expr
from kvrules.policy.model import Expr, Rule

GUARD_OPS = ("exists", "is")
"""Operators that guard a field's presence or type rather than test its content."""


@dataclass(frozen=True)
class ConditionCause:
    """One failed condition of a qualification: every reason given for it, and where."""

    group: str
    condition: str
    reasons: tuple[str, ...]
    location: str

    def text(self) -> str:
        where = f" ({self.location})" if self.location else ""
        return f"{self.condition} failed: {'; '.join(self.reasons)}{where}"


@dataclass(frozen=True)
class Cause:
    """An eligible regime the point did not get: the step that would have decided it and
    the first thing that stopped it."""

    step: str
    regime: str
    detail: str
    held: int
    """How many of the step's conditions held before it was stopped (how near it came)."""
    conditions: tuple[ConditionCause, ...] = ()
    evidence: tuple[Evidence, ...] = ()

    def text(self) -> str:
        """The cause in one line (a qualification's first failed condition)."""
        if self.conditions:
            return f"{self.detail}: {self.conditions[0].text()}"
        shown = "".join(f"; {e.fact}: {e.field} " + (
            f"= {_short(e.value)}" if e.present else "is absent") for e in self.evidence[:1])
        where = f" ({self.evidence[0].file}#{self.evidence[0].pointer})" \
            if self.evidence and self.evidence[0].file else ""
        return f"{self.step} ({self.regime}) {self.detail}{shown}{where}"


def _short(value: Any) -> str:
    text = value_text(value)
    return text if len(text) <= 80 else text[:79] + "…"


def regime_is_eligible(traced: Traced, point: str, regime: Any, step: str) -> bool:
    """Whether a rule with an ``eligible`` action accepts a ``verdict_regime`` of this value
    (its pattern on ``verdict_regime`` replayed on the value a step would decide)."""
    fields = {"id": "", "point": point, "value": regime, "decided_by": step}
    for rule in traced.cp.policy.rules:
        if not any(a.kind == "eligible" for a in rule.actions):
            continue
        for p in rule.positives:
            if p.fact == "verdict_regime" and not p.negated and (
                    p.where is None or eval_expr(p.where, fields, {p.alias: fields})):
                return True
    return False


def point_causes(traced: Traced, cls: str, row: Any, decided_by: str | None) -> tuple[Cause, ...]:
    """Each earlier step of the deciding decision that would have given an eligible regime,
    with what stopped it; the nearest (most conditions held) first."""
    mine = [d for d in deciders(traced.cp.policy) if d.rule.id == decided_by]
    if not mine or mine[0].decision is None or mine[0].order is None:
        return ()
    decision, order = mine[0].decision, mine[0].order
    found: list[tuple[int, Cause]] = []
    for d in deciders(traced.cp.policy):
        if d.decision is None or d.decision.id != decision.id or d.order is None \
                or d.order >= order or not regime_is_eligible(traced, cls, d.regime, d.rule.id):
            continue
        b = why_not(traced, d.rule, subject_only(d.subject, cls))
        if b is not None:
            found.append((d.order, _cause(traced, d, b, {cls: row})))
    return tuple(c for _, c in sorted(found, key=lambda t: (-t[1].held, t[0])))


def subject_only(subject: str | None, cls: str) -> Only:
    """Replay a step with its subject bound to this point only."""
    return lambda p, f: p.alias != subject or p.negated or f.id == cls


def _held(rule: Rule, b: Blocker) -> int:
    """How many conditions held before the blocker: a measure of how near the step came."""
    i = rule.patterns.index(b.pattern)
    held = sum(len(atoms(p.where)) for p in rule.patterns[:i] if not p.negated)
    if b.kind == "failed" and b.atom is not None:
        held += next((k for k, a in enumerate(atoms(b.pattern.where)) if a is b.atom), 0)
    return held


def _cause(traced: Traced, d: Decider, b: Blocker, substitute: dict[str, Any]) -> Cause:
    regime, held = str(d.regime), _held(d.rule, b)
    if b.kind == "no_fact" and b.pattern.fact == "qualified":
        groups = _wanted_groups(traced, b)
        conds = tuple(c for g in groups for c in qualification_failures(traced, g))
        return Cause(d.rule.id, regime, "the cell does not qualify for " + ", ".join(groups),
                     held, conds)
    w = why_not_of(traced, d.rule, regime, b, substitute)
    return Cause(d.rule.id, regime, w.detail, held, (), w.evidence)


def _wanted_groups(traced: Traced, b: Blocker) -> list[str]:
    """The qualification groups a ``qualified`` pattern asks for (those that failed)."""
    failed = [g for g, q in traced.verdict.qualifications.items() if not q.eligible]
    named = [a.operand for a in atoms(b.pattern.where) if a.field == "group" and a.op == "eq"
             and not a.negated and isinstance(a.operand, str)]
    return [g for g in failed if not named or g in named] or failed


def qualification_failures(traced: Traced, group: str) -> tuple[ConditionCause, ...]:
    """The group's failed conditions in declared order, each once, with every distinct
    reason (in rule order) and the evidence location of the first rule that failed it."""
    order = list(traced.cp.policy.qualifications.get(group, {}).get("conditions", {}))
    rank = {r.id: i for i, r in enumerate(traced.cp.policy.rules)}
    failures = []
    for event in traced.evaluation.events:
        for fid in event.derived:
            f = traced.by_id(fid)
            if f is not None and f.type == "condition_failed" and f.fields.get("group") == group:
                failures.append((rank.get(event.rule, len(rank)), f, event.rule, event.bindings))
    reasons: dict[str, list[str]] = {}
    where: dict[str, str] = {}
    for _, f, rule, bindings in sorted(failures, key=lambda t: t[0]):
        cond, reason = str(f.fields.get("condition")), str(f.fields.get("reason", ""))
        if reason not in reasons.setdefault(cond, []):
            reasons[cond].append(reason)
        if cond not in where:
            where[cond] = _failure_location(traced, traced.cp.rules[rule], dict(bindings))
    ranked = sorted(reasons, key=lambda c: (order.index(c) if c in order else len(order), c))
    return tuple(ConditionCause(group, c, tuple(reasons[c]), where[c]) for c in ranked)


def _failure_location(traced: Traced, rule: Rule, bound: dict[str, str]) -> str:
    """``file#pointer`` the failing rule's conditions read (their common pointer prefix);
    presence and type guards (``block: {exists: true}``) only count when nothing else is
    tested."""
    tested = {p.alias: _tested_fields(p.fact, p.where) for p in rule.positives}
    read = evidence_of(traced, rule, bound, fields=tested)
    ev = [e for e in read if e.file] or [e for e in evidence_of(traced, rule, bound) if e.file]
    if not ev:
        params = [e.field for e in read if e.fact == "params"]
        return f"policy parameter {params[0]}" if params else ""
    same = [e.pointer for e in ev if e.file == ev[0].file]
    return f"{ev[0].file}#{_common_pointer(same)}"


def _tested_fields(fact: str, where: Expr | None) -> list[str]:
    tests = [a for a in atoms(where) if a.field not in FACT_KEYS.get(fact, ())]
    content = [a for a in tests if a.op not in GUARD_OPS]
    return list(dict.fromkeys(a.field for a in content or tests))


def _common_pointer(pointers: list[str]) -> str:
    parts = [p.split("/") for p in pointers]
    common: list[str] = []
    for level in zip(*parts):
        if len(set(level)) != 1:
            break
        common.append(level[0])
    return "/".join(common) or "/"
