"""Schema validation: a compiled fast path, and precise errors only when something is wrong.

A corpus holds hundreds of artifacts with hundreds of results each, so the common case (a
valid file) goes through fastjsonschema's generated code (plus a hand-written loop for rank
results). Only a file the fast path refuses pays for the ``jsonschema`` validator, which is
the authority on validity and whose errors carry the exact path we turn into a JSON pointer.
"""
from __future__ import annotations

from functools import lru_cache
from types import CodeType
from typing import TYPE_CHECKING, Any, Callable

import fastjsonschema
from fastjsonschema.draft04 import CodeGeneratorDraft04
from fastjsonschema.draft2019 import CodeGeneratorDraft2019
from fastjsonschema.ref_resolver import RefResolver

from kvrules.artifacts.fastpath import result_columns
from kvrules.artifacts.jsonio import pointer, render
from kvrules.diagnostics import Diagnostic, evidence_error
from kvrules.resources import load_schema

if TYPE_CHECKING:
    from jsonschema import ValidationError


class _AskSchema(Exception):
    """The hand-written fast path could not vouch for the data; the schema decides."""


def _is_integer(_checker: Any, instance: Any) -> bool:
    """Spec 2.1: an integer is a JSON integer; ``1.0`` is not ``1`` and ``true`` is no number."""
    return type(instance) is int


def _is_number(_checker: Any, instance: Any) -> bool:
    """A JSON number: int or float, never a boolean (nor a NaN/Infinity marker)."""
    return type(instance) is int or type(instance) is float


@lru_cache(maxsize=1)
def strict_validator() -> Any:
    """Draft 2020-12 with strict JSON integers (the draft itself accepts ``4.0`` as integer).

    jsonschema is imported here, on the first file the fast path refuses: a run over valid
    evidence never loads it."""
    from jsonschema import Draft202012Validator, validators
    types = Draft202012Validator.TYPE_CHECKER.redefine_many(
        {"integer": _is_integer, "number": _is_number})
    return validators.extend(  # type: ignore[no-untyped-call]  # unannotated in its stubs
        Draft202012Validator, type_checker=types)


class _StrictCodeGenerator(CodeGeneratorDraft2019):
    """fastjsonschema's 2019 generator with draft-04 ``type`` code: ``integer`` is ``int``.

    Since draft 06 fastjsonschema accepts an integral float as an integer; the fast path
    must not accept what :func:`strict_validator` refuses.
    """

    generate_type = CodeGeneratorDraft04.generate_type


def _generated_module(schema: dict[str, Any], label: str) -> CodeType:
    """fastjsonschema's code for ``schema`` with :class:`_StrictCodeGenerator` (no defaults,
    no formats), as one module: its imports and regexes, the functions, then ``VALIDATE``."""
    resolver = RefResolver.from_schema(schema, handlers={}, store={})
    generator = _StrictCodeGenerator(  # type: ignore[no-untyped-call]  # fastjsonschema: untyped
        schema, resolver=resolver, formats={}, use_default=False, use_formats=False)
    source = (f"{generator.global_state_code}\n{generator.func_code}\n"
              f"VALIDATE = {resolver.get_scope_name()}\n")
    return compile(source, f"<fast validator of {label}>", "exec")


# schema name -> (top-level array property, sound fast check of its items: what it
# gathered when they are valid, None when the schema must decide)
_ITEM_FAST_PATHS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "rank.schema.json": ("results", result_columns),
}


FAST_SCHEMAS = ("rank.schema.json", "plan.schema.json", "provenance.schema.json",
                "sidecar.schema.json")
"""The shipped schemas evidence files are validated against (see :func:`prepare_validators`)."""

def fast_validator_code(name: str) -> CodeType:
    """The fast validator of a shipped schema, compiled (~5 ms per schema, most of a
    worker's first cell; see :func:`prepare_validators`). Generated in the process that
    uses it, every run: code is never read from a cache.

    Local ``$ref``s are inlined first: fastjsonschema turns each ref into a function call
    that formats a name string per array item, which costs a third of the validation time.
    For the rank schema the ``results`` items are left to :mod:`.fastpath`, which is several
    times faster than generated code on the hot loop.
    """
    schema = load_schema(name)
    inlined = _inline(schema, schema.get("$defs", {}))
    hot = _ITEM_FAST_PATHS.get(name)
    if hot is not None:
        field, _ = hot
        inlined["properties"][field] = {k: v for k, v in inlined["properties"][field].items()
                                        if k != "items"}
    return _generated_module(inlined, name)


def _validator_of(code: CodeType) -> Callable[[Any], None] | None:
    """The ``VALIDATE`` function ``code`` defines; None when it defines none or fails."""
    module: dict[str, Any] = {}
    try:
        exec(code, module)  # noqa: S102 - code generated here from a shipped schema
    except Exception:  # noqa: BLE001 - not what fast_validator_code gave: not used
        return None
    found = module.get("VALIDATE")
    return found if callable(found) else None


