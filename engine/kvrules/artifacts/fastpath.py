"""A hand-written check of rank ``results`` items: the hot loop of the whole artifact stage.

A benchmark corpus holds ~200k results; fastjsonschema spends about as long on them as
``json.load`` spends decoding them, which alone would eat the 2x time budget. This loop is a
*sound under-approximation* of ``$defs/result`` in ``rank.schema.json``: when it returns
the items' columns they are valid under the schema; when it returns None nothing is
concluded and the reference validator decides (and produces the precise error). Integers
are exact JSON integers (``type(x) is int``: not ``1.0``, not ``true``), as in the strict
reference validator of :mod:`.validate`. Keep it in step with the schema; the hypothesis
test ``test_results_fast_path_is_sound`` guards that.
"""
from __future__ import annotations

from typing import Any

from kvrules.artifacts.model import ABSENT, Absent, ResultColumns

_POINT_TYPES = frozenset({"prefill", "decode"})
_INTS = {int}
_STRINGS = {str}
_REGIMES = {str, type(None), Absent}
_POSITIVE = (0.0).__lt__
"""``0.0 < x`` for a float or an int of any size (False for NaN)."""


def results_ok(results: Any) -> bool:
    """True only if every item satisfies ``$defs/result`` (False means "ask the schema")."""
    return result_columns(results) is not None


def result_columns(results: Any) -> ResultColumns | None:
    """The columns of ``results`` when every item satisfies ``$defs/result``; None means
    "ask the schema".

    Field by field over the whole list: a column of values is gathered by one
    comprehension and its classes compared as a set, so the loop runs in C. The columns
    the later checks read again are kept (:class:`ResultColumns`).
    """
    if type(results) is not list:
        return None
    if not results:
        return ResultColumns([], [], [], [], [], [], [], [])
    if set(map(type, results)) != {dict}:
        return None
    try:  # a required field missing: the schema says which
        return _result_columns(results)
    except KeyError:
        return None


def _result_columns(results: list[dict[str, Any]]) -> ResultColumns | None:
    """:func:`result_columns` of a non-empty list of objects (KeyError: a required field
    is missing; required fields are read by subscript, the cheapest read in CPython)."""
    points = _points_ok([result["point"] for result in results])
    if points is None:
        return None
    regimes = [result.get("kv_seed_regime", ABSENT) for result in results]
    if not set(map(type, regimes)) <= _REGIMES or "" in regimes:
        return None  # (absent and null are both allowed)
    fpms = [result["fpms"] for result in results]
    if set(map(type, fpms)) != {list} or set(map(len, fpms)) != {1}:
        return None
    fpm = [f[0] for f in fpms]
    if set(map(type, fpm)) != {dict}:
        return None
    if set(map(type, [f.get("counter_id", 0) for f in fpm])) != _INTS or \
            set(map(type, [f.get("dp_rank", 0) for f in fpm])) != _INTS:
        return None
    walls = [f["wall_time"] for f in fpm]
    if not set(map(type, walls)) <= {float, int} or not all(map(_POSITIVE, walls)):
        return None
    kinds, ids, batches, prefills, kv_reads, reasons = points
    return ResultColumns(one_per_value(kinds), ids, walls, batches, prefills, kv_reads,
                         one_per_value(regimes), one_per_list(reasons))


def one_per_value(column: list[Any], instead: dict[Any, Any] | None = None) -> list[Any]:
    """``column`` with each distinct value one object (a decoder makes a new string per
    occurrence): a worker then pickles a point type or native regime once per cell, not
    once per point, and the parent unpickles references (pickle's memo goes by identity).
    Only for columns of strings, None and the absent marker, which no two classes share an
    equal value of (``1 == 1.0 == True`` would merge). ``instead``: values written as
    others on the way (another decoder's mark of an absent field as :data:`ABSENT`)."""
    one = dict(zip(column, column))
    for value, other in (instead or {}).items():
        if value in one:
            one[value] = other
    return list(map(one.__getitem__, column))


def one_per_list(column: list[list[str] | None]) -> list[list[str] | None]:
    """``column`` of string lists (or None) with equal lists one object, for the same
    reason as :func:`one_per_value` (a point's facts read them, never change them)."""
    one: dict[tuple[str, ...], list[str]] = {}
    return [None if listed is None else one.setdefault(tuple(listed), listed)
            for listed in column]


def _points_ok(points: list[Any]) -> tuple[list[Any], ...] | None:
    """``$defs/point`` for a whole column of points: exact types (``int`` is not ``bool``);
    the columns of point types, benchmark ids, batch sizes, prefill and KV read tokens and
    sample reasons (None where absent) when it holds, else None (KeyError: a required field
    is missing)."""
    if set(map(type, points)) != {dict}:
        return None
    kinds = [p["point_type"] for p in points]
    if set(map(type, kinds)) != _STRINGS or not set(kinds) <= _POINT_TYPES:
        return None
    numbers: list[list[Any]] = []
    for name, least in (("benchmark_id", 1), ("batch_size", 0), ("total_prefill_tokens", 0),
                        ("total_kv_read_tokens", 0)):
        column = [p[name] for p in points]
        if set(map(type, column)) != _INTS or min(column) < least:
            return None
        numbers.append(column)
    reasons = [p.get("sample_reasons") for p in points]
    if not set(map(type, reasons)) <= {list, type(None)}:
        return None
    if not set(map(type, [reason for listed in reasons if listed for reason in listed])
               ) <= _STRINGS:
        return None
    return (kinds, *numbers, reasons)
