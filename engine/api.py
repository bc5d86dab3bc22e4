"""The embedding API: load a policy once, classify folders (or extracted facts), get reports.

The library never prints and never exits; the CLI is a thin layer over these functions.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from kvrules.verdicts.model import CellVerdict, PolicyIdentity, Report

ProgressFn = Callable[[int, int], None]
"""Called as ``progress(done_cells, total_cells)`` after each cell."""


def load_policy(rules: str | Path | None = None,
                parameters: dict[str, Any] | None = None) -> "Any":
    """Compile a policy directory (default: the shipped policy) into a ready classifier.

    Raises KvrulesUsageError (exit 2) with diagnostics when the rule files are invalid.
    """
    raise NotImplementedError  # filled in by the core (policy compiler + runtime)


def iter_classify(paths: Sequence[str], policy: Any = None, plan: str | None = None,
                  jobs: int = 1, progress: ProgressFn | None = None) -> Iterator[CellVerdict]:
    """Yield cell verdicts in input order, one cell in memory at a time."""
    raise NotImplementedError


def classify(paths: Sequence[str], policy: Any = None, plan: str | None = None,
             jobs: int = 1, progress: ProgressFn | None = None) -> Report:
    """Classify every cell under ``paths`` and return the whole report."""
    raise NotImplementedError
