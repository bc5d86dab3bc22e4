"""Regime decisions: two rules that can decide differently for one point without an order.

(Regimes of decision steps outside the declared vocabulary are a compiler error since the
ordered ``decisions:`` block exists, so no lint check follows values through facts.)"""
from __future__ import annotations

from dataclasses import dataclass

from typing import ClassVar, Iterator

from kvrules.authoring.lint.base import Issue, LintContext
from kvrules.authoring.lint.sat import conjoin, negate, satisfiable
from kvrules.authoring.policyinfo import FACT_KEYS, Decider, deciders
from kvrules.policy.evaluate import atoms, eval_atom
from kvrules.policy.model import Atom, Expr, Pattern, Ref


@dataclass(frozen=True)
class AmbiguousRegimeIssue(Issue):
    """Two rules that can decide different regimes for the same point with nothing to order
    them: direct ``regime`` rules, or steps of different decisions, whose conditions can
    hold together. Steps of one ordered decision (``decisions:``) never are: the first that
    holds decides. At run time such a point becomes a ``policy_conflict`` error.

    Two rules are exclusive when patterns that must bind the same fact (the point they
    decide, a fact of which a cell has only one, or a fact pinned by the same key such as
    ``rank: 0``) have conditions that cannot hold together, or when one rule's ``none``
    excludes every fact the other one needs.

    Fails (a point stamped with both stamps gets two regimes)::

        - id: a
          when: [{fact: point, where: {sample_reasons: {contains: kvwarm_real_kv}}}]
          then: {regime: {point: {ref: point.id}, value: real_kv}}
        - id: b
          when: [{fact: point, where: {sample_reasons: {contains: kvwarm_fake_fallback}}}]
          then: {regime: {point: {ref: point.id}, value: fake_fallback}}

    Passes: make ``a`` and ``b`` steps of one decision, in the order that should win, or add
    ``sample_reasons: {contains_none: [kvwarm_real_kv]}`` to ``b``.
    """

    code: ClassVar[str] = "rule_ambiguous_regime"
    description: ClassVar[str] = "two rules can decide different regimes without an order"


def check_ambiguous_regimes(ctx: LintContext) -> Iterator[Issue]:
    """Every pair of unordered deciders with different literal regimes that can co-fire;
    reported at the later rule of the pair."""
    found = deciders(ctx.policy)
    for j, b in enumerate(found):
        for a in found[:j]:
            if a.rule.id == b.rule.id or a.ordered_against(b):
                continue
            if isinstance(a.regime, Ref) or isinstance(b.regime, Ref) \
                    or _equal(a.regime, b.regime) or _exclusive(ctx, a, b):
                continue
            yield AmbiguousRegimeIssue(_message(a, b), b.rule.loc, b.rule.pointer, b.rule.id)


def _equal(a: object, b: object) -> bool:
    """Equality as the rules see it (the reference semantics of ``eq``)."""
    return eval_atom(Atom("v", "eq", b), {"v": a})


def _message(a: Decider, b: Decider) -> str:
    return (f"can decide regime {b.regime!r} for the same facts for which '{a.rule.id}' "
            f"decides {a.regime!r} and nothing orders them; make their conditions exclusive "
            "or make them steps of one decision")


def _exclusive(ctx: LintContext, a: Decider, b: Decider) -> bool:
    """No single session can make both rules fire for the same point."""
    for pa in a.rule.positives:
        for pb in b.rule.positives:
            if pa.fact == pb.fact and _same_fact(pa, pb, a, b) and not satisfiable(
                    conjoin(pa.where, pb.where), ctx.kind_of(pa.fact)):
                return True
    return _excluded_by_none(ctx, a, b) or _excluded_by_none(ctx, b, a)


