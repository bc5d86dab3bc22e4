"""Which policy an authoring command works on, from the paths a user (or pre-commit) gives.

* no path: ``./rules`` when it holds a policy (a checkout being edited), else the shipped
  policy, always by its real path so the output says which files were read;
* a folder: that policy folder;
* a file: the policy it belongs to, the nearest folder at or above it holding the
  ``policy:`` header (a case file in ``rules/tests/`` belongs to ``rules/``).
Several paths of one policy name it once, in the order first given.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Sequence

from kvrules.diagnostics import KvrulesUsageError
from kvrules.resources import rules_dir

_HEADER = re.compile(r"^policy\s*:", re.MULTILINE)
MAX_UP = 3
"""Folders above a file searched for its policy header."""


def holds_policy(folder: Path) -> bool:
    """Whether ``folder`` has a rule file with the top-level ``policy:`` header."""
    for path in sorted(folder.glob("*.y*ml")):
        try:
            if path.is_file() and _HEADER.search(path.read_text(encoding="utf-8",
                                                                errors="replace")):
                return True
        except OSError:
            continue
    return False


def shipped_policy() -> str:
    """The installed default policy, as a real path."""
    return str(rules_dir())


def _policy_of_file(path: Path) -> Path:
    folder = path.parent
    for _ in range(MAX_UP + 1):
        if holds_policy(folder):
            return folder
        if folder.parent == folder:
            break
        folder = folder.parent
    return path.parent  # no header found: check the file's own folder (it will say why)


def policy_folders(paths: Sequence[str], cwd: Path | None = None) -> list[str]:
    """The policy folders ``paths`` name, without repeats (see the module docstring)."""
    here = cwd or Path.cwd()
    if not paths:
        local = here / "rules"
        return [str(Path("rules"))] if local.is_dir() and holds_policy(local) \
            else [shipped_policy()]
    out: list[str] = []
    for given in paths:
        path = Path(given)
        full = path if path.is_absolute() else here / path
        if full.is_dir():
            folder = path
        elif full.is_file():
            folder = _policy_of_file(full)
            folder = Path(_relative(folder, here))
        else:
            raise KvrulesUsageError(f"no such file or folder: {given}")
        if str(folder) not in out:
            out.append(str(folder))
    return out


def _relative(folder: Path, here: Path) -> str:
    try:
        return str(folder.relative_to(here)) or "."
    except ValueError:
        return str(folder)
