"""The operator registry: one home for what each condition operator means.

An operator declares its spellings (``ne`` is ``eq`` negated, ``contains_none`` is
``contains_any`` negated, ...), the shape its literal operand must have, how it types
against a field's declared type, its reference semantics in Python and the witness values
the satisfiability lint searches. Parsing, the compiler's type checks, the reference
evaluator and the lints read this table; the engine lowering of every operator lives in the
backend (``kvrules.backend.durable.lower.LOWERINGS``), keyed by the names used here.

Adding an operator is an entry here, an entry in the backend's table, and their tests.
"""
from __future__ import annotations

from dataclasses import dataclass

import math
from typing import Any, Callable, Mapping, Sequence

from kvrules.facts.jsontypes import canonical, json_type, value_type

MISSING: Any = object()
"""An absent field (or an absent referenced field)."""

JSON_KINDS = ("object", "array", "string", "integer", "number", "boolean", "null")
IS_KINDS = JSON_KINDS + ("absent",)
COMPARISONS = ("eq", "ne", "lt", "le", "gt", "ge")
SCALARS = (str, int, float, bool, type(None))
FRESH = "\x01fresh"
"""A string no rule literal equals or starts with (rule literals are printable)."""


@dataclass(frozen=True)
class Spelling:
    """How a rule file writes an operator: the canonical name it reduces to, whether the
    test is negated, and how the written operand becomes the canonical one."""

    op: str
    negate: Callable[[Any], bool] = lambda operand: False
    operand: Callable[[Any], Any] = lambda operand: operand


Holds = Callable[[Any, Any], bool]
"""Reference semantics: ``holds(value, operand)``; either may be MISSING (absent)."""


@dataclass(frozen=True)
class Operator:
    """One canonical operator and everything the policy layer needs to know about it."""

    name: str
    spellings: Mapping[str, Spelling]
    holds: Holds
    operand_problem: Callable[[Any], str | None] = lambda operand: None
    field_kinds: tuple[str, ...] | None = None
    """Declared field types it applies to (None: every type)."""
    literal_typed: bool = False
    """Literal operands must fit the field's declared type (equality, membership)."""
    ref: str = "no"
    """Operand ``{ref: ...}``: ``no``, ``allowed`` or ``required``."""
    negatable: bool = True
    negatable_with_ref: bool = True
    orders: bool = False
    """Compares numbers (a ref on each side must be integer or any)."""
    witnesses: Callable[[Any], list[Any]] = lambda operand: []
    """Values that realise both outcomes of the test (the satisfiability lint's candidates)."""
    content_values: Callable[[Any], list[Any]] = lambda operand: []
    """Literals compared with the field by value (the engine's per-field constant limit)."""
    describe: str = ""
    holds_ref: Holds | None = None
    """Semantics against a ``{ref: ...}`` operand when they differ from ``holds``."""
    shape_only: bool = False
    """On a list or object the outcome depends only on :func:`shape` of the value (its type,
    length and which keys its items disagree on), not on the content."""


# --- reference semantics helpers -------------------------------------------------------

def is_number(v: Any) -> bool:
    """Numbers the engine can compare: integers beyond int64 only compare by content."""
    return value_type(v) in ("integer", "number")


_PLAIN = (str, bool, type(None))
"""Types whose Python equality is exactly JSON equality (the fast path of the tests)."""
_PLAIN_OR_INT = _PLAIN + (int,)
_PLAIN_CLASSES = frozenset(_PLAIN_OR_INT)


def equal(a: Any, b: Any) -> bool:
    """Strict equality with a literal: same JSON type (numbers as numbers), same content."""
    if a.__class__ is b.__class__ and a.__class__ in _PLAIN:
        return bool(a == b)
    if is_number(a) and is_number(b):
        return bool(a == b)
    return json_type(a) == json_type(b) and canonical(a) == canonical(b)


def equal_ref(a: Any, b: Any) -> bool:
    """Equality with another fact's field: same JSON type tag and same content."""
    if a.__class__ is b.__class__ and (a.__class__ in _PLAIN or a.__class__ is int):
        return bool(a == b)
    return json_type(a) == json_type(b) and canonical(a) == canonical(b)


