"""JSON types named the way JSON Schema does them, pointers, canonical text and the encoder
of every report record."""
from __future__ import annotations

import json
import re
from typing import Any

import orjson

INT64_MAX = 2**63 - 1
"""Integers beyond 64 bits compare by content only (the language's ``bigint``)."""


def json_type(value: Any) -> str:
    """object, array, string, integer, number, boolean or null (bool is never integer)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "unknown"


def pointer(*parts: object) -> str:
    """An RFC 6901 JSON pointer from path parts."""
    out = []
    for p in parts:
        s = str(p).replace("~", "~0").replace("/", "~1")
        out.append(s)
    return "/" + "/".join(out) if out else ""


def json_token(value: Any) -> str:
    """``default=`` for json.dumps: a NaN/Infinity marker as the token read, else TypeError."""
    token = getattr(value, "token", None)
    if isinstance(token, str):  # a NaN/Infinity marker kept inside a container
        return token
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def canonical(value: Any, ascii: bool = False) -> str:
    """Canonical JSON text: identical content gives identical text (a non-finite marker
    nested in a container is written as its token)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=ascii,
                      default=json_token)


def encode(value: Any, indent: bool = False, sort_keys: bool = False) -> bytes:
    """``value`` as UTF-8 JSON written by orjson, compact or indented by two: the bytes of
    every report record. What orjson refuses is written as fragments (see
    :func:`_fragments`); a float never reaches a report (non-finite ones would read null)."""
    option = (orjson.OPT_INDENT_2 if indent else 0) | (orjson.OPT_SORT_KEYS if sort_keys else 0)
    try:
        return orjson.dumps(value, option=option)
    except orjson.JSONEncodeError:
        return orjson.dumps(_fragments(value), option=option)


def _fragments(value: Any) -> Any:
    """``value`` with what orjson refuses written out: an integer beyond 64 bits as its
    digits; a string holding a lone surrogate (evidence can copy one; UTF-8 has no bytes for
    it) with the surrogate as its ``\\uXXXX`` escape, read back as the same string; an object
    with such a key compact, keys sorted (report keys come from the policy: only fact fields
    have one)."""
    if isinstance(value, str):
        if not _SURROGATE.search(value):
            return value
        text = json.dumps(value, ensure_ascii=False)
        return orjson.Fragment(text.encode("utf-8", "backslashreplace"))
    if isinstance(value, int) and not isinstance(value, bool) and not -2**63 <= value < 2**64:
        return orjson.Fragment(str(value))
    if isinstance(value, (list, tuple)):
        return list(map(_fragments, value))
    if not isinstance(value, dict):
        return value
    items = {key: _fragments(item) for key, item in value.items()}
    if not any(map(_SURROGATE.search, items)):
        return items
    return orjson.Fragment(b"{%s}" % b",".join(encode(_fragments(key)) + b":" +
                                                encode(item, sort_keys=True)
                                                for key, item in sorted(items.items())))


_SURROGATE = re.compile("[\ud800-\udfff]")


def value_type(value: Any) -> str:
    """The JSON type, or ``bigint`` for an integer beyond 64 bits."""
    kind = json_type(value)
    if kind == "integer" and not -INT64_MAX <= value <= INT64_MAX:
        return "bigint"
    return kind
