"""Share one evaluation among points no rule can tell apart.

The engine costs ~100x plain Python per evaluation. A point's verdict depends only on the
outcome of the tests the rules apply to point fields (plus fields rules copy or compare
with other facts), so points with equal outcomes form a class evaluated once.
"""
from __future__ import annotations

from typing import Any

from kvrules.facts.model import Fact, PointRow
from kvrules.policy.compiled import CompiledPolicy
from kvrules.policy.model import Atom
from kvrules.policy.operators import OPERATORS, shape
from kvrules.policy.evaluate import MISSING, eval_atom
from kvrules.facts.jsontypes import canonical


def point_key(cp: CompiledPolicy, fields: dict[str, Any]) -> tuple[Any, ...]:
    """Outcomes of every rule test on the point, plus raw values of compared/copied fields."""
    outcomes = tuple(eval_atom(atom, fields) for atom in cp.point_atoms)
    raw = tuple(canonical(fields[f]) if f in fields else None for f in cp.point_raw_fields)
    return outcomes + raw


_HASHABLE = (str, int, float, bool, type(None))


def _read_values(fields: dict[str, Any], names: tuple[tuple[str, str, bool], ...]
                 ) -> tuple[Any, ...]:
    """The values the rules read, hashable; ``any`` fields keep their type (True vs 1). A
    list or object that only shape operators test (``views`` under ``agree_on``, different
    on nearly every point) stands as its shape, so such points still share one key."""
    out: list[Any] = []
    append = out.append
    get = fields.get
    for name, kind, by_shape in names:
        value = get(name, MISSING)
        if value is MISSING:
            append(value)
            continue
        cls = value.__class__
        if cls is str or cls is int:  # the common case first (no 1 vs True confusion:
            append((cls, value))      # the class is part of the value)
        elif kind == "string_list":
            append(tuple(value))
        elif by_shape and (cls is list or cls is dict):
            append((cls, shape(value)))
        else:
            append((cls, value if cls in _HASHABLE else repr(value)))
    return tuple(out)


def _read_names(cp: CompiledPolicy) -> tuple[tuple[str, str, bool], ...]:
    kinds = cp.fact_types.get("point", {})
    tests: dict[str, list[Atom]] = {}
    for atom in cp.point_atoms:
        tests.setdefault(atom.field, []).append(atom)
    raw = set(cp.point_raw_fields)
    return tuple((n, kinds.get(n, "any"), n not in raw and all(
        OPERATORS[a.op].shape_only for a in tests.get(n, []))) for n in cp.point_read_fields)


def point_classes(cp: CompiledPolicy, rows: list[PointRow], peers: list[PointRow] = []
                  ) -> tuple[list[Fact], dict[int, str]]:
    """One representative fact per class and the class id of every reported benchmark_id.

    ``peers`` (the points' copies on other ranks) join classes too, so the rules check them,
    but decide no reported row. Keys are computed once per distinct combination of the
    values the rules read.
    """
    reps: dict[tuple[Any, ...], Fact] = {}
    class_of: dict[int, str] = {}
    keys: dict[tuple[Any, ...], tuple[Any, ...]] = {}
    names = _read_names(cp)
    for n, row in enumerate(rows + peers):
        values = _read_values(row.fact.fields, names)
        key = keys.get(values)
        if key is None:
            key = keys[values] = point_key(cp, row.fact.fields)
        rep = reps.setdefault(key, row.fact)
        if n < len(rows):
            class_of[row.benchmark_id] = rep.id
    return list(reps.values()), class_of


def projection(cp: CompiledPolicy, facts: list[Fact]) -> str:
    """Canonical text of exactly what the rules read: the key of the cross-cell memo."""
    rows = []
    for fact in facts:
        read = cp.read_fields.get(fact.type, frozenset())
        rows.append([fact.type, fact.id,
                     {k: v for k, v in sorted(fact.fields.items()) if k in read}])
    return canonical(rows)


__all__ = ["point_key", "point_classes", "projection", "MISSING"]
