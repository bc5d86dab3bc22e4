"""Schema validation: a compiled fast path, and precise errors only when something is wrong.

A corpus holds hundreds of artifacts with hundreds of results each, so the common case (a
valid file) goes through fastjsonschema's generated code. Only an invalid file pays for the
``jsonschema`` validator, whose errors carry the exact path we turn into a JSON pointer.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any, Callable

import fastjsonschema
from jsonschema import Draft202012Validator, ValidationError
from jsonschema.exceptions import best_match

from kvrules.artifacts.jsonio import pointer, render
from kvrules.diagnostics import Diagnostic, evidence_error
from kvrules.resources import load_schema


@lru_cache(maxsize=None)
def _fast(name: str) -> Callable[[Any], Any]:
    """Compile a shipped schema once per process (defaults off: never touch the data)."""
    return fastjsonschema.compile(load_schema(name), use_default=False, use_formats=False)


@lru_cache(maxsize=None)
def _precise(name: str) -> Draft202012Validator:
    """The reference validator, built lazily: only invalid files need it."""
    schema = load_schema(name)
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def validate(data: Any, schema: str, relpath: str, code: str) -> Diagnostic | None:
    """Return the first schema violation of ``data`` as a Diagnostic, or None when valid."""
    try:
        _fast(schema)(data)
        return None
    except fastjsonschema.JsonSchemaValueException as fast_error:
        errors = sorted(_precise(schema).iter_errors(data), key=_path_key)
        if not errors:  # the two validators disagree: trust the stricter one, less precisely
            parts = list(fast_error.path or [])[1:]
            return evidence_error(code, f"{where(parts)}: {fast_error.message}", relpath,
                                  pointer(parts))
        error = best_match([e for e in errors if _path_key(e) == _path_key(errors[0])])
        parts = list(error.absolute_path)
        return evidence_error(code, describe(error), relpath, pointer(parts))


def _path_key(error: ValidationError) -> tuple[tuple[int, int, str], ...]:
    """Order errors by location (array indices numerically) so "first" is deterministic."""
    return tuple((0, p, "") if isinstance(p, int) else (1, 0, str(p))
                 for p in error.absolute_path)


def where(parts: list[Any]) -> str:
    """A readable field name such as ``results[3].fpms[0].wall_time``."""
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "the document"


def describe(error: ValidationError) -> str:
    """A short message naming the field, without dumping large instances."""
    field = where(list(error.absolute_path))
    value, kind, inst = error.validator_value, error.validator, error.instance
    if kind == "required":
        missing = [p for p in value if isinstance(inst, dict) and p not in inst]
        name = missing[0] if missing else value
        inside = "" if field == "the document" else f" in {field}"
        return f"required field '{name}' is missing{inside}"
    got = render(inst)
    if kind == "type":
        types = " or ".join(value) if isinstance(value, list) else value
        return f"{field} must be of type {types}, got {got}"
    if kind == "const":
        return f"{field} must be {render(value)}, got {got}"
    if kind == "enum":
        return f"{field} must be one of {', '.join(render(v) for v in value)}, got {got}"
    if kind in ("minItems", "maxItems"):
        count = len(inst) if isinstance(inst, list) else "?"
        exact = _exact_items(error)
        rule = f"exactly {exact}" if exact is not None else (
            f"at least {value}" if kind == "minItems" else f"at most {value}")
        return f"{field} must have {rule} item(s), got {count}"
    if kind == "exclusiveMinimum":
        return f"{field} must be greater than {value}, got {got}"
    if kind == "minimum":
        return f"{field} must be at least {value}, got {got}"
    if kind == "minLength" and value == 1:
        return f"{field} must be a non-empty string"
    if kind == "pattern":
        return f"{field} has an invalid value {got}"
    return f"{field}: {error.message[:200]}"


def _exact_items(error: ValidationError) -> int | None:
    """When minItems == maxItems the rule is "exactly n"; say so instead of half of it."""
    schema = error.schema if isinstance(error.schema, dict) else {}
    low, high = schema.get("minItems"), schema.get("maxItems")
    return low if low is not None and low == high else None