def compare(op: str, a: Any, b: Any) -> bool:
    if not (is_number(a) and is_number(b)):
        return False
    return bool({"eq": a == b, "ne": a != b, "lt": a < b, "le": a <= b, "gt": a > b,
                 "ge": a >= b}[op])


def _ordered(op: str) -> Holds:
    return lambda v, o: compare(op, v, o)


def _present(test: Holds) -> Holds:
    """An absent field (or absent referenced field) fails the positive test."""
    return lambda v, o: v is not MISSING and o is not MISSING and test(v, o)


def _eq(v: Any, o: Any) -> bool:
    return equal(v, o)


def _is(v: Any, o: Any) -> bool:
    if v is MISSING:
        return bool(o == "absent")
    kind = value_type(v)
    return kind == o or (o == "number" and kind == "integer")


def _same(v: Any, o: Any) -> bool:
    """Absent equals absent; otherwise strict typed equality by content."""
    if v is MISSING or o is MISSING:
        return v is MISSING and o is MISSING
    return equal_ref(v, o)


def _length(v: Any, o: Any) -> bool:
    (cmp, n), = o.items()
    return isinstance(v, list) and compare(cmp, len(v), n)


def _agree(v: Any, keys: Sequence[str]) -> bool:
    """Every item of the list is an object and they all hold the same value (or all lack
    the key) for each of ``keys``."""
    if not isinstance(v, list) or not all(isinstance(i, dict) for i in v):
        return False
    if len(v) < 2:
        return True
    for key in keys:
        seen = [i.get(key, MISSING) for i in v]
        if any(not _same(seen[0], s) for s in seen[1:]):
            return False
    return True


# --- operand shape checks -------------------------------------------------------------

def _in_problem(o: Any) -> str | None:
    return None if isinstance(o, list) else f"in needs a list of values, not {json_type(o)} {o!r}"


def _strings_problem(o: Any) -> str | None:
    if not isinstance(o, list):
        return f"contains_any needs a list of strings, not {json_type(o)} {o!r}"
    bad = [v for v in o if not isinstance(v, str)]
    return f"contains needs strings; {json_type(bad[0])} {bad[0]!r} is not one" if bad else None


def _order_problem(op: str) -> Callable[[Any], str | None]:
    def problem(o: Any) -> str | None:
        if isinstance(o, bool) or not isinstance(o, SCALARS):
            return f"{op} needs a single value, not {json_type(o)} {o!r}"
        return None
    return problem


def _prefix_problem(o: Any) -> str | None:
    return None if isinstance(o, str) else f"starts_with needs a string, not {json_type(o)} {o!r}"


def _is_problem(o: Any) -> str | None:
    return None if o in IS_KINDS else f"is needs one of {', '.join(IS_KINDS)}, not {o!r}"


def _length_problem(o: Any) -> str | None:
    if not (isinstance(o, dict) and len(o) == 1):
        return f"length needs one comparison such as {{gt: 0}}, not {o!r}"
    (cmp, n), = o.items()
    if cmp not in COMPARISONS or isinstance(n, bool) or not isinstance(n, int):
        return f"length needs {{eq|ne|lt|le|gt|ge: <integer>}}, not {o!r}"
    return None


def _keys_problem(o: Any) -> str | None:
    if not isinstance(o, list) or not o or not all(isinstance(k, str) for k in o):
        return f"agree_on needs a non-empty list of field names, not {o!r}"
    return None


def _ref_only_problem(o: Any) -> str | None:
    return f"needs {{ref: alias.field}}, not {json_type(o)} {o!r}"


# --- witnesses (candidates for the satisfiability lint) --------------------------------

def _numbers(bounds: list[Any]) -> list[Any]:
    """Each bound, its neighbours and integers around it."""
    out: set[Any] = set()
    for b in bounds:
        if isinstance(b, (int, float)) and not isinstance(b, bool) and math.isfinite(b):
            out |= {b, b - 0.5, b + 0.5, b - 1, b + 1, math.floor(b), math.ceil(b)}
    return sorted(out, key=lambda v: (v, type(v).__name__))