def _same_fact(pa: Pattern, pb: Pattern, a: Decider, b: Decider) -> bool:
    """The two patterns necessarily bind one and the same fact."""
    if pa.alias == a.subject and pb.alias == b.subject:
        return True
    keys = FACT_KEYS.get(pa.fact)
    if keys is None:
        return False
    pins_a, pins_b = _pins(pa.where), _pins(pb.where)
    return all(k in pins_a and k in pins_b and _equal(pins_a[k], pins_b[k]) for k in keys)


def _pins(where: Expr | None) -> dict[str, object]:
    """Fields fixed to a literal by a top-level equality of a where-clause."""
    if where is None:
        return {}
    tops = [where] if where.kind == "atom" else list(where.children) if where.kind == "and" \
        else []
    out: dict[str, object] = {}
    for e in tops:
        atom = e.atom
        if e.kind == "atom" and atom and atom.op == "eq" and not atom.negated \
                and not isinstance(atom.operand, Ref):
            out[atom.field] = atom.operand
    return out


def _excluded_by_none(ctx: LintContext, x: Decider, y: Decider) -> bool:
    """``x`` needs no fact matching W that ``y`` needs a fact matching W' ⊆ W for."""
    for neg in x.rule.negatives:
        if any(isinstance(t.operand, Ref) for t in atoms(neg.where)):
            continue
        for pos in y.rule.positives:
            if pos.fact == neg.fact and not satisfiable(conjoin(pos.where, negate(neg.where)),
                                                        ctx.kind_of(pos.fact)):
                return True
    return False


@dataclass(frozen=True)
class UnreachableStepIssue(Issue):
    """A step of an ordered decision that can never decide: an earlier step of the same
    decision reads nothing but the subject, and its conditions hold for every subject this
    step holds for, so the earlier step always decides first. (Found only when that is
    provable: the conditions on the subject compare with literals, not refs.)

    Fails (every point stamped kvwarm_fake_fallback with native fake_fallback is already
    decided by ``s.fake_stamp``)::

        steps:
          - id: s.fake_stamp
            when: [{fact: point, where: {sample_reasons: {contains: kvwarm_fake_fallback}}}]
            then: fake_fallback
          - id: s.dense_stamp
            when: [{fact: point, where: {sample_reasons: {contains: kvwarm_fake_fallback},
                                         native_regime: fake_fallback}}]
            then: "skip:dense_model_content_insensitive"

    Passes: put ``s.dense_stamp`` first (the narrower step before the wider one).
    """

    code: ClassVar[str] = "rule_unreachable_step"
    description: ClassVar[str] = "a decision step can never decide (an earlier step always holds)"


def check_unreachable_steps(ctx: LintContext) -> Iterator[Issue]:
    """For each step, the first earlier step of its decision that provably covers it."""
    steps = [s for s in deciders(ctx.policy) if s.decision is not None]
    for k, later in enumerate(steps):
        earlier = next((e for e in steps[:k] if e.decision is later.decision
                        and _covers(ctx, e, later)), None)
        if earlier is not None and later.decision is not None:
            yield UnreachableStepIssue(
                f"can never decide: every {later.decision.subject} it holds for is decided "
                f"first by the earlier step '{earlier.rule.id}'", later.rule.loc,
                later.rule.pointer, later.rule.id)


def _covers(ctx: LintContext, earlier: Decider, later: Decider) -> bool:
    """``earlier`` reads only the subject, and the subject conditions of ``later`` imply
    those of ``earlier`` (no refs, so the implication is decided by the witness search)."""
    if len(earlier.rule.patterns) != 1 or earlier.rule.patterns[0].negated \
            or earlier.rule.patterns[0].alias != earlier.subject:
        return False
    subject = earlier.rule.patterns[0]
    mine = next((p for p in later.rule.positives if p.alias == later.subject), None)
    if mine is None or _has_ref(subject.where) or _has_ref(mine.where):
        return False
    return not satisfiable(conjoin(mine.where, negate(subject.where)), ctx.kind_of(mine.fact))


def _has_ref(where: Expr | None) -> bool:
    return any(isinstance(a.operand, Ref) for a in atoms(where))
