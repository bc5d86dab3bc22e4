"""Overlay cases: a real example campaign, a few JSON-pointer edits, then the real pipeline.

An overlay case names a campaign (a folder under the test files' ``campaigns`` folder, by
default the bundled ``examples/``), copies it to a temporary folder, applies its edits and
reads the copy exactly like ``classify`` does (discover → load → extract). The example
itself is never modified, and the case proves what the extractor and the rules make of
evidence on disk, not of hand-written facts.

An edit is ``{file, pointer, value}`` (set), ``{file, pointer, delete: true}`` (remove a
member; without ``pointer`` the whole file), or ``{file, text}`` (write a whole text file,
e.g. ``run.sh``). ``file`` selects files:

* ``plan``: the campaign's ``collection-plan.json``;
* ``rank<N>`` (``rank0``, ``rank1``): the rank artifact of dp rank N of the case's cell;
  ``ranks``: every rank artifact of the cell;
* ``provenance``: every ``collector-provenance.json`` of the cell;
* anything else: a glob relative to the campaign folder (``cells/*/generator-request.json``);
  a name without wildcards that matches nothing is created.

A pointer's last step may be ``-`` to append to a list; ``""`` is the whole document.
"""
from __future__ import annotations

from dataclasses import dataclass

import json
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from kvrules.artifacts.discover import CELLS_DIR, PLAN_NAME, RAW_DIR, discover
from kvrules.artifacts.load import PROVENANCE_NAME, load_cell
from kvrules.diagnostics import KvrulesUsageError
from kvrules.facts.extract import extract_cell
from kvrules.facts.model import CellFacts

RANK_SELECTOR = re.compile(r"^rank([0-9]+)$")
GLOB_CHARS = set("*?[")


@dataclass(frozen=True)
class Edit:
    """One change to the copied campaign (see module docstring)."""

    file: str
    pointer: str = ""
    value: Any = None
    delete: bool = False
    text: str | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Edit:
        return cls(file=data["file"], pointer=data.get("pointer", ""),
                   value=data.get("value"), delete=bool(data.get("delete", False)),
                   text=data.get("text"))

    def to_dict(self) -> dict[str, Any]:
        if self.text is not None:
            return {"file": self.file, "text": self.text}
        if self.delete:
            return {"file": self.file, "pointer": self.pointer, "delete": True}
        return {"file": self.file, "pointer": self.pointer, "value": self.value}


@dataclass(frozen=True)
class Overlay:
    """A campaign folder, the cell to test (None: its only cell) and the edits."""

    campaign: Path
    cell_id: str | None
    edits: tuple[Edit, ...]


class EditError(ValueError):
    """An edit that cannot be applied (no such file, pointer or list index)."""


def overlay_cell(overlay: Overlay) -> CellFacts:
    """The facts the extractor reads from the edited copy of the campaign."""
    if not (overlay.campaign / PLAN_NAME).is_file() and not (
            overlay.campaign / CELLS_DIR).is_dir():
        raise KvrulesUsageError(f"no campaign folder {overlay.campaign}")
    with tempfile.TemporaryDirectory(prefix="kvrules-case-") as tmp:
        root = Path(tmp) / overlay.campaign.name
        shutil.copytree(overlay.campaign, root)
        refs = discover([str(root)])
        chosen = [r for r in refs if overlay.cell_id in (None, r.cell_id)]
        if len(chosen) != 1:
            names = ", ".join(r.cell_id for r in refs) or "none"
            raise EditError(f"needs exactly one cell of {overlay.campaign.name} (cells: "
                            f"{names}); use 'cell:'")
        cell_dir = chosen[0].cell_dir
        for edit in overlay.edits:
            apply_edit(root, cell_dir, edit)
        again = [r for r in discover([str(root)]) if r.cell_id == chosen[0].cell_id]
        if not again:
            raise EditError(f"the edits removed cell {chosen[0].cell_id}")
        return extract_cell(load_cell(again[0]))


def select(root: Path, cell_dir: Path, selector: str) -> list[Path]:
    """The files an edit's ``file`` names (see module docstring)."""
    if selector == "plan":
        return [root / PLAN_NAME]
    if selector == "provenance":
        return sorted((cell_dir / RAW_DIR).rglob(PROVENANCE_NAME))
    rank = RANK_SELECTOR.match(selector)
    if rank or selector == "ranks":
        ranks = rank_files(cell_dir)
        return [p for n, p in ranks if not rank or n == int(rank.group(1))]
    if GLOB_CHARS & set(selector):
        return sorted(p for p in root.glob(selector) if p.is_file())
    return [root / selector]


def rank_files(cell_dir: Path) -> list[tuple[int, Path]]:
    """(dp rank, path) of each rank artifact below the cell's ``raw/`` folder."""
    out = []
    for path in sorted((cell_dir / RAW_DIR).rglob("*.json")):
        data = _read(path)
        if isinstance(data, dict) and data.get("artifact_type", "rank") == "rank" \
                and "results" in data:
            dp = data.get("dp")
            out.append((dp.get("rank", 0) if isinstance(dp, dict) else 0, path))
    return out


def apply_edit(root: Path, cell_dir: Path, edit: Edit) -> None:
    """Apply one edit to every file it selects; selecting nothing is an error."""
    paths = select(root, cell_dir, edit.file)
    if not paths:
        raise EditError(f"edit of '{edit.file}': no such file in the campaign")
    for path in paths:
        if edit.text is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(edit.text, encoding="utf-8")
            continue
        if edit.delete and not edit.pointer:
            _remove(path)
            continue
        data = _read(path) if path.exists() else None
        data = set_pointer(data, edit.pointer, None if edit.delete else edit.value,
                           edit.delete)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=1), encoding="utf-8")


def _remove(path: Path) -> None:
    if not path.is_file():
        raise EditError(f"edit: no file {path.name} to delete")
    path.unlink()


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise EditError(f"{path.name} is not a JSON file: {exc}") from None


def _steps(pointer: str) -> list[str]:
    if pointer and not pointer.startswith("/"):
        raise EditError(f"'{pointer}' is not a JSON pointer (it starts with '/')")
    return [p.replace("~1", "/").replace("~0", "~") for p in pointer.split("/")[1:]]


def set_pointer(doc: Any, pointer: str, value: Any, delete: bool = False) -> Any:
    """``doc`` with ``value`` at ``pointer`` (or that member removed); returns the document."""
    steps = _steps(pointer)
    if not steps:
        return value
    node = doc
    for step in steps[:-1]:
        node = _child(node, step, pointer)
    last = steps[-1]
    if isinstance(node, list):
        _set_in_list(node, last, value, delete, pointer)
    elif isinstance(node, dict):
        if delete and last not in node:
            raise EditError(f"{pointer}: no such member to delete")
        if delete:
            del node[last]
        else:
            node[last] = value
    else:
        raise EditError(f"{pointer}: the parent is not an object or a list")
    return doc


def _child(node: Any, step: str, pointer: str) -> Any:
    if isinstance(node, dict) and step in node:
        return node[step]
    if isinstance(node, list) and step.isdigit() and int(step) < len(node):
        return node[int(step)]
    raise EditError(f"{pointer}: no member '{step}'")


def _set_in_list(node: list[Any], step: str, value: Any, delete: bool, pointer: str) -> None:
    if step == "-" and not delete:
        node.append(value)
        return
    if not step.isdigit() or int(step) >= len(node):
        raise EditError(f"{pointer}: no list index '{step}'")
    if delete:
        del node[int(step)]
    else:
        node[int(step)] = value
