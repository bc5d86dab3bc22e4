"""Find the shipped policy and JSON Schemas inside the installed package, never by CWD."""
from __future__ import annotations

import json
import os
from functools import lru_cache
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # (importlib.abc imports importlib.resources: 1 ms of every start-up)
    from importlib.abc import Traversable


RULE_FILE_SUFFIXES = (".yaml", ".yml")
"""The files of a policy folder the compiler reads (not subfolders)."""


@lru_cache(maxsize=None)
def _folder(package: str) -> Traversable:
    """A data package's folder: the directory its import spec names when it is one (every
    install but a zipped one), else importlib.resources' view of it (which costs a run
    2 ms to import, zipfile included, before it finds the same directory)."""
    spec = find_spec(package)
    places = list(spec.submodule_search_locations or []) if spec is not None else []
    if len(places) == 1 and os.path.isdir(places[0]):
        return Path(places[0])
    from importlib import resources
    return resources.files(package)


def rules_dir() -> Traversable:
    """The default policy shipped as ``kvrules.rules``."""
    return _folder("kvrules.rules")


def schema_file(name: str) -> Traversable:
    """A shipped schema file by name, e.g. ``rank.schema.json``."""
    return _folder("kvrules.schemas") / name


@lru_cache(maxsize=None)
def load_schema(name: str) -> dict[str, Any]:
    """Parse a shipped JSON Schema once per process."""
    data: dict[str, Any] = json.loads(schema_file(name).read_text(encoding="utf-8"))
    return data
