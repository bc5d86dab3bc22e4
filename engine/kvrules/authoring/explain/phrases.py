"""Plain words for what ``explain`` shows: conditions as authors write them, facts by name.

The parser pushes ``not`` down to atoms and reduces spellings (``ne`` is ``eq`` negated,
``exists: false`` is ``exists`` negated); an explanation must not show that lowering
(``not (enabled eq True)``). Each canonical operator is phrased once here, negated or not,
and a fact is named by its type and identifying fields (``point 1``, ``rank 0 kvwarm``),
never by its session id (``p1``, ``warmup0``).
"""
from __future__ import annotations

import json
from typing import Any, Mapping

from kvrules.authoring.policyinfo import FACT_KEYS
from kvrules.policy.model import Atom, Expr, Pattern, Ref

KINDS = {"object": "an object", "array": "an array", "string": "a string",
         "integer": "an integer", "number": "a number", "boolean": "a boolean",
         "null": "null", "absent": "absent"}
"""``is`` operands as words."""

ORDER_WORDS = {"eq": "equal to", "ne": "other than", "lt": "less than", "le": "at most",
               "gt": "greater than", "ge": "at least"}
"""Numeric comparisons as words (also for ``length``)."""


def value_text(value: Any) -> str:
    """A value as JSON (``true``, ``null``, ``""``, ``["a"]``); ``absent`` for no value."""
    return json.dumps(value, ensure_ascii=False, default=repr)


def operand_text(operand: Any) -> str:
    return f"{operand.alias}.{operand.field}" if isinstance(operand, Ref) \
        else value_text(operand)


def condition_text(a: Atom) -> str:
    """One atom as its author would say it: ``enabled is not true``, ``groups is not an
    array``, ``sample_reasons contains "kvwarm_real_kv"``."""
    f, o, no = a.field, a.operand, a.negated
    if a.op == "eq":
        return f"{f} is {'not ' if no else ''}{operand_text(o)}"
    if a.op == "in":
        return f"{f} is {'not ' if no else ''}one of {operand_text(o)}"
    if a.op in ORDER_WORDS:
        return f"{f} is {'not ' if no else ''}{ORDER_WORDS[a.op]} {operand_text(o)}"
    if a.op == "exists":
        return f"{f} is {'absent' if no else 'present'}"
    if a.op == "truthy":
        return f"{f} is {'not ' if no else ''}truthy"
    if a.op == "is":
        return f"{f} is {'not ' if no else ''}{KINDS.get(o, operand_text(o))}"
    if a.op == "starts_with":
        return f"{f} {'does not start' if no else 'starts'} with {operand_text(o)}"
    if a.op == "contains_any":
        return _contains(f, o, no)
    if a.op == "length":
        return _length(f, o, no)
    if a.op == "same_as":
        return f"{f} {'differs from' if no else 'is the same as'} {operand_text(o)}"
    if a.op == "agree_on":
        return f"{f} items {'do not agree' if no else 'agree'} on {operand_text(o)}"
    return f"{f} {'not ' if no else ''}{a.op} {operand_text(o)}"


def _contains(f: str, o: Any, no: bool) -> str:
    if isinstance(o, list) and len(o) == 1:
        return f"{f} {'does not contain' if no else 'contains'} {value_text(o[0])}"
    return f"{f} contains {'none' if no else 'one'} of {operand_text(o)}"


def _length(f: str, o: Any, no: bool) -> str:
    (cmp, n), = o.items() if isinstance(o, dict) and len(o) == 1 else (("eq", o),)
    if (cmp, n) == ("eq", 0):
        return f"{f} is {'not ' if no else ''}empty"
    return f"{f} {'does not have' if no else 'has'} {ORDER_WORDS.get(cmp, cmp)} {n} items"


def expr_text(expr: Expr | None) -> str:
    """A where-clause in words: ``a and (b or c)``."""
    if expr is None:
        return "true"
    if expr.kind == "atom":
        return condition_text(expr.atom) if expr.atom else "true"
    joiner = " and " if expr.kind == "and" else " or "
    return joiner.join(expr_text(c) if c.kind == "atom" or c.kind == expr.kind
                       else f"({expr_text(c)})" for c in expr.children)


def failed_text(where: Expr | None, atom: Atom) -> str:
    """The condition a rule needed where ``atom`` failed: the atom, or the whole ``any`` it
    belongs to (each alternative failed, so naming one would mislead)."""
    group = or_around(where, atom)
    return expr_text(group) if group is not None else condition_text(atom)


def or_around(expr: Expr | None, atom: Atom) -> Expr | None:
    """The innermost ``or`` holding ``atom`` (by identity), if any."""
    if expr is None or expr.kind == "atom":
        return None
    for child in expr.children:
        if child.kind == "atom" and child.atom is atom:
            return expr if expr.kind == "or" else None
        inner = or_around(child, atom)
        if inner is not None:
            return inner
        if expr.kind == "or" and _holds_atom(child, atom):
            return expr
    return None


def _holds_atom(expr: Expr, atom: Atom) -> bool:
    return expr.atom is atom if expr.kind == "atom" else any(_holds_atom(c, atom)
                                                             for c in expr.children)


def absence_text(p: Pattern) -> str:
    """A ``none`` pattern in words: ``no plan``, ``no condition_failed where group is ...``."""
    return f"no {p.fact}" + (f" where {expr_text(p.where)}" if p.where else "")


def fact_label(fact_type: str, fields: Mapping[str, Any]) -> str:
    """``point 1``, ``rank 0``, ``rank 0 kvwarm``, ``rank 0 group 1 spec 0``, ``plan``."""
    if fact_type == "point" and "benchmark_id" in fields:
        return f"point {fields['benchmark_id']}"
    if fact_type == "warmup":
        return f"rank {fields.get('rank')} kvwarm"
    if fact_type == "cache_spec":
        spec = fields.get("spec_index")
        return f"rank {fields.get('rank')} group {fields.get('group_index')}" + (
            f" spec {spec}" if isinstance(spec, int) else "")
    if fact_type == "model_section":
        return f"model config {fields.get('section')}"
    keys = [f"{k} {fields[k]}" for k in FACT_KEYS.get(fact_type, ()) if k in fields]
    return " ".join(keys) if fact_type == "rank" else " ".join([fact_type, *keys])
