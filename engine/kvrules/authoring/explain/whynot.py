"""Why a rule did not fire, in words and evidence (shared by point and cell explanations)."""
from __future__ import annotations

from dataclasses import dataclass

from typing import Any

from kvrules.authoring.explain.joins import Blocker, Traced
from kvrules.authoring.explain.phrases import absence_text, fact_label, failed_text, or_around
from kvrules.authoring.explain.rulefacts import Evidence, evidence_of
from kvrules.policy.evaluate import atoms
from kvrules.policy.model import Pattern, Rule


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
        return WhyNot(rule.id, proposes, "no fact", no_fact_text(traced, b.pattern))
    if b.kind == "blocked":
        by = f" (derived by {b.fact.by})" if b.fact and b.fact.by else ""
        name = fact_label(b.fact.type, b.fact.fields) if b.fact else b.pattern.fact
        return WhyNot(rule.id, proposes, "blocked",
                      f"needs {absence_text(b.pattern)}, but {name} exists{by}")
    assert b.fact is not None and b.atom is not None
    group = or_around(b.pattern.where, b.atom)
    read = [b.atom.field] if group is None else list(dict.fromkeys(a.field for a in atoms(group)))
    ev = evidence_of(traced, rule, {b.pattern.alias: b.fact.id}, substitute,
                     fields={b.pattern.alias: read})
    of = f" (the closest of {b.candidates} {b.pattern.fact} facts)" if b.candidates > 1 else ""
    return WhyNot(rule.id, proposes, "failed", f"needs {failed_text(b.pattern.where, b.atom)}{of}",
                  tuple(ev))


def no_fact_text(traced: Traced, pattern: Pattern) -> str:
    """``needs the cell to qualify for dense_synthetic_kv (failed: D9)`` or ``needs a plan``."""
    if pattern.fact == "qualified":
        failed = [f"{name} (failed: {', '.join(dict.fromkeys(c.id for c in q.failed))})"
                  for name, q in traced.verdict.qualifications.items() if not q.eligible]
        return "needs the cell to qualify for " + ("; ".join(failed) or "a qualification")
    made = [r.id for r in traced.cp.policy.rules if any(a.produces == pattern.fact
                                                        for a in r.actions)]
    how = f"none was derived (by {', '.join(made)})" if made else "none in the evidence"
    return f"needs a {pattern.fact} fact: {how}"
