"""The satisfiability search behind the lint checks is sound: whenever some value passes
every test (under the reference semantics), it says satisfiable. Checked against random
tests and random values, plus the cases the checks rely on."""
from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kvrules.authoring.lint.sat import (conjunctions, field_satisfiable, negate,
                                        satisfiable)
from kvrules.policy.evaluate import eval_atom, eval_expr
from kvrules.policy.model import Atom
from kvrules.policy.parse import Located, parse_where

WORDS = ["a", "b", "skip:", "skip:a", "real_kv", ""]
NUMBERS = [-1, 0, 1, 1.5, 2, 5]
SCALARS = st.sampled_from([None, True, False, *WORDS, *NUMBERS])
VALUES = st.one_of(SCALARS, st.integers(-3, 8), st.floats(-3, 8, allow_nan=False),
                   st.text(alphabet="abkips:", max_size=7),
                   st.lists(st.sampled_from(WORDS), max_size=3), st.just({}),
                   st.just({"k": 1}))


@st.composite
def field_tests(draw: Any) -> Atom:
    op = draw(st.sampled_from(["eq", "in", "lt", "le", "gt", "ge", "exists", "truthy", "is",
                               "starts_with", "contains_any"]))
    operand: Any = {
        "eq": SCALARS, "in": st.lists(SCALARS, min_size=1, max_size=3),
        "lt": st.sampled_from(NUMBERS), "le": st.sampled_from(NUMBERS),
        "gt": st.sampled_from(NUMBERS), "ge": st.sampled_from(NUMBERS),
        "exists": st.just(True), "truthy": st.just(True),
        "is": st.sampled_from(["object", "array", "string", "integer", "number", "boolean",
                               "null"]),
        "starts_with": st.sampled_from(["skip:", "skip:a", "a", "re"]),
        "contains_any": st.lists(st.sampled_from(WORDS[:4]), min_size=1, max_size=2)}[op]
    return Atom("x", op, draw(operand), draw(st.booleans()))


@settings(max_examples=1500, deadline=None)
@given(st.lists(field_tests(), min_size=1, max_size=4), st.lists(VALUES, min_size=1, max_size=6))
def test_a_witness_among_random_values_is_never_missed(atoms: list[Atom],
                                                       values: list[Any]) -> None:
    witnessed = any(all(eval_atom(a, {"x": v}) for a in atoms) for v in values) or all(
        eval_atom(a, {}) for a in atoms)
    if witnessed:
        assert field_satisfiable(atoms)


def _where(data: dict[str, Any]) -> Any:
    return parse_where(data, "/w", Located("f.yaml", {}))


def test_contradictions_the_checks_rely_on() -> None:
    cases = [
        ({"x": "a", "all": [{"x": "b"}]}, "any", False),
        ({"n": {"lt": 1}, "all": [{"n": {"gt": 5}}]}, "any", False),
        ({"n": {"gt": 1}, "all": [{"n": {"lt": 2}}]}, "any", True),
        ({"n": {"gt": 1}, "all": [{"n": {"lt": 2}}]}, "integer", False),
        ({"n": {"exists": False}, "all": [{"n": {"ne": 3}}]}, "any", True),
        ({"s": {"contains": "a"}, "all": [{"s": {"contains_none": ["a", "b"]}}]}, "any",
         False),
        ({"x": {"starts_with": "skip:"}, "all": [{"x": "real"}]}, "any", False),
        ({"any": [{"x": "a"}, {"y": 1}], "all": [{"x": "b"}, {"y": 2}]}, "any", False),
        ({"x": {"is": "object"}, "all": [{"x": {"truthy": True}}]}, "any", True),
    ]
    for where, kind, expected in cases:
        assert satisfiable(_where(where), lambda f: kind) is expected, where


@settings(max_examples=500, deadline=None)
@given(st.lists(field_tests(), min_size=1, max_size=3), VALUES)
def test_negate_is_the_complement(atoms: list[Atom], value: Any) -> None:
    expr = _where({"all": [{"x": {a.op: a.operand}} for a in atoms if a.op not in (
        "eq", "exists", "truthy")] or [{"x": {"exists": True}}]})
    fields = {"x": value}
    assert eval_expr(negate(expr), fields) is (not eval_expr(expr, fields))


def test_oversized_expressions_are_assumed_satisfiable() -> None:
    wide = {"all": [{"any": [{"x": i}, {"y": i}]} for i in range(12)]}
    assert conjunctions(_where(wide)) is None
    assert satisfiable(_where(wide))
