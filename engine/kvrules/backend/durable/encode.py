"""Strict typing on a loosely typed engine.

durable-rules compares loosely (``true == 1``, ``4 == "4"``, ``"abc" > 0``). Every value
is therefore tagged by JSON type before it reaches the engine, and every field gets a
companion ``<field>__t`` naming its JSON type. Compiled conditions test tags and
companions, so a boolean can never equal a number and a string never compares as one.
Lists of strings get a sentinel first element so "contains none" holds on empty lists.
"""
from __future__ import annotations

import hashlib
import json
import math
from typing import Any

from kvrules.facts.jsontypes import INT64_MAX, canonical, value_type

DISCRIMINATOR = "fact_"
JOIN_ID = "fid"
"""The field joins on a fact's id read (the same tagged value as ``id``). durable-rules
copies each stored fact's JSON text but leaves its ``id`` and ``sid`` pointing into the
caller's text (``copyMessage`` in its ``state.c``); a join on ``id`` would read that text
after Python freed it. Any other field points into the engine's own copy."""
TYPE_SUFFIX = "__t"
LIST_SENTINEL = "z:"


def companion(field: str) -> str:
    return field + TYPE_SUFFIX


def encode_scalar(value: Any) -> Any:
    """The engine form of one JSON value (numbers stay numbers, all else is tagged text)."""
    if value is None:
        return "n:"
    if isinstance(value, bool):
        return "b:true" if value else "b:false"
    if isinstance(value, int):
        return value if -INT64_MAX <= value <= INT64_MAX else "j:" + str(value)
    if isinstance(value, float):
        return value
    if isinstance(value, str):
        return "s:" + value
    return encode_container(value)


MAX_CONTAINER_TEXT = 2048
"""Containers whose canonical text is longer reach the engine as a digest of it."""


def encode_container(value: Any) -> str:
    """A list or object as bounded ASCII text that is equal exactly when the contents are:
    its canonical JSON (non-finite markers as their token), or a digest of it when long.
    Only ``eq``/``in``/refs read the content; type, length and agreement are companions."""
    text = canonical(value, ascii=True)
    if len(text) <= MAX_CONTAINER_TEXT:
        return "j:" + text
    return "h:" + hashlib.sha256(text.encode("ascii")).hexdigest()


NUMERIC_SUFFIX = "__n"
TRUTHY_SUFFIX = "__b"
LENGTH_SUFFIX = "__len"
AGREE_SUFFIX = "__ag"
ABSENT_MARK = "x:"


def encode_fields(fields: dict[str, Any], list_fields: frozenset[str],
                  read: frozenset[str] | None = None,
                  valued: frozenset[str] | None = None) -> dict[str, Any]:
    """Encode a fact's fields, adding companions: ``__t`` JSON type, ``__n`` 1 for numbers,
    ``__b`` truthiness (1/0), and for lists ``__len`` and the ``agree_on`` flags. Companions
    keep compiled conditions flat (no DNF blow-up) and are always present with their field,
    so joins on them never hit a missing field. Only fields in ``read`` (None: all) are
    encoded: a field no rule reads changes no match, and costs the engine its parsing. Of
    those, a field not in ``valued`` (None: all) is given as its companions alone: no rule
    reads its value (a rank's ``engine`` block, whose text would be written and parsed only
    for rules that test its type)."""
    out: dict[str, Any] = {}
    for name, value in fields.items():
        if read is not None and name not in read:
            continue
        shown = valued is None or name in valued
        cls = value.__class__
        if cls is str:  # the common classes first, one test each (the engine's hot path)
            kind, numeric = "string", 0
            if shown:
                out[name] = "s:" + value
        elif cls is int and -INT64_MAX <= value <= INT64_MAX:
            kind, numeric = "integer", 1
            if shown:
                out[name] = value
        elif cls is list and name in list_fields:
            kind, numeric = "array", 0
            if shown:
                out[name] = [LIST_SENTINEL] + ["s:" + v for v in value]
        else:
            if shown:
                out[name] = encode_scalar(value)
            kind = value_type(value)
            numeric = 1 if kind in _NUMERIC_TYPES else 0
        out[name + TYPE_SUFFIX] = kind
        out[name + NUMERIC_SUFFIX] = numeric
        out[name + TRUTHY_SUFFIX] = 1 if value else 0
        if isinstance(value, list):
            out[name + LENGTH_SUFFIX] = len(value)
            out.update(agreement(name, value))
    return out


_NUMERIC_TYPES = frozenset({"integer", "number"})
"""JSON types whose ``__n`` companion is 1 (a bigint is compared as text, not a number)."""


def agreement(name: str, items: list[Any]) -> dict[str, int]:
    """Engine companions of a list for ``agree_on``: ``<name>__ag`` is 1 when every item
    is an object, and ``<name>__ag_<key>`` is 1 when the items agree on ``key`` (same JSON
    type and content, or all lacking it), for every key some item holds."""
    if not all(isinstance(i, dict) for i in items):
        return {name + AGREE_SUFFIX: 0}
    out = {name + AGREE_SUFFIX: 1}
    keys = sorted({k for i in items for k in i if isinstance(k, str)})
    for key in keys:
        seen = {_agreeing(i[key]) if key in i else None for i in items}
        out[f"{name}{AGREE_SUFFIX}_{key}"] = 1 if len(seen) == 1 else 0
    return out


_PLAIN = frozenset({str, int, bool, type(None)})


