"""Policy coverage over a test run: rules fired, and conditions seen both true and false.

*Rule coverage*: a rule is covered when it fired in at least one case (from the engine's
own ``RuleFired`` events). A step of an ordered decision is a rule too, covered when it
*decided* a point in at least one case (holding while an earlier step decides tests
nothing about its result); the rule a decision generates to pick its first step is not an
authored rule and is not counted.

*Condition coverage*: every atomic condition (one field test, after ``not`` is pushed down)
must be seen both true and false *where it decided its pattern*. For each case, every rule's
join is replayed over the session's facts (:func:`kvrules.authoring.explain.joins.walk`); for each
fact reaching a pattern, a condition's outcome is recorded only when flipping that one
condition would flip the pattern's result on that fact (the "unique cause" of MC/DC). This
is sound in both directions: an outcome is never credited for a fact no rule could have
bound at that point of its join, nor for a condition whose value did not matter there (the
other half of an ``and`` that was already false, for instance).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kvrules.authoring.explain.joins import Env, SessionFact, Traced, walk
from kvrules.policy.evaluate import atoms, eval_atom
from kvrules.policy.decisions import is_pick_rule, step_rules
from kvrules.policy.model import Atom, Expr, Pattern, Policy, Rule

Key = tuple[str, str]
"""(file, JSON pointer) of a condition: stable across parameter sets and runs."""


def eval_forced(expr: Expr, fields: dict[str, Any], env: Env, forced: Atom,
                value: bool) -> bool:
    """The expression's value with one atom (by identity) forced to ``value``."""
    if expr.kind == "atom":
        assert expr.atom is not None
        return value if expr.atom is forced else eval_atom(expr.atom, fields, env)
    results = (eval_forced(c, fields, env, forced, value) for c in expr.children)
    return all(results) if expr.kind == "and" else any(results)


def deciding_outcomes(where: Expr | None, fields: dict[str, Any],
                      env: Env) -> list[tuple[Atom, bool]]:
    """(atom, outcome) for every atom whose value decides ``where`` on this fact."""
    if where is None:
        return []
    return [(a, eval_atom(a, fields, env)) for a in atoms(where)
            if eval_forced(where, fields, env, a, True)
            != eval_forced(where, fields, env, a, False)]


@dataclass(frozen=True)
class Condition:
    """One condition of the policy, where it is and what it tests."""

    rule: str
    file: str
    line: int
    column: int
    pointer: str
    text: str


@dataclass(frozen=True)
class CoverageReport:
    """Rule and condition coverage of one test run."""

    rules_total: int
    rules_fired: tuple[str, ...]
    rules_not_fired: tuple[tuple[str, str, int], ...]
    conditions_total: int
    conditions_covered: int
    partial: tuple[tuple[Condition, str], ...]

    @property
    def rule_percent(self) -> float:
        return 100.0 * len(self.rules_fired) / self.rules_total if self.rules_total else 100.0

    @property
    def condition_percent(self) -> float:
        total = self.conditions_total
        return 100.0 * self.conditions_covered / total if total else 100.0

    def to_dict(self) -> dict[str, Any]:
        return {"rules": {"total": self.rules_total, "fired": len(self.rules_fired),
                          "percent": round(self.rule_percent, 1),
                          "not_fired": [{"rule": r, "file": f, "line": n}
                                        for r, f, n in self.rules_not_fired]},
                "conditions": {"total": self.conditions_total,
                               "covered": self.conditions_covered,
                               "percent": round(self.condition_percent, 1),
                               "partial": [{"rule": c.rule, "file": c.file, "line": c.line,
                                            "column": c.column, "condition": c.text,
                                            "seen": seen} for c, seen in self.partial]}}


@dataclass
class Coverage:
    """A tracer fed with each traced case; :meth:`report` summarises the run."""

    policy: Policy
    fired: set[str] = field(default_factory=set)
    seen: dict[Key, set[bool]] = field(default_factory=dict)

    def record(self, traced: Traced) -> None:
        """Credit the rules that fired (steps: that decided) and the condition outcomes that
        decided a pattern."""
        steps = {rule.id for _, _, rule in step_rules(traced.cp.policy)}
        self.fired.update(e.rule for e in traced.evaluation.events if e.rule not in steps)
        self.fired.update(str(d.fields["decided_by"]) for d in traced.evaluation.derived
                          if d.type == "verdict_regime" and d.fields.get("decided_by") in steps)
        for rule in authored_rules(traced.cp.policy):
            walk(traced, rule, self._visit)

    def _visit(self, pattern: Pattern, fact: SessionFact, env: Env) -> None:
        for atom, outcome in deciding_outcomes(pattern.where, fact.fields, env):
            self.seen.setdefault((atom.loc[0], atom.pointer), set()).add(outcome)

    def report(self) -> CoverageReport:
        rules = authored_rules(self.policy)
        missing = tuple((r.id, r.loc[0], r.loc[1]) for r in rules if r.id not in self.fired)
        conditions = [(_condition(r.id, a), self.seen.get((a.loc[0], a.pointer), set()))
                      for r in rules for p in r.patterns for a in atoms(p.where)]
        partial = tuple((c, _seen(s)) for c, s in conditions if len(s) < 2)
        return CoverageReport(len(rules), tuple(r.id for r in rules if r.id in self.fired),
                              missing, len(conditions), len(conditions) - len(partial), partial)


def authored_rules(policy: Policy) -> list[Rule]:
    """The rules an author wrote: plain rules and decision steps (not generated pick rules)."""
    return [r for r in policy.rules if not is_pick_rule(policy, r.id)]


def _condition(rule: str, atom: Atom) -> Condition:
    file, line, column = atom.loc
    return Condition(rule, file, line, column, atom.pointer, atom.describe())


def _seen(outcomes: set[bool]) -> str:
    if not outcomes:
        return "never decided"
    return "only true" if True in outcomes else "only false"