def _length_witnesses(o: Any) -> list[Any]:
    (_, n), = o.items()
    return [[FRESH] * k for k in range(max(0, n - 1), n + 2)]


def _agree_witnesses(keys: Any) -> list[Any]:
    same = [{k: 1 for k in keys}, {k: 1 for k in keys}]
    return [same, [same[0], {}], [1]]


def _listed(o: Any) -> list[Any]:
    return list(o)


# --- the registry -----------------------------------------------------------------------

def _flag(operand: Any) -> bool:
    """``{exists: false}`` / ``{truthy: false}`` / ``{empty: false}``: the negated test."""
    return operand is False


OPERATORS: dict[str, Operator] = {op.name: op for op in (
    Operator("eq", {"eq": Spelling("eq"), "ne": Spelling("eq", lambda o: True)},
             _present(_eq), literal_typed=True, ref="allowed",
             holds_ref=_present(equal_ref),
             witnesses=lambda o: [o], content_values=lambda o: [o],
             describe="equal (same JSON type and content)"),
    Operator("in", {"in": Spelling("in"), "not_in": Spelling("in", lambda o: True)},
             _present(lambda v, o: any(equal(v, x) for x in o)), _in_problem,
             literal_typed=True, witnesses=_listed, content_values=_listed,
             describe="equal to one of the listed values"),
    *(Operator(c, {c: Spelling(c)}, _present(_ordered(c)),
               _order_problem(c), field_kinds=("integer", "any"), ref="allowed",
               negatable_with_ref=False, orders=True, witnesses=lambda o: _numbers([o]),
               describe="numeric comparison") for c in ("lt", "le", "gt", "ge")),
    Operator("exists", {"exists": Spelling("exists", _flag, lambda o: True)},
             lambda v, o: v is not MISSING, shape_only=True,
             describe="the key is present (null included)"),
    Operator("truthy", {"truthy": Spelling("truthy", _flag, lambda o: True)},
             _present(lambda v, o: bool(v)), shape_only=True, describe="Python/JSON truthiness"),
    Operator("is", {"is": Spelling("is")}, _is, _is_problem,
             shape_only=True, describe="JSON type of the value, or absent"),
    Operator("starts_with", {"starts_with": Spelling("starts_with")},
             _present(lambda v, o: isinstance(v, str) and v.startswith(o)), _prefix_problem,
             negatable=False,
             witnesses=lambda o: [o, o + "\x00", o + FRESH] if isinstance(o, str) else [],
             describe="a string with this prefix"),
    Operator("contains_any", {"contains": Spelling("contains_any", operand=lambda o: [o]),
                              "contains_any": Spelling("contains_any"),
                              "contains_none": Spelling("contains_any", lambda o: True)},
             _present(lambda v, o: isinstance(v, list) and any(x in v for x in o)),
             _strings_problem, field_kinds=("string_list",),
             describe="a list holding at least one of the strings"),
    Operator("length", {"length": Spelling("length"),
                        "empty": Spelling("length", lambda o: o is False,
                                          lambda o: {"eq": 0})},
             _present(_length), _length_problem, witnesses=_length_witnesses,
             shape_only=True, describe="a list whose number of items compares so"),
    Operator("same_as", {"same_as": Spelling("same_as"),
                         "differs_from": Spelling("same_as", lambda o: True)},
             _same, _ref_only_problem, ref="required",
             describe="equal to another fact's field, absent counting as equal to absent"),
    Operator("agree_on", {"agree_on": Spelling("agree_on")}, _present(_agree), _keys_problem,
             witnesses=_agree_witnesses,
             shape_only=True,
             describe="a list of objects that all hold the same value for each key"),
)}
"""Every canonical operator, by name."""

SPELLINGS: dict[str, tuple[str, Spelling]] = {
    written: (op.name, s) for op in OPERATORS.values() for written, s in op.spellings.items()}
"""Every operator a rule file may write, to its canonical operator."""


