"""Type mismatches the compiler's literal check cannot see: refs and derived fields.

The compiler (``check_types``) compares literals with declared field types. These checks
cover the rest: a field compared with another fact's field of a different declared type,
and derive actions that put a literal or a field of the wrong type into a declared field.
"""
from __future__ import annotations

from dataclasses import dataclass

from typing import Any, ClassVar, Iterator

from kvrules.authoring.lint.base import Issue, LintContext
from kvrules.facts.jsontypes import json_type
from kvrules.policy import codes, operators
from kvrules.policy.evaluate import atoms
from kvrules.policy.model import Action, Atom, Pattern, Ref

LITERAL_FITS = {"string": ("string",), "integer": ("integer",), "boolean": ("boolean",),
                "string_list": ("array",)}


@dataclass(frozen=True)
class RefTypeMismatchIssue(Issue):
    """A comparison between two fields of different declared types (a boolean with a
    string, an integer with a boolean, ...), or an ordering test on a non-integer field.

    Such a test never holds (its negation always does): values of different JSON types are
    never equal under the engine's strict typing. Fields declared ``any`` are not checked.

    Fails::

        - fact: launch
        - fact: rank
          where: {rank: {ref: launch.run_sh_model_literal}}

    Passes::

        - fact: warmup
        - fact: rank
          where: {rank: {ref: warmup.rank}}
    """

    code: ClassVar[str] = codes.RULE_TYPE_ERROR
    description: ClassVar[str] = "a field is compared with a field of another type"


@dataclass(frozen=True)
class DeriveTypeMismatchIssue(Issue):
    """A derive action that sets a declared field to a literal or field of another type.

    Fails (``candidate.step`` is declared ``integer``)::

        then: {derive: {fact: candidate, set: {point: {ref: point.id}, step: "5"}}}

    Passes::

        then: {derive: {fact: candidate, set: {point: {ref: point.id}, step: 5}}}
    """

    code: ClassVar[str] = codes.RULE_TYPE_ERROR
    description: ClassVar[str] = "a derived field is set to a value of another type"


def check_ref_types(ctx: LintContext) -> Iterator[Issue]:
    """Every ref comparison whose two sides have different declared types."""
    for rule in ctx.policy.rules:
        bound: dict[str, str] = {}
        for pattern in rule.patterns:
            env = {**bound, pattern.alias: pattern.fact}
            for atom in atoms(pattern.where):
                problem = _ref_problem(ctx, pattern, atom, env)
                if problem:
                    yield RefTypeMismatchIssue(problem, atom.loc, atom.pointer, rule.id)
            if not pattern.negated:
                bound[pattern.alias] = pattern.fact


def _ref_problem(ctx: LintContext, pattern: Pattern, atom: Atom,
                 env: dict[str, str]) -> str | None:
    ref = atom.operand
    if not isinstance(ref, Ref) or ref.alias not in env:
        return None
    left = ctx.declared(pattern.fact, atom.field)
    right = ctx.declared(env[ref.alias], ref.field)
    if left is None or right is None:
        return None  # unknown names are the compiler's findings
    here, there = f"{pattern.fact}.{atom.field}", f"{env[ref.alias]}.{ref.field}"
    if operators.OPERATORS[atom.op].orders:
        odd = [(n, k) for n, k in ((here, left), (there, right)) if k not in ("integer", "any")]
        if odd:
            return f"{atom.op} compares numbers; '{odd[0][0]}' is {odd[0][1]}"
        return None
    if "any" in (left, right) or left == right:
        return None
    return f"'{here}' is {left} but is compared with '{there}' ({right})"


def check_derive_types(ctx: LintContext) -> Iterator[Issue]:
    """Every derive ``set`` value whose type cannot be the declared field type."""
    for rule in ctx.policy.rules:
        alias_type = {p.alias: p.fact for p in rule.positives}
        for action in rule.actions:
            if action.kind != "derive":
                continue
            for name, value in action.args.get("set", {}).items():
                problem = _set_problem(ctx, action, name, value, alias_type)
                if problem:
                    yield DeriveTypeMismatchIssue(problem, action.loc,
                                                  f"{action.pointer}/set/{name}", rule.id)


def _set_problem(ctx: LintContext, action: Action, name: str, value: Any,
                 alias_type: dict[str, str]) -> str | None:
    fact = action.args["fact"]
    declared = ctx.declared(fact, name)
    if declared in (None, "any"):
        return None
    if isinstance(value, Ref):
        source = ctx.declared(alias_type.get(value.alias, ""), value.field)
        if source in (None, "any", declared):
            return None
        return (f"'{fact}.{name}' is {declared} but is set from "
                f"'{alias_type[value.alias]}.{value.field}' ({source})")
    kind = json_type(value)
    if kind in LITERAL_FITS.get(str(declared), ()):
        if declared != "string_list" or all(isinstance(v, str) for v in value):
            return None
    return f"'{fact}.{name}' is {declared} but is set to {kind} {value!r}"

