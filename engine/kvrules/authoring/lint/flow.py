"""How facts flow between rules: rules that can never fire, derived facts nobody reads."""
from __future__ import annotations

from dataclasses import dataclass

from typing import Any, ClassVar, Iterator

from kvrules.authoring.lint.base import Issue, LintContext
from kvrules.authoring.lint.sat import conjoin, satisfiable
from kvrules.authoring.policyinfo import producers, reads
from kvrules.diagnostics import Severity
from kvrules.policy.catalogue import base_catalogue
from kvrules.policy.evaluate import MISSING
from kvrules.policy.model import Action, Atom, Expr, Pattern, Ref, Rule

FREE = object()
"""A produced field whose value is not known statically (copied through a ref, a template)."""


@dataclass(frozen=True)
class NeverFiresIssue(Issue):
    """A rule that can never fire because a fact it needs is never produced: no rule derives
    that fact, only rules that can never fire themselves do, or no producer sets the fields
    the pattern requires (e.g. ``qualified`` with a group nobody qualifies). Computed as a
    least fixpoint from the extracted facts, so chains of dead rules are all reported.

    Fails (nothing derives ``config_bound``)::

        - fact: point
        - fact: config_bound

    Passes::

        - id: regime.config_bound
          when: [{fact: cell, where: {model_config_sha256: {truthy: true}}}]
          then: {derive: {fact: config_bound}}
    """

    code: ClassVar[str] = "rule_never_fires"
    description: ClassVar[str] = "a rule needs a fact that no live rule produces"


@dataclass(frozen=True)
class UnusedDerivedFactIssue(Issue):
    """A derived fact declared under ``policy.derived`` that no pattern reads: the rules
    deriving it have no effect on any verdict.

    Fails::

        derived:
          expected_model: {fields: {path: {type: any}}}   # and no rule says fact: expected_model

    Passes: remove the declaration, or read the fact in a rule.
    """

    code: ClassVar[str] = "rule_unused_derived_fact"
    description: ClassVar[str] = "a declared derived fact is never read"
    severity: ClassVar[Severity] = "warning"


def produced_shape(ctx: LintContext, rule: Rule, action: Action) -> dict[str, Any]:
    """Field → literal, FREE or MISSING for the fact an action asserts."""
    a = action.args
    shape: dict[str, Any]
    if action.kind == "derive":
        shape = {f: MISSING for f in ctx.fact_types.get(a["fact"], {}) if f != "id"}
        shape.update({k: FREE if isinstance(v, Ref) else v for k, v in a.get("set", {}).items()})
    elif action.kind == "fail":
        shape = {"group": a["group"], "condition": a["condition"], "reason": FREE}
    elif action.kind == "qualify":
        shape = {"group": a["group"]}
    elif action.kind == "error":
        at = a.get("at")
        shape = {"code": a["code"], "message": FREE, "at_fact": FREE,
                 "at_field": at.field if isinstance(at, Ref) else ""}
    else:
        shape = {k: FREE if isinstance(v, Ref) else v for k, v in a.items()}
        if action.kind == "regime":
            shape.setdefault("decided_by", rule.id)
    shape["by"] = rule.id
    return shape


def _shape_expr(shape: dict[str, Any]) -> Expr:
    tests = []
    for name, value in shape.items():
        if value is MISSING:
            tests.append(Atom(name, "exists", True, negated=True))
        elif value is not FREE:
            tests.append(Atom(name, "eq", value))
    return Expr("and", tuple(Expr("atom", atom=t) for t in tests))


def can_match(ctx: LintContext, pattern: Pattern, rule: Rule, action: Action) -> bool:
    """The fact ``action`` asserts can satisfy ``pattern``'s conditions."""
    return satisfiable(conjoin(pattern.where, _shape_expr(produced_shape(ctx, rule, action))))


def live_rules(ctx: LintContext) -> set[str]:
    """Rules that can fire on some input: least fixpoint over extracted facts."""
    live: set[str] = set()
    changed = True
    while changed:
        changed = False
        for rule in ctx.policy.rules:
            if rule.id not in live and all(_pattern_live(ctx, p, live) is None
                                           for p in rule.positives):
                live.add(rule.id)
                changed = True
    return live


def _pattern_live(ctx: LintContext, pattern: Pattern, live: set[str]) -> str | None:
    """None when some fact can satisfy the pattern, else why not."""
    if not satisfiable(pattern.where, ctx.kind_of(pattern.fact)):
        return "contradiction"
    if pattern.fact in base_catalogue() or pattern.fact == "params" \
            or pattern.fact not in ctx.fact_types:
        return None  # extracted facts exist; unknown fact types are the compiler's finding
    made = producers(ctx.policy).get(pattern.fact, [])
    if not made:
        return f"needs a '{pattern.fact}' fact, but no rule produces one"
    alive = [(r, a) for r, a in made if r.id in live]
    if not alive:
        ids = ", ".join(dict.fromkeys(r.id for r, _ in made))
        return (f"needs a '{pattern.fact}' fact, but every rule producing one can never "
                f"fire ({ids})")
    if not any(can_match(ctx, pattern, r, a) for r, a in alive):
        ids = ", ".join(dict.fromkeys(r.id for r, _ in alive))
        return (f"needs a '{pattern.fact}' fact matching its conditions, but no rule "
                f"produces one that can match (produced by {ids})")
    return None


def check_never_fires(ctx: LintContext) -> Iterator[Issue]:
    """The first unsatisfiable pattern of every dead rule (contradictions are reported by
    their own check, so a rule dead only through its own conditions is skipped)."""
    live = live_rules(ctx)
    for rule in ctx.policy.rules:
        if rule.id in live:
            continue
        for pattern in rule.positives:
            why = _pattern_live(ctx, pattern, live)
            if why == "contradiction":
                break
            if why is not None:
                yield NeverFiresIssue(why, pattern.loc, pattern.pointer, rule.id)
                break


def check_unused_derived(ctx: LintContext) -> Iterator[Issue]:
    """Every declared derived fact type that no pattern reads."""
    read = reads(ctx.policy)
    made = producers(ctx.policy)
    header = ctx.policy.header_loc[0]
    for name in ctx.policy.derived:
        if name in read:
            continue
        by = ", ".join(dict.fromkeys(r.id for r, _ in made.get(name, [])))
        tail = f" (derived by {by})" if by else " and no rule derives it"
        pointer = f"/policy/derived/{name}"
        yield UnusedDerivedFactIssue(f"derived fact '{name}' is declared but no rule reads "
                                     f"it{tail}", ctx.locate(header, pointer), pointer)