def shape(value: Any) -> tuple[Any, ...]:
    """What shape-only operators see of a list or object: its type, its length, and for a
    list of objects the keys on which its items disagree."""
    if value.__class__ is list and 0 < len(value) < 3 and value[0].__class__ is dict \
            and value[-1] is value[0]:  # one object, or one object twice (a point's views)
        return ("array", len(value), ())
    if isinstance(value, dict):
        return ("object", len(value))
    if not all(isinstance(i, dict) for i in value):
        return ("array", len(value), None)
    if len(value) < 2:
        return ("array", len(value), ())
    if len(value) == 2 and _plainly_equal(value[0], value[1]):
        return ("array", 2, ())
    first, rest = value[0], value[1:]
    differ = []
    for key in sorted({k for i in value for k in i}):
        a = first.get(key, MISSING)
        for item in rest:
            b = item.get(key, MISSING)
            if a is b or (a.__class__ is b.__class__ and a.__class__ in _PLAIN_OR_INT
                          and a == b):
                continue
            if not _same(a, b):
                differ.append(key)
                break
    return ("array", len(value), tuple(differ))


def _plainly_equal(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """True when two objects hold the same keys in the same order with equal values of the
    same plain classes: then no key differs (the common case of a point's copy on another
    rank), decided without the per-key walk."""
    if list(a) != list(b) or a != b:
        return False
    classes = tuple(map(type, a.values()))
    return classes == tuple(map(type, b.values())) and _PLAIN_CLASSES.issuperset(classes)


def canonical_test(written: str, operand: Any) -> tuple[str, Any, bool]:
    """A written operator and operand as (canonical op, canonical operand, negate?)."""
    name, spelling = SPELLINGS[written]
    return name, spelling.operand(operand), spelling.negate(operand)


def holds(op: str, value: Any, operand: Any, is_ref: bool = False) -> bool:
    """The positive test of ``op`` (before negation) under the reference semantics."""
    spec = OPERATORS[op]
    test = spec.holds_ref if is_ref and spec.holds_ref is not None else spec.holds
    return test(value, operand)


def operand_problem(op: str, operand: Any, is_ref: bool) -> str | None:
    """Why a written operand cannot be lowered or evaluated (None when it fits)."""
    spec = OPERATORS[op]
    if is_ref:
        return None if spec.ref != "no" else f"{op} cannot compare with a {{ref: ...}}"
    if spec.ref == "required":
        return f"{op} {_ref_only_problem(operand)}"
    return spec.operand_problem(operand)


def type_problem(op: str, field_name: str, kind: str, operand: Any, is_ref: bool) -> str | None:
    """Why the test does not fit the field's declared type (None when it does)."""
    spec = OPERATORS[op]
    if kind == "string_list" and op not in ("contains_any", "exists", "is", "length",
                                           "same_as"):
        return f"'{field_name}' is a string_list: use contains, contains_any or contains_none"
    if spec.field_kinds is not None and kind not in spec.field_kinds:
        if op == "contains_any":
            return f"{op} needs a string_list field; '{field_name}' is {kind}"
        if spec.orders and not is_ref:
            return f"{op} compares numbers; '{field_name}' is {kind}"
        if not spec.orders:
            return f"{op} needs a {' or '.join(spec.field_kinds)} field; '{field_name}' is {kind}"
    if spec.literal_typed and not is_ref and kind != "any":
        for v in operand if op == "in" else [operand]:
            lit = json_type(v)
            if lit != kind and not (kind == "integer" and lit == "number"):
                return f"'{field_name}' is {kind} but is compared with {lit} {v!r}"
    return None


def negation_problem(op: str, is_ref: bool) -> bool:
    """True when the negated test cannot be lowered."""
    spec = OPERATORS[op]
    return not spec.negatable or (is_ref and not spec.negatable_with_ref)


def witnesses(op: str, operand: Any) -> list[Any]:
    """Candidate values that realise the test's outcomes (for the satisfiability lint)."""
    return OPERATORS[op].witnesses(operand)


__all__ = ["MISSING", "OPERATORS", "SPELLINGS", "Operator", "Spelling", "canonical_test", "shape",
           "holds", "operand_problem", "type_problem", "negation_problem", "witnesses"]
