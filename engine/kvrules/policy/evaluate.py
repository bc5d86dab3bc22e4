"""The reference semantics of conditions, in plain Python.

The engine decides; this module states what a condition means so that
(1) points the rules cannot tell apart share one evaluation (the point-class key),
(2) ``explain`` can say which condition failed and what was observed, and
(3) tests can check the compiled engine conditions against it, value by value.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

from kvrules.policy.model import Atom, Expr, Ref
from kvrules.policy.operators import MISSING as MISSING, OPERATORS, holds


def eval_atom(atom: Atom, fields: Mapping[str, Any],
              env: Mapping[str, Mapping[str, Any]] | None = None) -> bool:
    """Evaluate one atom on a fact's fields; refs are looked up in ``env`` (alias → fields).

    What each operator means is in :mod:`kvrules.policy.operators`; a comparison with a
    referenced field that is absent does not hold (its negation does), except ``same_as``,
    for which absent equals absent.
    """
    value = fields.get(atom.field, MISSING)
    other: Any = None
    if isinstance(atom.operand, Ref):
        other = (env or {}).get(atom.operand.alias, {}).get(atom.operand.field, MISSING)
    operand = other if isinstance(atom.operand, Ref) else atom.operand
    result = holds(atom.op, value, operand, isinstance(atom.operand, Ref))
    return not result if atom.negated else result


def value_test(atom: Atom) -> Callable[[Any], bool]:
    """``eval_atom(atom, fields)`` as a function of the tested field's value alone
    (``MISSING``: the field is absent), without an ``env`` (a ref is then absent): for
    testing the many values of one field, as point classes do, without looking up the
    operator and building a fields mapping per value."""
    is_ref = isinstance(atom.operand, Ref)
    operand = MISSING if is_ref else atom.operand
    spec = OPERATORS[atom.op]
    test = spec.holds_ref if is_ref and spec.holds_ref is not None else spec.holds
    if atom.negated:
        return lambda value: not test(value, operand)
    return lambda value: test(value, operand)


def eval_expr(expr: Expr, fields: Mapping[str, Any],
              env: Mapping[str, Mapping[str, Any]] | None = None) -> bool:
    if expr.kind == "atom":
        assert expr.atom is not None
        return eval_atom(expr.atom, fields, env)
    results = (eval_expr(c, fields, env) for c in expr.children)
    return all(results) if expr.kind == "and" else any(results)


def first_failure(expr: Expr, fields: Mapping[str, Any],
                  env: Mapping[str, Mapping[str, Any]] | None = None) -> Atom | None:
    """The first atom that makes the expression false (for ``explain``), else None."""
    if eval_expr(expr, fields, env):
        return None
    if expr.kind == "atom":
        return expr.atom
    for child in expr.children:
        failed = first_failure(child, fields, env)
        if failed is not None and expr.kind == "and":
            return failed
    return next((first_failure(c, fields, env) for c in expr.children), None)


def atoms(expr: Expr | None) -> list[Atom]:
    """All atoms of an expression, in source order."""
    if expr is None:
        return []
    if expr.kind == "atom":
        return [expr.atom] if expr.atom else []
    return [a for c in expr.children for a in atoms(c)]
