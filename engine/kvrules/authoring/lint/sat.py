"""Can a pattern's conditions hold at all? A small, sound decision procedure.

The lint checks must never report a contradiction that is not one, so satisfiability is
decided by *search for a witness* under the reference semantics
(:func:`kvrules.policy.evaluate.eval_atom`), not by hand-written algebra that could drift
from it. A condition ``x`` is satisfiable when some candidate value of ``x`` passes every
test on ``x``. The candidates cover every distinction the tests can draw: absence, each
JSON type, each literal, values on and around every numeric bound (integers and fractions),
strings on and after every prefix, a fresh string, and lists that pick an element of every
required ``contains`` set outside every forbidden one, plus each operator's own witnesses
(:mod:`kvrules.policy.operators`: list lengths around a bound, agreeing and disagreeing
lists of objects). Tests with ``{ref: ...}`` operands
are dropped (unconstrained), which can only make more things satisfiable: the procedure
may miss a contradiction, never invent one.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Iterable, Sequence

from kvrules.policy.evaluate import eval_atom
from kvrules.policy.operators import MISSING
from kvrules.policy import operators
from kvrules.policy.model import Atom, Expr, Ref

DNF_LIMIT = 512
"""Expressions whose disjunctive normal form is larger are assumed satisfiable."""
FRESH = "\x01fresh"
"""A string no rule literal equals or starts with (rule literals are printable)."""
KINDS = {"string": (str,), "integer": (int,), "boolean": (bool,), "string_list": (list,)}

KindOf = Callable[[str], str]
"""Declared type of a field (``any`` when unknown)."""


def conjunctions(expr: Expr | None, limit: int = DNF_LIMIT) -> list[list[Atom]] | None:
    """The expression as a disjunction of conjunctions of atoms; None when too large."""
    if expr is None:
        return [[]]
    if expr.kind == "atom":
        return [[expr.atom]] if expr.atom else [[]]
    parts = [conjunctions(c, limit) for c in expr.children]
    if any(p is None for p in parts):
        return None
    if expr.kind == "or":
        out = [conj for p in parts for conj in p or []]
        return out if len(out) <= limit else None
    result: list[list[Atom]] = [[]]
    for p in parts:
        result = [a + b for a in result for b in p or []]
        if len(result) > limit:
            return None
    return result


def negate(expr: Expr | None) -> Expr:
    """The negation, pushed down to atoms (De Morgan), as the parser does for ``not``."""
    if expr is None:
        return Expr("or", ())  # not(true): an empty disjunction is false
    if expr.kind == "atom":
        assert expr.atom is not None
        a = expr.atom
        return Expr("atom", atom=Atom(a.field, a.op, a.operand, not a.negated, a.pointer,
                                      a.loc))
    return Expr("or" if expr.kind == "and" else "and", tuple(negate(c) for c in expr.children))


def conjoin(*exprs: Expr | None) -> Expr:
    """``and`` of the given expressions (None is true)."""
    return Expr("and", tuple(e for e in exprs if e is not None))


def satisfiable(expr: Expr | None, kind_of: KindOf = lambda f: "any") -> bool:
    """False only when no fact can satisfy the expression."""
    dnf = conjunctions(expr)
    if dnf is None:
        return True
    return any(conjunction_satisfiable(conj, kind_of) for conj in dnf)


def conjunction_satisfiable(atoms: Sequence[Atom], kind_of: KindOf = lambda f: "any") -> bool:
    """Every field's tests can hold together (fields are independent)."""
    return unsatisfiable_field(atoms, kind_of) is None


def unsatisfiable_field(atoms: Sequence[Atom], kind_of: KindOf = lambda f: "any") -> str | None:
    """The first field (in source order) whose tests cannot all hold, else None."""
    by_field: dict[str, list[Atom]] = {}
    for atom in atoms:
        if not isinstance(atom.operand, Ref):
            by_field.setdefault(atom.field, []).append(atom)
    for name, tests in by_field.items():
        if not field_satisfiable(tests, kind_of(name)):
            return name
    return None


def field_satisfiable(tests: Sequence[Atom], kind: str = "any") -> bool:
    """Some candidate value (or absence) of one field passes every test."""
    for value in candidates(tests, kind):
        fields = {} if value is MISSING else {tests[0].field: value}
        if all(eval_atom(t, fields) for t in tests):
            return True
    return False


def candidates(tests: Sequence[Atom], kind: str = "any") -> Iterable[Any]:
    """Values that realise every combination of outcomes the tests can distinguish."""
    literals = [v for t in tests for v in _operand_values(t)]
    pool: list[Any] = [MISSING, None, True, False, {}, {FRESH: 1}, [], "", FRESH]
    pool += literals
    pool += _numbers([v for v in literals if _is_number(v)])
    pool += _strings([t.operand for t in tests if t.op == "starts_with"])
    pool += _lists(tests)
    pool += [w for t in tests if not isinstance(t.operand, Ref)
             for w in operators.witnesses(t.op, t.operand)]
    allowed = KINDS.get(kind)
    for value in pool:
        if value is MISSING or allowed is None or _fits(value, kind):
            yield value


def _fits(value: Any, kind: str) -> bool:
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "string_list":
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    return isinstance(value, KINDS[kind])


def _operand_values(test: Atom) -> list[Any]:
    if test.op == "in" or test.op == "contains_any":
        return list(test.operand)
    if test.op in ("eq", "lt", "le", "gt", "ge"):
        return [test.operand]
    return []


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _numbers(bounds: list[Any]) -> list[Any]:
    """Each bound, its neighbours, integers around it and midpoints between bounds."""
    out: set[Any] = {0, 1, -1, 0.5}
    for b in bounds:
        out |= {b, b - 0.5, b + 0.5, b - 1, b + 1, math.floor(b), math.ceil(b),
                math.floor(b) - 1, math.ceil(b) + 1}
    ordered = sorted(set(bounds))
    out |= {(a + b) / 2 for a, b in zip(ordered, ordered[1:])}
    ints = {int(v) for v in out if float(v).is_integer()}
    return sorted(out | ints | {float(v) for v in ints}, key=lambda v: (v, type(v).__name__))


def _strings(prefixes: list[Any]) -> list[str]:
    return [s for p in prefixes if isinstance(p, str) for s in (p, p + "\x00", p + FRESH)]


def _lists(tests: Sequence[Atom]) -> list[list[str]]:
    """Lists for ``contains_any``: singletons, all items, and one pick per required set."""
    required = [t.operand for t in tests if t.op == "contains_any" and not t.negated]
    forbidden = {x for t in tests if t.op == "contains_any" and t.negated for x in t.operand}
    items = [x for t in tests if t.op == "contains_any" for x in t.operand]
    out = [[x] for x in items] + [items, [FRESH]]
    pick = [next((x for x in s if x not in forbidden), None) for s in required]
    if all(p is not None for p in pick):
        chosen = [p for p in pick if p is not None]
        out += [chosen, chosen + [FRESH]]
    return out