def _agreeing(value: Any) -> tuple[Any, Any]:
    """What two values must share to agree: JSON type and content. A string, integer,
    boolean or null is its class and itself (equal exactly when type and text are), a
    float its text; only a container is written out (the engine's hot path: ``views``)."""
    cls = value.__class__
    if cls in _PLAIN:
        return cls, value
    if cls is float:
        return cls, repr(value)
    return value_type(value), canonical(value)


def absent_marker(name: str) -> dict[str, Any]:
    """A referenced field that is absent: present to the engine (a join on a missing field
    is an engine error), but equal to nothing and typed ``absent``."""
    return {name: ABSENT_MARK, companion(name): "absent", name + TRUTHY_SUFFIX: 0,
            name + NUMERIC_SUFFIX: 0}


def encode_fact(fact_type: str, fact_id: str, fields: dict[str, Any],
                list_fields: frozenset[str], read: frozenset[str] | None = None,
                valued: frozenset[str] | None = None) -> dict[str, Any]:
    """A complete engine fact: discriminator, id and encoded fields; with ``read``, only
    the fields and companions named there (and of a field not ``valued``, its companions
    alone, see :func:`encode_fields`)."""
    out = encode_fields(fields, list_fields, read, valued)
    out[DISCRIMINATOR] = fact_type
    out["id"] = "s:" + fact_id
    out[companion("id")] = "string"
    out[JOIN_ID] = out["id"]
    out[companion(JOIN_ID)] = "string"
    return out if read is None else only_read(out, read)


def only_read(encoded: dict[str, Any], read: frozenset[str]) -> dict[str, Any]:
    """The discriminator, the id and the keys in ``read`` (companions no rule tests are
    most of a fact's keys), in their order."""
    return {key: value for key, value in encoded.items()
            if key in read or key == DISCRIMINATOR or key == "id"}


MT_SPECIAL = set("()[]*+?%{}|.")


def escape_prefix(text: str) -> str:
    """Escape text for durable's anchored ``$mt`` dialect (``%`` escapes specials)."""
    return "".join("%" + ch if ch in MT_SPECIAL else ch for ch in text)


ENGINE_STRING_BYTES = 65_535
"""Longest string the engine compares whole: it takes a string's length as 16 bits
(``reduceString`` and the ``$mt`` path in durable's ``events.c``), so a string of
65,536 + n bytes compares equal to an n-byte constant it starts with. The length is that of
the string in the JSON text the engine is given (UTF-8, escapes written out)."""
MAX_STRING_BYTES = ENGINE_STRING_BYTES - len("s:")
"""Longest fact string (bytes of UTF-8) sent to the engine: its tagged form still fits."""
MAX_DEPTH = 64
"""Deepest nesting of lists/objects accepted in a fact value."""
_SHORT = ENGINE_STRING_BYTES // 6 - 2
"""Characters a string may have without being measured: JSON writes a character in at most
6 bytes (``\\u0001``), so such a string can never reach the engine's 16-bit limit."""


def engine_bytes(text: str) -> int:
    """Bytes of ``text`` as the engine holds it: UTF-8 of its JSON escape (what kvrules'
    writers give it: ``"``, ``\\`` and control characters escaped), quotes left out."""
    written = json.dumps(text, ensure_ascii=False)
    return len(written.encode("utf-8", "surrogatepass")) - 2


def string_problem(text: str, limit: int = MAX_STRING_BYTES) -> str | None:
    """Why the engine cannot compare ``text`` exactly (None when it can): longer than
    ``limit`` bytes of UTF-8, or than that once escaped as JSON."""
    if len(text) <= _SHORT:  # the common case: a length test, no encoding
        return None
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > limit:
        return f"string of {size} bytes of UTF-8 (the limit is {limit})"
    escaped = engine_bytes(text)
    if escaped > limit:
        return f"string of {escaped} bytes once escaped as JSON (the limit is {limit})"
    return None


def value_problem(value: Any, depth: int = 0, sent: bool = True) -> str | None:
    """Why ``value`` may not reach the engine (None when it may).

    Only JSON types pass: None, bool, int within int64 (larger ints are tagged ``bigint``
    text, so they are accepted), finite float, str up to MAX_STRING_BYTES bytes, list and
    dict (str keys) of those, nested at most MAX_DEPTH deep. Containers reach the engine
    as bounded text (:func:`encode_container`), so a non-finite number or a long string
    inside one is harmless; only the strings of a top-level list are sent one by one
    (string lists) and keep the length limit. NonFiniteNumber markers, inf/nan and any
    other Python type are refused at the top level. ``sent``: the value reaches the engine
    as itself.
    """
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) or depth > 0 else f"non-finite number {value!r}"
    if isinstance(value, str):
        return string_problem(value) if sent else None
    if depth >= MAX_DEPTH:
        return f"value nested deeper than {MAX_DEPTH} levels"
    if isinstance(value, list):
        for item in value:
            problem = value_problem(item, depth + 1, depth == 0)
            if problem:
                return problem
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"object key of type {type(key).__name__}"
            problem = value_problem(item, depth + 1, False)
            if problem:
                return problem
        return None
    token = getattr(value, "token", None)
    if isinstance(token, str):  # kvrules.artifacts.model.NonFiniteNumber
        return None if depth > 0 else f"non-finite number {token}"
    return f"value of type {type(value).__name__} is not JSON"


def fields_problems(fields: dict[str, Any]) -> list[tuple[str, str]]:
    """(field, problem) for every field value the engine must not see."""
    out = []
    for name, value in fields.items():
        if not isinstance(name, str):
            out.append((str(name), f"field name of type {type(name).__name__}"))
            continue
        problem = value_problem(value)
        if problem:
            out.append((name, problem))
    return out
