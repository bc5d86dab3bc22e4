"""Turn the paths a user typed into cell references, without reading any evidence.

Discovery only decides *which* cells exist; everything that can be wrong inside a cell is
found later by :func:`kvrules.artifacts.load.load_cell` and reported per cell, so a broken
file never prevents the other cells from being classified. Only an unusable invocation (a
path that does not exist or is neither a campaign nor a cell) raises.
"""
from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence, Union

from kvrules.artifacts.jsonio import read_json
from kvrules.diagnostics import KvrulesUsageError, KvrulesWarning

PLAN_NAME = "collection-plan.json"
CELLS_DIR = "cells"
RAW_DIR = "raw"


@dataclass(frozen=True)
class CellRef:
    """Where one cell lives; cheap and picklable so cells can be loaded in worker processes."""

    campaign: str
    root: Path
    cell_id: str
    cell_dir: Path
    plan_path: Path | None


Paths = Union[str, "os.PathLike[str]", Sequence[Union[str, "os.PathLike[str]"]]]
"""What the library takes as inputs: one path or a sequence of them (str or Path)."""


def input_paths(paths: Paths) -> list[str]:
    """``paths`` as a list of strings: a single path is one input, not its characters."""
    if isinstance(paths, (str, os.PathLike)):
        return [os.fspath(paths)]
    if isinstance(paths, bytes):
        raise TypeError("paths must be str or os.PathLike, or a sequence of them, not bytes")
    return [os.fspath(p) for p in paths]


def discover(paths: Paths, plan: str | None = None) -> list[CellRef]:
    """Cells of every input, inputs in the order given, cells sorted by ``cell_id``.

    A campaign folder holds ``collection-plan.json`` and/or ``cells/``; its cells are the
    folders under ``cells/`` plus the plan's cells that have no folder yet (they are then
    reported as having no rank artifacts instead of silently disappearing). A single cell
    folder holds ``raw/`` and uses ``plan`` (``--plan FILE``) when given. A folder of
    campaigns stands for each campaign directly inside it, in name order.
    """
    plan_path = _explicit_plan(plan)
    refs: list[CellRef] = []
    for given in input_paths(paths):
        root = _existing_dir(given)
        if _is_campaign(root):
            refs.extend(_campaign_cells(given, root, plan_path))
        elif (root / RAW_DIR).is_dir():
            refs.append(CellRef(given, root, root.name, root, plan_path))
        elif campaigns := sorted(c for c in root.iterdir() if c.is_dir() and _is_campaign(c)):
            for child in campaigns:  # a folder of campaigns, e.g. ``examples/``
                label = f"{given.rstrip('/')}/{child.name}"
                refs.extend(_campaign_cells(label, child.resolve(), plan_path))
        else:
            raise KvrulesUsageError(
                f"{given}: neither a campaign folder (with {PLAN_NAME} or {CELLS_DIR}/), "
                f"a cell folder (with {RAW_DIR}/) nor a folder of campaigns")
    return _once(refs)


def _once(refs: list[CellRef]) -> list[CellRef]:
    """Each cell once, where it was first given: a campaign named twice (``a a``, or
    ``a`` and ``./a/``) would otherwise be reported, counted and aggregated twice."""
    seen: set[tuple[Path, str]] = set()
    out: list[CellRef] = []
    repeated: dict[str, int] = {}
    for ref in refs:
        key = (Path(os.path.abspath(ref.cell_dir)).resolve(), ref.cell_id)
        if key in seen:
            repeated[ref.campaign] = repeated.get(ref.campaign, 0) + 1
            continue
        seen.add(key)
        out.append(ref)
    for campaign, n in repeated.items():
        warnings.warn(KvrulesWarning(
            f"{campaign}: {n} cell{'s' * (n != 1)} already given by an earlier path, "
            "reported once"), stacklevel=3)
    return out


def _is_campaign(folder: Path) -> bool:
    return (folder / PLAN_NAME).exists() or (folder / CELLS_DIR).is_dir()


def _explicit_plan(plan: str | None) -> Path | None:
    """Resolve ``--plan FILE``; a missing plan file is a usage error, not evidence."""
    if plan is None:
        return None
    path = Path(plan)
    if not path.is_file():
        raise KvrulesUsageError(f"--plan {plan}: no such file")
    return path.resolve()


def _existing_dir(given: str) -> Path:
    """The resolved input directory, or a usage error naming the path as typed."""
    path = Path(given)
    if not path.exists():
        raise KvrulesUsageError(f"{given}: no such file or directory")
    if not path.is_dir():
        raise KvrulesUsageError(f"{given}: not a directory (expected a campaign or cell folder)")
    return path.resolve()


def _campaign_cells(given: str, root: Path, explicit: Path | None) -> list[CellRef]:
    """Folder cells and planned-but-missing cells of one campaign, sorted by id."""
    own = root / PLAN_NAME
    plan_path = own if own.exists() else explicit
    if own.exists() and explicit is not None and explicit != own.resolve():
        raise KvrulesUsageError(
            f"--plan {explicit} conflicts with {given}/{PLAN_NAME}: a campaign uses its own plan")
    cells_dir = root / CELLS_DIR
    ids = _folder_ids(cells_dir)
    ids |= _planned_ids(plan_path, root)
    return [CellRef(given, root, cid, cells_dir / cid, plan_path) for cid in sorted(ids)]


def _folder_ids(cells_dir: Path) -> set[str]:
    """Every folder under ``cells/``, hidden ones (``.name``) included: none vanishes."""
    try:
        return {p.name for p in cells_dir.iterdir() if p.is_dir()} if cells_dir.is_dir() \
            else set()
    except OSError as exc:
        raise KvrulesUsageError(f"{cells_dir}: cannot list folder: {exc.strerror or exc}") \
            from None


def _planned_ids(plan_path: Path | None, root: Path) -> set[str]:
    """Cell ids named by a readable plan that are safe folder names (best effort)."""
    if plan_path is None:
        return set()
    data, _ = read_json(plan_path, PLAN_NAME, root)
    cells = data.get("cells") if data else None
    if not isinstance(cells, list):
        return set()
    return {c["cell_id"] for c in cells if isinstance(c, dict) and _safe_id(c.get("cell_id"))}


def _safe_id(value: object) -> bool:
    """A cell id usable as a folder name under ``cells/`` (no traversal, no separators,
    no NUL, encodable as a file name); other ids are reported by plan validation."""
    if not (isinstance(value, str) and value not in ("", ".", "..")
            and "/" not in value and "\\" not in value and "\0" not in value):
        return False
    try:
        os.fsencode(value)
    except (UnicodeError, ValueError):
        return False
    return True
