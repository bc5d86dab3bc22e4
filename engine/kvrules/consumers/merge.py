"""The per-cell merge rules of publication (spec 6.3), as a pure function over rows.

Kept apart from the file handling in :mod:`kvrules.consumers.publish` so the rules read in
one place: first publisher wins per cell, identical rows are idempotent, and a different row
under a published key is a conflict that refuses the whole publish.
"""
from __future__ import annotations

from dataclasses import dataclass

from typing import Any

from kvrules.consumers.codes import CONFLICTING_ROW
from kvrules.consumers.rows import COLUMNS, RUN_IDENTITY, Row, row_key, run_identity
from kvrules.diagnostics import Diagnostic, evidence_error

CONFLICT = "conflicting FPM database row"
"""The spec's wording of the conflict; every conflict message starts with it."""


@dataclass(frozen=True)
class SkippedCell:
    """A cell already published under another run identity (first publisher wins)."""

    cell_id: str
    published_run: dict[str, str]
    incoming_run: dict[str, str]

    def to_dict(self) -> dict[str, Any]:
        return {"cell_id": self.cell_id, "published_run": self.published_run,
                "incoming_run": self.incoming_run}


@dataclass(frozen=True)
class Merge:
    """What merging incoming rows into a table's rows decided, per cell."""

    added: tuple[Row, ...]
    published: tuple[str, ...]
    unchanged: tuple[str, ...]
    skipped: tuple[SkippedCell, ...]
    errors: tuple[Diagnostic, ...]

    @property
    def rows_added(self) -> int:
        return len(self.added)

    def to_dict(self) -> dict[str, Any]:
        return {"rows_added": self.rows_added, "cells_published": list(self.published),
                "cells_unchanged": list(self.unchanged),
                "cells_skipped": [s.to_dict() for s in self.skipped]}


def merge_cells(existing: list[Row], incoming: list[Row], parquet: str) -> Merge:
    """Decide, cell by cell, what ``incoming`` adds to ``existing`` (``parquet`` names the
    published file in conflict diagnostics; pointers index its rows)."""
    published: dict[str, list[tuple[int, Row]]] = {}
    for index, row in enumerate(existing):
        published.setdefault(row["cell_id"], []).append((index, row))
    by_cell: dict[str, list[Row]] = {}
    for row in incoming:
        by_cell.setdefault(row["cell_id"], []).append(row)
    added: list[Row] = []
    cells: dict[str, list[str]] = {"published": [], "unchanged": []}
    skipped: list[SkippedCell] = []
    errors: list[Diagnostic] = []
    for cell_id in sorted(by_cell):
        rows, old = by_cell[cell_id], published.get(cell_id, [])
        if old and run_identity(old[0][1]) != run_identity(rows[0]):
            skipped.append(SkippedCell(cell_id, _run(old[0][1]), _run(rows[0])))
            continue
        new, conflicts = _same_run(old, rows, parquet)
        errors += conflicts
        added += new
        if not conflicts:
            cells["published" if new else "unchanged"].append(cell_id)
    return Merge(tuple(added), tuple(cells["published"]), tuple(cells["unchanged"]),
                 tuple(skipped), tuple(errors))


def _same_run(old: list[tuple[int, Row]], rows: list[Row],
              parquet: str) -> tuple[list[Row], list[Diagnostic]]:
    """New keys of a cell published by the same run, and a conflict per differing row."""
    by_key = {row_key(row): (index, row) for index, row in old}
    new, conflicts = [], []
    for row in rows:
        found = by_key.get(row_key(row))
        if found is None:
            new.append(row)
        elif found[1] != row:
            conflicts.append(_conflict(found[0], found[1], row, parquet))
    return new, conflicts


def _conflict(index: int, old: Row, row: Row, parquet: str) -> Diagnostic:
    differ = [c for c in COLUMNS if old[c] != row[c]]
    what = "; ".join(f"{c} published {old[c]!r}, new {row[c]!r}" for c in differ)
    return evidence_error(
        CONFLICTING_ROW, f"{CONFLICT}: cell {row['cell_id']} {row['workload_kind']} batch_size "
        f"{row['batch_size']}, total_prefill_tokens {row['total_prefill_tokens']}, "
        f"total_kv_read_tokens {row['total_kv_read_tokens']}: {what}. A published row is "
        "never changed in place (a cell published with the legacy classification is not "
        "upgraded): publish into a fresh root", parquet, f"/{index}/{differ[0]}")


def _run(row: Row) -> dict[str, str]:
    return {c: row[c] for c in RUN_IDENTITY}
