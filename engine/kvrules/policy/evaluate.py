"""The reference semantics of conditions, in plain Python.

The engine decides; this module states what a condition means so that
(1) points the rules cannot tell apart share one evaluation (the point-class key),
(2) ``explain`` can say which condition failed and what was observed, and
(3) tests can check the compiled engine conditions against it, value by value.
"""
from __future__ import annotations

from typing import Any, Mapping

from kvrules.facts.jsontypes import json_type
from kvrules.policy.model import Atom, Expr, Ref
from kvrules.facts.jsontypes import canonical, value_type

MISSING = object()


def _is_number(v: Any) -> bool:
    """Numbers the engine can compare: integers beyond int64 only compare by content."""
    return value_type(v) in ("integer", "number")


def _equal(a: Any, b: Any) -> bool:
    """Strict equality: same JSON type (numbers compare as numbers) and same content."""
    if _is_number(a) and _is_number(b):
        return bool(a == b)
    return json_type(a) == json_type(b) and canonical(a) == canonical(b)


def _equal_ref(a: Any, b: Any) -> bool:
    """Equality with another fact's field: same JSON type tag and same content."""
    return json_type(a) == json_type(b) and canonical(a) == canonical(b)


def _compare(op: str, a: Any, b: Any) -> bool:
    if not (_is_number(a) and _is_number(b)):
        return False
    outcome: bool = {"lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b}[op]
    return outcome


def _positive(atom: Atom, value: Any, other: Any) -> bool:
    """The atom's test before negation (ops are canonical: see parse.CANONICAL)."""
    op, operand = atom.op, atom.operand
    if value is MISSING:
        return False
    if op == "exists":
        return True
    if isinstance(operand, Ref):
        return _equal_ref(value, other) if op == "eq" else _compare(op, value, other)
    if op == "eq":
        return _equal(value, operand)
    if op == "in":
        return any(_equal(value, v) for v in operand)
    if op in ("lt", "le", "gt", "ge"):
        return _compare(op, value, operand)
    if op == "truthy":
        return bool(value)
    if op == "is":
        kind = value_type(value)
        return kind == operand or (operand == "number" and kind == "integer")
    if op == "starts_with":
        return isinstance(value, str) and value.startswith(operand)
    if op == "contains_any":
        return isinstance(value, list) and any(v in value for v in operand)
    raise ValueError(f"unknown operator {op}")


def eval_atom(atom: Atom, fields: Mapping[str, Any],
              env: Mapping[str, Mapping[str, Any]] | None = None) -> bool:
    """Evaluate one atom on a fact's fields; refs are looked up in ``env`` (alias → fields).

    A comparison with a referenced field that is absent does not hold (its negation does).
    """
    value = fields.get(atom.field, MISSING)
    other: Any = None
    if isinstance(atom.operand, Ref):
        other = (env or {}).get(atom.operand.alias, {}).get(atom.operand.field, MISSING)
    result = False if other is MISSING else _positive(atom, value, other)
    return not result if atom.negated else result


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
