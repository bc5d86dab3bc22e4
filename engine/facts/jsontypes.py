"""Name JSON types the way JSON Schema does, so facts can say what kind of value was found."""
from __future__ import annotations

from typing import Any

ABSENT = "absent"


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


def type_of_key(obj: Any, key: str) -> str:
    """JSON type of ``obj[key]``, or ``absent`` when obj is not an object or lacks the key."""
    if not isinstance(obj, dict) or key not in obj:
        return ABSENT
    return json_type(obj[key])


def pointer(*parts: object) -> str:
    """An RFC 6901 JSON pointer from path parts."""
    out = []
    for p in parts:
        s = str(p).replace("~", "~0").replace("/", "~1")
        out.append(s)
    return "/" + "/".join(out) if out else ""
