"""Conditions of one pattern that can never hold together."""
from __future__ import annotations

from dataclasses import dataclass

from typing import ClassVar, Iterator

from kvrules.authoring.lint.base import Issue, LintContext
from kvrules.authoring.lint.sat import KindOf, conjunctions, unsatisfiable_field
from kvrules.policy.evaluate import atoms
from kvrules.policy.model import Atom, Pattern, Ref, Rule


@dataclass(frozen=True)
class ContradictoryConditionsIssue(Issue):
    """A pattern whose conditions can never all hold, so its rule can never fire (or its
    ``none`` always holds).

    Catches equality with two different literals, empty numeric ranges, a test of a value
    together with ``exists: false``, a type test against an operator of another type, and an
    ``any`` none of whose alternatives can hold. Satisfiability is decided by searching a
    witness under the reference semantics, so a finding is always a real contradiction;
    tests with ``{ref: ...}`` operands are not considered. No options.

    Fails::

        - fact: point
          where:
            total_kv_read_tokens: {lt: 1}
            all: [{total_kv_read_tokens: {gt: 5}}]

    Passes::

        - fact: point
          where:
            total_kv_read_tokens: {gt: 1}
            all: [{total_kv_read_tokens: {lt: 5}}]
    """

    code: ClassVar[str] = "rule_contradictory_conditions"
    description: ClassVar[str] = "conditions of one pattern can never hold together"


def check_contradictions(ctx: LintContext) -> Iterator[Issue]:
    """One finding per pattern (positive or ``none``) whose where-clause is unsatisfiable."""
    for rule in ctx.policy.rules:
        for pattern in rule.patterns:
            issue = _contradiction(ctx, rule, pattern)
            if issue is not None:
                yield issue


def _contradiction(ctx: LintContext, rule: Rule, pattern: Pattern) -> Issue | None:
    dnf = conjunctions(pattern.where)
    kind_of = ctx.kind_of(pattern.fact)
    if dnf is None or any(unsatisfiable_field(c, kind_of) is None for c in dnf):
        return None
    if any(unsatisfiable_field([t], kind_of) for t in atoms(pattern.where)):
        return None  # one test alone cannot hold: a type error, reported by the type checks
    effect = ("so this 'none' always holds" if pattern.negated
              else "so the rule can never fire")
    if len(dnf) == 1:
        culprit, tests = _culprit(dnf[0], kind_of)
        text = " and ".join(t.describe() for t in tests)
        return ContradictoryConditionsIssue(
            f"{pattern.fact}: {text} can never hold together, {effect}", culprit.loc,
            culprit.pointer, rule.id)
    return ContradictoryConditionsIssue(
        f"{pattern.fact}: none of the {len(dnf)} alternatives of this pattern can hold, "
        f"{effect}", pattern.loc, pattern.pointer, rule.id)


def _culprit(conj: list[Atom], kind_of: KindOf) -> tuple[Atom, list[Atom]]:
    """The test (in source order) that makes the conjunction unsatisfiable, with the tests
    on its field that it contradicts."""
    ordered = sorted((a for a in conj if not isinstance(a.operand, Ref)),
                     key=lambda a: (a.loc[1], a.loc[2], a.pointer))
    for i, atom in enumerate(ordered):
        name = unsatisfiable_field(ordered[:i + 1], kind_of)
        if name is not None:
            return atom, [a for a in ordered[:i + 1] if a.field == name]
    return ordered[-1], ordered  # unreachable: the whole conjunction is unsatisfiable
