"""The fact catalogue (``schemas/facts.yaml``): fact types, their fields and field types."""
from __future__ import annotations

from dataclasses import dataclass

from functools import lru_cache
from typing import Any

from kvrules.resources import schema_file

FIELD_TYPES = ("string", "integer", "boolean", "string_list", "any")


@dataclass(frozen=True)
class FactType:
    """A fact type: name, description and ``field -> type``."""

    name: str
    description: str
    fields: dict[str, str]
    derived: bool = False


@lru_cache(maxsize=1)
def base_catalogue() -> dict[str, FactType]:
    """The extracted fact types shipped with kvrules."""
    import yaml  # only to compile a policy (~15 ms): a cached policy's run needs no YAML
    data: dict[str, Any] = yaml.safe_load(schema_file("facts.yaml").read_text(encoding="utf-8"))
    out = {}
    for name, spec in data["facts"].items():
        fields = {f: d["type"] for f, d in spec["fields"].items()}
        out[name] = FactType(name, spec.get("description", ""), fields)
    return out


def check_fact_fields(fact_type: FactType, fields: dict[str, Any]) -> list[str]:
    """Problems of an extracted fact against its catalogue entry (empty when it conforms)."""
    problems = []
    for name, value in fields.items():
        declared = fact_type.fields.get(name)
        if declared is None:
            problems.append(f"{fact_type.name}.{name} is not in the fact catalogue")
        elif not _conforms(declared, value):
            problems.append(f"{fact_type.name}.{name} should be {declared}, got {value!r}")
    return problems


def _conforms(declared: str, value: Any) -> bool:
    if declared == "any":
        return True
    if declared == "string":
        return isinstance(value, str)
    if declared == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if declared == "boolean":
        return isinstance(value, bool)
    if declared == "string_list":
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    return False
