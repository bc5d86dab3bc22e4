"""Find the shipped policy and JSON Schemas inside the installed package, never by CWD."""
from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from importlib.abc import Traversable
from typing import Any


def rules_dir() -> Traversable:
    """The default policy shipped as ``kvrules.rules``."""
    return resources.files("kvrules.rules")


def schema_file(name: str) -> Traversable:
    """A shipped schema file by name, e.g. ``rank.schema.json``."""
    return resources.files("kvrules.schemas") / name


@lru_cache(maxsize=None)
def load_schema(name: str) -> dict[str, Any]:
    """Parse a shipped JSON Schema once per process."""
    data: dict[str, Any] = json.loads(schema_file(name).read_text(encoding="utf-8"))
    return data
