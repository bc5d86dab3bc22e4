"""Why a rule did not fire, in words and evidence (shared by point and cell explanations)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvrules.authoring.joins import Blocker, Traced
from kvrules.authoring.rulefacts import Evidence, evidence_of, negation_text
from kvrules.policy.model import Rule


@dataclass(frozen=True)
class WhyNot:
    """A rule that did not decide this point, and the condition that stopped it."""

    rule: str
    proposes: str
    status: str
    detail: str
    evidence: tuple[Evidence, ...] = ()


def why_not_of(traced: Traced, rule: Rule, proposes: str, b: Blocker | None,
               substitute: dict[str, Any] | None = None) -> WhyNot:
    """A WhyNot from a blocker (the evidence is the observed value of the failed field)."""
    if b is None:
        return WhyNot(rule.id, proposes, "would fire", "every condition holds on these facts")
    if b.kind == "no_fact":
        return WhyNot(rule.id, proposes, "no fact", f"needs a {b.pattern.fact} fact: "
                      f"{_no_fact_reason(traced, b.pattern.fact)}")
    if b.kind == "blocked":
        by = f" (derived by {b.fact.by})" if b.fact and b.fact.by else ""
        return WhyNot(rule.id, proposes, "blocked", f"{negation_text(rule)[0]}, but "
                      f"{b.fact.id if b.fact else '?'}{by} exists")
    assert b.fact is not None and b.atom is not None
    ev = evidence_of(traced, rule, {b.pattern.alias: b.fact.id}, substitute,
                     fields={b.pattern.alias: [b.atom.field]})
    shown = (substitute or {}).get(b.fact.id)
    name = shown.id if shown else b.fact.id
    name = name if name.startswith(b.pattern.fact) else f"{b.pattern.fact} {name}"
    of = f" (the closest of {b.candidates})" if b.candidates > 1 else ""
    return WhyNot(rule.id, proposes, "failed", f"{name}{of}: {b.atom.describe()} does not "
                  "hold", tuple(ev))


def _no_fact_reason(traced: Traced, fact: str) -> str:
    if fact == "qualified":
        failed = [f"{name}: " + ", ".join(c.id for c in q.failed)
                  for name, q in traced.verdict.qualifications.items() if not q.eligible]
        return "not qualified (" + "; ".join(failed) + ")" if failed else "not qualified"
    made = [r.id for r in traced.cp.policy.rules if any(a.produces == fact for a in r.actions)]
    return f"none was derived (by {', '.join(made)})" if made else "none in the evidence"
