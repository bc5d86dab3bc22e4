"""The collection plan: read and validated once per process, looked up per cell.

A corpus has hundreds of cells sharing one plan; re-validating the whole plan for every cell
would cost more than the rank artifacts themselves. The cache is keyed on the file's stat
so an edited plan is re-read. The cached dict is shared between cells: treat it as read-only.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from kvrules.artifacts.jsonio import read_json
from kvrules.artifacts.model import Document
from kvrules.artifacts.validate import validate
from kvrules.diagnostics import ARTIFACT_INVALID, Diagnostic, evidence_error

PLAN_SCHEMA = "plan.schema.json"
DEFAULT_EXECUTION_IDENTITY: dict[str, str] = {
    "model_config_sha256": "", "execution_profile": "full", "engram_residency": "none",
    "input_modality": "text"}
"""Spec 2.2: the identity of a cell without ``execution_identity`` (schema_version 10)."""


@dataclass(frozen=True)
class LoadedPlan:
    """A plan file's outcome: the document when valid, else the one diagnostic."""

    document: Document | None
    diagnostic: Diagnostic | None
    index: dict[str, list[int]] = field(default_factory=dict)


def load_plan(path: Path, relpath: str, root: Path | None = None) -> LoadedPlan:
    """Read and validate a plan, reusing the result while the file is unchanged.

    A cell without ``execution_identity`` (the schema_version 10 layout) gets the default
    identity in the decoded copy, so every reader sees the same four values; the file on
    disk is never changed.
    """
    try:
        st = os.stat(path)
        stamp: tuple[int, ...] = (st.st_mtime_ns, st.st_size, st.st_ino)
    except (OSError, ValueError):
        stamp = ()
    return _load_plan(str(path), relpath, stamp, None if root is None else str(root))


@lru_cache(maxsize=8)
def _load_plan(path: str, relpath: str, stamp: tuple[int, ...],
               root: str | None) -> LoadedPlan:
    """Uncached body of :func:`load_plan` (``stamp`` only makes the cache key)."""
    data, diag = read_json(Path(path), relpath, None if root is None else Path(root))
    if data is None:
        return LoadedPlan(None, diag)
    diag = validate(data, PLAN_SCHEMA, relpath, ARTIFACT_INVALID)
    if diag is not None:
        return LoadedPlan(None, diag)
    index: dict[str, list[int]] = {}
    for i, cell in enumerate(data["cells"]):
        index.setdefault(cell["cell_id"], []).append(i)
        if "execution_identity" not in cell:
            cell["execution_identity"] = dict(DEFAULT_EXECUTION_IDENTITY)
    return LoadedPlan(Document(Path(path), relpath, data), None, index)


def plan_cell(plan: LoadedPlan, cell_id: str) -> tuple[int | None, list[Diagnostic]]:
    """Index of the cell in ``plan.cells``; not listed or listed twice is a plan error."""
    assert plan.document is not None
    rel = plan.document.relpath
    found = plan.index.get(cell_id, [])
    if not found:
        return None, [evidence_error(ARTIFACT_INVALID,
                                     f"cell folder '{cell_id}' is not listed in the plan's "
                                     "cells", rel, "/cells")]
    extra = [evidence_error(ARTIFACT_INVALID,
                            f"cell_id '{cell_id}' is listed more than once in the plan's "
                            f"cells (first at /cells/{found[0]})", rel, f"/cells/{i}/cell_id")
             for i in found[1:]]
    return found[0], extra


def expected_dp(cell: dict[str, Any] | None, has_plan: bool) -> tuple[int | None, str]:
    """The dp the rank set must match, and how it was obtained (for messages).

    No plan at all means a single-rank cell is assumed (fail closed for dp > 1); a plan that
    is broken or does not list the cell gives no expectation (its own error already stands).
    """
    if cell is not None:
        dp = cell["topology"]["dp"]
        return dp, f"plan topology dp={dp}"
    if not has_plan:
        return 1, "no plan: dp=1 assumed"
    return None, "plan topology unknown"
