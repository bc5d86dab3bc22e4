"""JSON types named the way JSON Schema does them, pointers and canonical text."""
from __future__ import annotations

import json
from typing import Any

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


def value_type(value: Any) -> str:
    """The JSON type, or ``bigint`` for an integer beyond 64 bits."""
    kind = json_type(value)
    if kind == "integer" and not -INT64_MAX <= value <= INT64_MAX:
        return "bigint"
    return kind
