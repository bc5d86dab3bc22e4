"""What a policy means beyond its syntax: who produces which fact, who decides regimes.

Shared by the lint checks (ambiguous regime order, dead rules), ``explain`` (why-not for the
regimes that were not chosen) and coverage, so all three agree on one reading of the rules.

Regimes are decided in one of two ways, both read from the policy as written, never guessed:
a *step* of an ordered decision (``decisions:``, :mod:`kvrules.policy.decisions`) decides
when no earlier step of its decision holds, and a *direct* decider is a plain rule with a
``regime`` action of a literal value. Steps of one decision are ordered against each other;
nothing else is.
"""
from __future__ import annotations

from dataclasses import dataclass

from typing import Any

from kvrules.policy.catalogue import base_catalogue
from kvrules.policy.decisions import is_pick_rule, step_rules
from kvrules.policy.model import Action, Decision, Pattern, Policy, Ref, Rule

FACT_KEYS: dict[str, tuple[str, ...]] = {
    "cell": (), "kvwarm": (), "plan": (), "provenance": (), "launch": (), "params": (),
    "warmup": ("rank",), "rank": ("rank",), "model_section": ("section",),
    "cache_spec": ("rank", "group_index", "spec_index"), "point": ("benchmark_id",)}
"""Fields that identify an extracted fact within one cell session (``()``: at most one such
fact per session). The extractor guarantees these; tests check it on real cells."""


@dataclass(frozen=True)
class Decider:
    """A rule that decides a regime for a point: a step of a decision, or a direct rule."""

    rule: Rule
    action: Action
    regime: Any
    order: int | None
    """The step's 1-based position in its decision (None for a direct decider)."""
    subject: str | None
    decision: Decision | None = None

    def ordered_against(self, other: "Decider") -> bool:
        """Steps of one decision are ordered: the earlier one wins."""
        return self.decision is not None and other.decision is not None \
            and self.decision.id == other.decision.id


def producers(policy: Policy) -> dict[str, list[tuple[Rule, Action]]]:
    """Fact type → the (rule, action) pairs that assert it, in policy order."""
    out: dict[str, list[tuple[Rule, Action]]] = {}
    for rule in policy.rules:
        for action in rule.actions:
            out.setdefault(action.produces, []).append((rule, action))
    return out


def deciders(policy: Policy) -> list[Decider]:
    """Every decision step (in decision order), then every direct regime rule."""
    out = [Decider(rule, rule.actions[0], d.steps[k - 1].value, k, d.alias, d)
           for d, k, rule in step_rules(policy)]
    for rule in policy.rules:
        if is_pick_rule(policy, rule.id):
            continue
        for action in rule.actions:
            if action.kind == "regime" and not isinstance(action.args.get("value"), Ref):
                out.append(Decider(rule, action, action.args["value"], None,
                                   _alias(action.args.get("point"))))
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
