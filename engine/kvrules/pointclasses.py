"""Share one evaluation among points no rule can tell apart.

The engine costs ~100x plain Python per evaluation. A point's verdict depends only on the
outcome of the tests the rules apply to point fields (plus fields rules copy or compare
with other facts), so points with equal outcomes form a class evaluated once.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from itertools import chain
from operator import itemgetter
from typing import Any, Callable

from kvrules.facts.model import Fact
from kvrules.facts.points import PointTable
from kvrules.policy.compiled import CompiledPolicy, per_policy
from kvrules.policy.model import Atom
from kvrules.policy.operators import OPERATORS, shape
from kvrules.policy.evaluate import MISSING, eval_atom, value_test
from kvrules.facts.jsontypes import canonical, encode


def point_key(cp: CompiledPolicy, fields: dict[str, Any]) -> tuple[Any, ...]:
    """Outcomes of every rule test on the point, plus raw values of compared/copied fields."""
    outcomes = tuple(eval_atom(atom, fields) for atom in cp.point_atoms)
    raw = tuple(canonical(fields[f]) if f in fields else None for f in cp.point_raw_fields)
    return outcomes + raw


_HASHABLE = (str, int, float, bool, type(None))
_DISTINCT = frozenset({str, int, type(None), type(MISSING)})
"""Classes no two of which hold equal values: a column of only these keys by its values."""


def _read_value(value: Any, kind: str, by_shape: bool) -> Any:
    """The value the rules read, hashable; ``any`` fields keep their type (True vs 1). A
    list or object that only shape operators test (``views`` under ``agree_on``, different
    on nearly every point) stands as its shape, so such points still share one key."""
    if value is MISSING:
        return value
    cls = value.__class__
    if cls is str or cls is int:  # the class is part of the value: no 1 vs True confusion
        return (cls, value)
    if kind == "string_list" and cls is list:
        return tuple(value)
    if by_shape and (cls is list or cls is dict):
        return (cls, shape(value))
    return (cls, value if cls in _HASHABLE else repr(value))


def _read_column(values: list[Any], kind: str, by_shape: bool) -> list[Any]:
    """:func:`_read_value` of a whole column, or an equivalent key per value computed in
    bulk: copies get equal keys exactly when their read values are equal."""
    classes = set(map(type, values))
    if classes <= _DISTINCT:
        return values
    if classes == {list}:
        if kind == "string_list":
            return list(map(tuple, values))
        if by_shape:
            return list(map(shape, values))
        if set(map(type, chain.from_iterable(values))) <= _DISTINCT:
            return list(map(tuple, values))  # equal tuples: equal items of equal classes
        return [(list, text) for text in map(repr, values)]
    return [_read_value(v, kind, by_shape) for v in values]


@dataclass(frozen=True)
class _Read:
    """How the rules read one point field: its declared kind, whether only its shape
    matters, the tests on it (and each as a function of the field's value), and whether
    its raw value is copied or compared (a ref)."""

    name: str
    kind: str
    by_shape: bool
    atoms: tuple[Atom, ...]
    raw: bool
    tests: tuple[Callable[[Any], bool], ...] = field(default=(), compare=False, repr=False)


@per_policy
def _reads(cp: CompiledPolicy) -> tuple[_Read, ...]:
    """How the rules read each point field of ``cp`` (the same for every cell)."""
    kinds = cp.fact_types.get("point", {})
    tests: dict[str, list[Atom]] = {}
    for atom in cp.point_atoms:
        tests.setdefault(atom.field, []).append(atom)
    raw = set(cp.point_raw_fields)
    return tuple(_Read(n, kinds.get(n, "any"), n not in raw and all(
        OPERATORS[a.op].shape_only for a in tests.get(n, [])), tuple(tests.get(n, [])),
        n in raw, tuple(map(value_test, tests.get(n, [])))) for n in cp.point_read_fields)


def _column_keys(table: PointTable, read: _Read) -> list[Any]:
    """A key per copy for one field: its raw read value where the rules copy or compare it,
    else the outcomes of the rules' tests on it (each test reads its own field only), found
    once per distinct read value."""
    shaped = _views_by_shape(table) if read.name == "views" and read.by_shape else None
    if shaped is not None:
        kinds, examples = shaped
        outcomes = [_outcomes(read, value) for value in examples]
        return list(map(outcomes.__getitem__, kinds))
    values = table.column(read.name, MISSING)
    keys = _read_column(values, read.kind, read.by_shape)
    if read.raw:
        return keys
    if keys and _constant(keys):  # the usual column: one value on every copy
        return [_outcomes(read, values[0])] * len(keys)
    distinct = dict(zip(keys, values))  # a value of each key (its last copy's)
    found = dict(zip(distinct, _outcomes_of(read, list(distinct.values()))))
    return list(map(found.__getitem__, keys))


def _outcomes(read: _Read, value: Any) -> tuple[Any, ...]:
    """The outcome of each of the rules' tests on one value of the field."""
    return tuple(test(value) for test in read.tests)


def _outcomes_of(read: _Read, values: list[Any]) -> list[tuple[Any, ...]]:
    """:func:`_outcomes` of every value, test by test over all of them (in C, but for the
    tests themselves)."""
    if not read.tests:
        return [()] * len(values)
    return list(zip(*[list(map(test, values)) for test in read.tests]))


def _constant(keys: list[Any]) -> bool:
    """Every key equal to the first (as a dict would find them: by equality), in C."""
    return not keys or keys.count(keys[0]) == len(keys)


def _views_by_shape(table: PointTable) -> tuple[list[int], list[Any]] | None:
    """For every copy the number of its ``views``' shape, and a ``views`` of each shape in
    that order, building a view only for copies that disagree with their row: a row's views
    is its one view, an agreeing copy's is its row's view twice (None: read the column, see
    :meth:`PointTable.views_agreeing`). Numbers, not shapes, key the copies: the column is
    looked up per copy, and a number hashes for free."""
    agreeing = table.views_agreeing()
    if agreeing is None or not table.n_rows:
        return None
    first = table.view(0)
    one, twice = [first], [first, first]
    examples: list[Any] = [one, twice]
    numbers = {shape(one): 0}
    kinds = [0] * table.n_rows + [numbers.setdefault(shape(twice), 1)] * len(agreeing)
    for n, agrees in enumerate(agreeing):
        if not agrees:
            i = table.n_rows + n
            views = [table.view(table.row_of(i)), table.view(i)]
            kind = numbers.setdefault(shape(views), len(examples))
            if kind == len(examples):
                examples.append(views)
            kinds[i] = kind
    return kinds, examples


def point_classes(cp: CompiledPolicy, table: PointTable) -> tuple[list[Fact], dict[int, str]]:
    """One representative fact per class and the class id of every reported benchmark_id.

    Every copy of a point joins a class (the copies on other ranks too, so the rules check
    them, but they decide no reported row). Keys are built column by column; the whole key
    is computed once per distinct combination of field keys, on the fact of the first copy
    holding it, which also represents its class.
    """
    columns = [_column_keys(table, read) for read in _reads(cp)]
    varying = [column for column in columns if not _constant(column)]  # (a column the
    if varying:  # same on every copy tells no two copies apart)
        combos = list(zip(*varying))  # (the last write of a key wins: copies backwards)
        last = dict(zip(reversed(combos), reversed(range(len(combos)))))
        first = dict(sorted(last.items(), key=itemgetter(1)))  # in order of first copies
    else:  # one class (most cells)
        combos = [()] * len(table)
        first = {(): 0} if combos else {}
    reps: dict[tuple[Any, ...], Fact] = {}
    class_id: dict[tuple[Any, ...], str] = {}
    for combo, n in first.items():
        fact = table.fact(n)
        class_id[combo] = reps.setdefault(point_key(cp, fact.fields), fact).id
    bids = table.column("benchmark_id")[:table.n_rows]
    class_of = dict(zip(bids, map(class_id.__getitem__, combos)))
    return list(reps.values()), class_of


def _projected(cp: CompiledPolicy, facts: list[Fact]) -> list[list[Any]]:
    """Exactly what the rules read: each fact's type, id and read fields."""
    rows = []
    for fact in facts:
        read = cp.read_fields.get(fact.type, frozenset())
        rows.append([fact.type, fact.id, {k: v for k, v in fact.fields.items() if k in read}])
    return rows


def projection(cp: CompiledPolicy, facts: list[Fact]) -> str:
    """Canonical text of exactly what the rules read."""
    return canonical(_projected(cp, facts))


def projection_key(cp: CompiledPolicy, facts: list[Fact]) -> bytes:
    """The key of the cross-cell memo: a sha256 of what the rules read, as the report's
    encoder writes it with sorted keys (a cell's text is kilobytes, and the memo keeps
    hundreds of keys). Only cells bound for the engine are keyed: their values are finite
    (see ``pipeline.value_problems``), so no NaN is written as ``null``."""
    return hashlib.sha256(encode(_projected(cp, facts), sort_keys=True)).digest()


__all__ = ["point_key", "point_classes", "projection", "projection_key", "MISSING"]
