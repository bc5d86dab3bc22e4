"""The ``kv_seed_classification`` marker of a commit record (spec 6.3).

The marker says which cells of a published table were classified with dense synthetic KV
on, and by which policy version. It is present exactly when the table has
``skip:dense_model_content_insensitive`` rows; its cells are exactly those cells, sorted and
unique. Publication computes it over the merged table; verification checks it. Re-deriving a
published cell reads it to pick the classification the cell was published with.
"""
from __future__ import annotations

import json
from collections import Counter
from typing import Any, Callable, TypeGuard

from kvrules.consumers import codes
from kvrules.consumers.rows import DENSE_REGIME as _DENSE

MARKER = "kv_seed_classification"
AddProblem = Callable[[str, str, str], None]
"""``add(code, message, pointer)``."""


def marker(policy_version: str, dense_cells: list[str]) -> dict[str, Any] | None:
    """The marker for a table whose dense cells are ``dense_cells`` (None when there are none)."""
    cells = sorted(set(dense_cells))
    return {"policy": policy_version, "cells": cells} if cells else None


def read_marker(record: dict[str, Any]) -> tuple[str | None, frozenset[str]]:
    """``(policy, cells)`` of a well-formed marker; ``(None, {})`` when there is none."""
    value = record.get(MARKER)
    if not _well_formed(value):
        return None, frozenset()
    return value["policy"], frozenset(value["cells"])


def _well_formed(value: Any) -> TypeGuard[dict[str, Any]]:
    """A dict with a ``policy`` string and a list of ``cells`` strings."""
    return (isinstance(value, dict) and isinstance(value.get("policy"), str)
            and isinstance(value.get("cells"), list)
            and all(isinstance(c, str) for c in value["cells"]))


def marker_problems(record: dict[str, Any], dense_cells: list[str], known: frozenset[str],
                    add: AddProblem) -> None:
    """Report every way the record's marker disagrees with the table's dense cells."""
    if MARKER not in record:
        if dense_cells:
            add(codes.MARKER_MISSING, f"the table has {_DENSE} rows (cells "
                f"{', '.join(dense_cells)}) but the commit record has no {MARKER}", f"/{MARKER}")
        return
    value = record[MARKER]
    if not dense_cells:
        add(codes.MARKER_UNEXPECTED, f"{MARKER} is present but no row is {_DENSE}",
            f"/{MARKER}")
    if not _well_formed(value):
        add(codes.MARKER_INVALID, f"{MARKER} must be {{\"policy\": string, \"cells\": "
            f"[string, ...]}}, got {json.dumps(value)}", f"/{MARKER}")
        return
    if value["policy"] not in known:
        add(codes.MARKER_UNKNOWN_POLICY, f"{MARKER} names policy {value['policy']!r}, which is "
            f"not known (known: {', '.join(sorted(known))}); load it with --rules",
            f"/{MARKER}/policy")
    _cell_problems(value["cells"], dense_cells, add)


def _cell_problems(cells: list[str], dense_cells: list[str], add: AddProblem) -> None:
    at = f"/{MARKER}/cells"
    if not cells and dense_cells:
        add(codes.MARKER_EMPTY, f"{MARKER} lists no cell while cells "
            f"{', '.join(dense_cells)} have {_DENSE} rows", at)
        return
    duplicates = sorted(c for c, n in Counter(cells).items() if n > 1)
    for cell in duplicates:
        add(codes.MARKER_DUPLICATE, f"{MARKER} lists cell {cell} more than once",
            f"{at}/{cells.index(cell)}")
    for index, cell in enumerate(cells):
        if cell not in dense_cells and cell not in cells[:index]:
            add(codes.MARKER_EXTRA_CELL, f"{MARKER} names cell {cell}, which has no "
                f"{_DENSE} rows", f"{at}/{index}")
    for cell in dense_cells:
        if cell not in cells:
            add(codes.MARKER_MISSING_CELL, f"cell {cell} has {_DENSE} rows but {MARKER} "
                "does not name it", at)
    if not duplicates and cells != sorted(cells):
        add(codes.MARKER_UNSORTED, f"{MARKER} cells must be sorted", at)

