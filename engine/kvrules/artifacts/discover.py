"""Turn the paths a user typed into cell references, without reading any evidence.

Discovery only decides *which* cells exist; everything that can be wrong inside a cell is
found later by :func:`kvrules.artifacts.load.load_cell` and reported per cell, so a broken
file never prevents the other cells from being classified. Only an unusable invocation (a
path that does not exist or is neither a campaign nor a cell) raises.
"""
from __future__ import annotations

from dataclasses import dataclass

import glob
import os
import warnings
from pathlib import Path
from typing import Iterable, Iterator, Sequence, Union

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
    campaigns (an archive) stands for every campaign below it, at any depth, in name order
    (a campaign's own folders are not searched further). A path that does not exist but
    holds ``*``, ``?`` or ``[`` is a glob (``**`` for any depth): its matches, sorted.
    """
    return list(iter_discover(paths, plan))


def iter_discover(paths: Paths, plan: str | None = None) -> Iterator[CellRef]:
    """:func:`discover` one campaign at a time (memory flat over a large archive).

    Every path is checked before the first cell is yielded, so an unusable invocation
    raises before any output.
    """
    plan_path = _explicit_plan(plan)
    inputs = [(label, root, _kind(label, root))
              for label, root in ((g, _existing_dir(g)) for g in _expand(input_paths(paths)))]
    return _once(_cells_of(inputs, plan_path))


def _once(refs: Iterable[CellRef]) -> Iterator[CellRef]:
    """Each cell once, where it was first given: a campaign named twice (``a a``, or
    ``a`` and ``./a/``) would otherwise be reported, counted and aggregated twice. The
    warnings come when every cell has been given."""
    seen: set[tuple[Path, str]] = set()
    repeated: dict[str, int] = {}
    folders: dict[str, Path] = {}
    for ref in refs:
        key = (real_path(ref.cell_dir, folders), ref.cell_id)
        if key in seen:
            repeated[ref.campaign] = repeated.get(ref.campaign, 0) + 1
            continue
        seen.add(key)
        yield ref
    for campaign, n in repeated.items():
        warnings.warn(KvrulesWarning(
            f"{campaign}: {n} cell{'s' * (n != 1)} already given by an earlier path, "
            "reported once"), stacklevel=3)


def real_path(path: Path, folders: dict[str, Path]) -> Path:
    """``Path(os.path.abspath(path)).resolve()``, with the folder holding ``path`` resolved
    once for every path in it (``folders`` keeps them): a campaign's cells share their folder,
    so a cell costs one ``lstat`` instead of one per component of its path (800 cells: ~30 ms
    before the first cell could start)."""
    absolute = os.path.abspath(path)
    folder, name = os.path.split(absolute)
    if not name or os.path.islink(absolute):
        return Path(absolute).resolve()
    real = folders.get(folder)
    if real is None:
        real = folders[folder] = Path(folder).resolve()
    return real / name


def _cells_of(inputs: list[tuple[str, Path, str]],
              plan_path: Path | None) -> Iterator[CellRef]:
    for label, root, kind in inputs:
        if kind == "campaign":
            yield from _campaign_cells(label, root, plan_path)
        elif kind == "cell":
            yield CellRef(label, root, root.name, root, plan_path)
        else:
            for child_label, child in _campaigns_below(label.rstrip("/"), root):
                yield from _campaign_cells(child_label, child.resolve(), plan_path)


GLOB_CHARS = frozenset("*?[")


def _expand(paths: list[str]) -> list[str]:
    """The paths as given, a glob (a path that does not exist, with ``*?[``) expanded."""
    out: list[str] = []
    for given in paths:
        if GLOB_CHARS.isdisjoint(given) or os.path.lexists(given):
            out.append(given)
            continue
        matches = sorted(m for m in glob.glob(given, recursive=True) if os.path.isdir(m))
        if not matches:
            raise KvrulesUsageError(f"{given}: no folder matches")
        out.extend(matches)
    return out


def _kind(given: str, root: Path) -> str:
    """``campaign``, ``cell`` or ``archive`` (campaigns below); else a usage error."""
    if _is_campaign(root):
        return "campaign"
    if (root / RAW_DIR).is_dir():
        return "cell"
    if next(_campaigns_below(given, root), None) is not None:
        return "archive"
    raise KvrulesUsageError(
        f"{given}: neither a campaign folder (with {PLAN_NAME} or {CELLS_DIR}/), "
        f"a cell folder (with {RAW_DIR}/) nor a folder of campaigns")


def _campaigns_below(label: str, folder: Path) -> Iterator[tuple[str, Path]]:
    """Every campaign below ``folder`` (depth first, names in order) with its label.

    Campaigns may be symbolic links; other linked folders are not entered (no loops), and
    neither are cells nor the campaigns found.
    """
    try:
        children = sorted(c for c in folder.iterdir() if c.is_dir())
    except OSError as exc:
        raise KvrulesUsageError(f"{folder}: cannot list folder: {exc.strerror or exc}") \
            from None
    for child in children:
        child_label = f"{label}/{child.name}"
        if _is_campaign(child):
            yield child_label, child
        elif not child.is_symlink() and not (child / RAW_DIR).is_dir():
            yield from _campaigns_below(child_label, child)


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
    """Every folder under ``cells/``, hidden ones (``.name``) included: none vanishes.
    (``scandir`` knows which entries are folders without a ``stat`` each but for links.)"""
    if not cells_dir.is_dir():
        return set()
    try:
        with os.scandir(cells_dir) as entries:
            return {entry.name for entry in entries if entry.is_dir()}
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


def read_folders(paths: Paths) -> Iterator[tuple[str, Path]]:
    """(label, real path) of every folder a run reads for ``paths``, without reading any
    evidence: each input as given (a glob expanded, a missing path as typed), the campaigns
    below a folder of campaigns, and every cell folder that is a symbolic link. Writers
    compare their destination with these, so no output lands inside evidence even where a
    link leads out of the folder that was named."""
    for given in input_paths(paths):
        matches = ([given] if GLOB_CHARS.isdisjoint(given) or os.path.lexists(given)
                   else sorted(glob.glob(given, recursive=True)) or [given])
        for label in matches:
            root = Path(os.path.realpath(label))
            yield label, root
            if root.is_dir() and not (root / RAW_DIR).is_dir():
                yield from _linked_folders(label, root)


def _linked_folders(label: str, root: Path) -> Iterator[tuple[str, Path]]:
    """Campaigns below an archive (linked or not) and the linked cells of each campaign."""
    campaigns = [(label, root)] if _is_campaign(root) else _campaigns_below(label, root)
    for name, campaign in campaigns:
        if campaign is not root:
            yield name, Path(os.path.realpath(campaign))
        try:
            with os.scandir(campaign / CELLS_DIR) as entries:
                links = [entry.name for entry in entries if entry.is_symlink()]
        except OSError:  # no cells/ folder, or unreadable: discovery reports it
            continue
        for cell in links:
            yield f"{name}/{CELLS_DIR}/{cell}", Path(os.path.realpath(campaign / CELLS_DIR / cell))