def prepare_validators() -> None:
    """Generate every evidence schema's fast validator in this process, once: called before
    extraction workers fork, so they inherit them instead of each generating its own."""
    for name in FAST_SCHEMAS:
        _fast(name)


def fields_vouched(data: dict[str, Any], schema: str) -> bool:
    """True when the generated validator accepts ``data`` whose hot array's items were
    vouched for elsewhere (:mod:`.rankfile`); False concludes nothing."""
    try:
        _fast(schema)(data, items=False)
    except (fastjsonschema.JsonSchemaValueException, TypeError, ValueError, RecursionError):
        return False
    return True


@lru_cache(maxsize=None)
def _fast(name: str) -> Callable[..., Any]:
    """A shipped schema's fast validator, built once per process (defaults off: it never
    touches the data): the generated code, then (``items``) the hand-written check of its
    hot array's items."""
    compiled = _validator_of(fast_validator_code(name))
    if compiled is None:  # pragma: no cover - generated code always defines VALIDATE
        raise RuntimeError(f"no fast validator generated for {name}")
    hot = _ITEM_FAST_PATHS.get(name)

    def run(data: Any, items: bool = True) -> Any:
        compiled(data)
        if not items or hot is None or hot[0] not in data:
            return None
        gathered = hot[1](data[hot[0]])
        if gathered is None:
            raise _AskSchema
        return gathered

    return run


def _inline(node: Any, defs: dict[str, Any], depth: int = 0) -> Any:
    """A copy of ``node`` with ``#/$defs/x`` references replaced by their definitions."""
    if depth > 32:
        raise ValueError("recursive $ref in a shipped schema")
    if isinstance(node, list):
        return [_inline(v, defs, depth + 1) for v in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and "#/$defs/" in ref:
        return _inline(defs[ref.rsplit("/", 1)[1]], defs, depth + 1)
    return {k: _inline(v, defs, depth + 1) for k, v in node.items()
            if k not in ("$defs", "$id", "$schema")}


@lru_cache(maxsize=None)
def _precise(name: str) -> Any:
    """The reference validator (strict integers), built lazily: only invalid files need it."""
    schema = load_schema(name)
    validator = strict_validator()
    validator.check_schema(schema)
    return validator(schema)


def validate(data: Any, schema: str, relpath: str, code: str) -> Diagnostic | None:
    """Return the first schema violation of ``data`` as a Diagnostic, or None when valid."""
    return checked(data, schema, relpath, code)[0]


def checked(data: Any, schema: str, relpath: str, code: str) -> tuple[Diagnostic | None, Any]:
    """:func:`validate`, and what the fast path gathered on the way when it vouched for
    ``data`` (a rank document's :class:`~kvrules.artifacts.model.ResultColumns`), else None."""
    try:
        return None, _fast(schema)(data)
    except (fastjsonschema.JsonSchemaValueException, _AskSchema):
        pass
    except (TypeError, ValueError, RecursionError):
        pass  # generated code met a value it did not expect: let the authority decide
    # jsonschema is the authority: a fast-path refusal it does not confirm is no error
    try:
        errors = sorted(_precise(schema).iter_errors(data), key=_path_key)
    except RecursionError:
        return evidence_error(code, "the document is nested too deeply to validate",
                              relpath), None
    if not errors:
        return None, None
    from jsonschema.exceptions import best_match
    error = best_match([e for e in errors if _path_key(e) == _path_key(errors[0])])
    return evidence_error(code, describe(error), relpath,
                          pointer(list(error.absolute_path))), None


def _path_key(error: "ValidationError") -> tuple[tuple[int, int, str], ...]:
    """Order errors by location (array indices numerically) so "first" is deterministic."""
    return tuple((0, p, "") if isinstance(p, int) else (1, 0, str(p))
                 for p in error.absolute_path)


def where(parts: list[Any]) -> str:
    """A readable field name such as ``results[3].fpms[0].wall_time``."""
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "the document"


def describe(error: "ValidationError") -> str:
    """A short message naming the field, without dumping large instances."""
    field = where(list(error.absolute_path))
    value, kind, inst = error.validator_value, error.validator, error.instance
    if kind == "required" and isinstance(value, list):
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
    if kind == "enum" and isinstance(value, list):
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


def _exact_items(error: "ValidationError") -> int | None:
    """When minItems == maxItems the rule is "exactly n"; say so instead of half of it."""
    schema = error.schema if isinstance(error.schema, dict) else {}
    low, high = schema.get("minItems"), schema.get("maxItems")
    return low if low is not None and low == high else None
