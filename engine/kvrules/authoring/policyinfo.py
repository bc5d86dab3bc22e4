"""What a policy means beyond its syntax: who produces which fact, who decides regimes.

Shared by the lint checks (ambiguous regime order, dead rules), ``explain`` (why-not for the
regimes that were not chosen) and coverage, so all three agree on one reading of the rules.

Regimes are decided in one of two ways. A *direct* decider has a ``regime`` action with a
literal value. A *proposal* decider derives a fact (``candidate``) whose field flows into
some rule's ``regime: {value: {ref: c.regime}}``; that rule's ``none`` pattern comparing an
integer field with ``lt``/``gt`` against the bound proposal (``step``) is the explicit order.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvrules.policy.catalogue import base_catalogue
from kvrules.policy.evaluate import atoms
from kvrules.policy.model import Action, Pattern, Policy, Ref, Rule

FACT_KEYS: dict[str, tuple[str, ...]] = {
    "cell": (), "kvwarm": (), "plan": (), "provenance": (), "launch": (), "params": (),
    "warmup": ("rank",), "rank": ("rank",), "model_section": ("section",),
    "cache_spec": ("rank", "group_index", "spec_index"), "point": ("benchmark_id",)}
"""Fields that identify an extracted fact within one cell session (``()``: at most one such
fact per session). The extractor guarantees these; tests check it on real cells."""


@dataclass(frozen=True)
class Proposal:
    """A derived fact type that carries proposed regimes (e.g. ``candidate``)."""

    fact: str
    regime_field: str
    order_field: str | None
    point_field: str | None


@dataclass(frozen=True)
class Decider:
    """A rule that decides (or proposes) a regime for a point."""

    rule: Rule
    action: Action
    regime: Any
    order: Any
    subject: str | None
    order_field: str | None = None
    proposal: Proposal | None = None

    def ordered_against(self, other: "Decider") -> bool:
        """An explicit order separates the two: both proposals with different order values."""
        return (self.proposal is not None and other.proposal is not None
                and self.order is not None and other.order is not None
                and self.order != other.order)


def producers(policy: Policy) -> dict[str, list[tuple[Rule, Action]]]:
    """Fact type → the (rule, action) pairs that assert it, in policy order."""
    out: dict[str, list[tuple[Rule, Action]]] = {}
    for rule in policy.rules:
        for action in rule.actions:
            out.setdefault(action.produces, []).append((rule, action))
    return out


def proposals(policy: Policy) -> list[Proposal]:
    """Derived facts whose field becomes a regime through a ``regime`` action's ref."""
    found: dict[str, Proposal] = {}
    for rule in policy.rules:
        alias_type = {p.alias: p.fact for p in rule.positives}
        for action in rule.actions:
            value = action.args.get("value")
            if action.kind != "regime" or not isinstance(value, Ref):
                continue
            fact = alias_type.get(value.alias)
            if fact not in policy.derived:
                continue
            point = action.args.get("point")
            found.setdefault(fact, Proposal(
                fact, value.field, _order_field(rule, value.alias, fact),
                point.field if isinstance(point, Ref) and point.alias == value.alias else None))
    return list(found.values())


def _order_field(rule: Rule, alias: str, fact: str) -> str | None:
    """The field a ``none`` pattern on the same fact compares with ``lt``/``gt`` to ``alias``."""
    for pattern in rule.negatives:
        if pattern.fact != fact:
            continue
        for atom in atoms(pattern.where):
            ref = atom.operand
            if atom.op in ("lt", "gt") and isinstance(ref, Ref) and ref.alias == alias \
                    and ref.field == atom.field:
                return atom.field
    return None


def deciders(policy: Policy) -> list[Decider]:
    """Every rule action that proposes or decides a regime, in policy order."""
    props = {p.fact: p for p in proposals(policy)}
    out = []
    for rule in policy.rules:
        for action in rule.actions:
            if action.kind == "regime" and not isinstance(action.args.get("value"), Ref):
                out.append(Decider(rule, action, action.args["value"], None,
                                   _alias(action.args.get("point"))))
            elif action.kind == "derive" and action.args["fact"] in props:
                p, values = props[action.args["fact"]], action.args.get("set", {})
                if p.regime_field in values:
                    order = values.get(p.order_field) if p.order_field else None
                out.append(Decider(rule, action, values[p.regime_field],
                                   None if isinstance(order, Ref) else order,
                                   _alias(values.get(p.point_field)), p.order_field, p))
    return out


def _alias(value: Any) -> str | None:
    return value.alias if isinstance(value, Ref) else None


def field_kind(policy: Policy, fact: str, field: str) -> str:
    """The type a field is *guaranteed* to have: catalogue facts and parameters only.

    Derived facts copy values through refs, so their declared types are intentions, not
    guarantees; reasoning about them uses ``any`` to stay sound.
    """
    if fact == "params":
        return "boolean" if field in policy.parameters else "any"
    declared = base_catalogue().get(fact)
    return declared.fields.get(field, "any") if declared else "any"


def reads(policy: Policy) -> dict[str, list[tuple[Rule, Pattern]]]:
    """Fact type → the patterns (positive or ``none``) that read it."""
    out: dict[str, list[tuple[Rule, Pattern]]] = {}
    for rule in policy.rules:
        for pattern in rule.patterns:
            out.setdefault(pattern.fact, []).append((rule, pattern))
    return out
