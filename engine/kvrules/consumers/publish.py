"""Publication (spec 6.3): merge formal rows into ``<root>/<system>/<backend>/<version>/``.

Under one file lock per root, every target table is read and verified, the merge is computed
in memory, and only when no table has a problem are the tables written: the parquet, then
the commit record, each through a temporary file and ``os.replace``. A failure while writing
puts the old parquet back, so a reader never sees a half-written table and a refused publish
leaves every byte as it was.

Merging is per cell. A cell not yet in the table is added. A cell already published under
another run identity is skipped whole (first publisher wins) and reported. Under the same
run identity, a row whose key is already published must be identical (a new key is added);
a different row, another ``kv_seed_regime`` included, is the ``conflicting FPM database row``
error: a cell published with the legacy classification is never upgraded in place.
"""
from __future__ import annotations

from dataclasses import dataclass

import json
import os
import shutil
from itertools import groupby
from pathlib import Path
from typing import Any, Callable, Iterable

import filelock
import pyarrow as pa

from kvrules.consumers import codes
from kvrules.consumers.marker import MARKER, marker, read_marker
from kvrules.consumers.merge import Merge, merge_cells
from kvrules.consumers.rows import (DENSE_REGIME, RUN_IDENTITY, SCHEMA, Row, Rows, atomic_write,
                                    parquet_bytes, read_rows, row_key, sha256_hex,
                                    sorted_table)
from kvrules.consumers.verify import (PARQUET_NAME, RECORD_NAME, SCHEMA_NAME, SCHEMA_VERSION,
                                      inspect, known_policy_versions)
from kvrules.diagnostics import Diagnostic, KvrulesUsageError, evidence_error
from kvrules.verdicts.model import PolicyIdentity

LOCK_NAME = ".kvrules-publish.lock"
"""The file lock of a publication root, held for the whole read-merge-write."""
TABLE_PARTS = ("system", "backend", "backend_version")


@dataclass(frozen=True)
class TablePublication:
    """What a publish did (or would have done) to one table."""

    table: str
    merge: Merge
    row_count: int
    classification: dict[str, Any] | None
    written: bool

    def to_dict(self) -> dict[str, Any]:
        return {"table": self.table, **self.merge.to_dict(), "row_count": self.row_count,
                MARKER: self.classification, "written": self.written}


@dataclass(frozen=True)
class Publication:
    """The outcome of one publish: every table touched, or the errors that stopped it."""

    root: str
    policy: PolicyIdentity
    tables: tuple[TablePublication, ...]
    errors: tuple[Diagnostic, ...]

    @property
    def exit_code(self) -> int:
        """0 when the rows were published (skipped cells included), 1 when refused."""
        return 1 if self.errors else 0

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "publication", "root": self.root, "policy": self.policy.to_dict(),
                "published": not self.errors, "tables": [t.to_dict() for t in self.tables],
                "errors": [e.to_dict() for e in self.errors]}


def _acquire(lock: filelock.FileLock, timeout: float,
             on_wait: Callable[[str], None] | None) -> None:
    """Take ``lock`` at once or, after telling ``on_wait``, within ``timeout`` s."""
    try:
        lock.acquire(timeout=0)
    except filelock.Timeout:
        if on_wait is not None:
            on_wait(f"{Path(lock.lock_file).parent}: waiting up to {timeout:g} s for "
                    f"{LOCK_NAME}, held by another publisher")
        lock.acquire(timeout=timeout)


def publish_file(path: str | Path, root: str | Path, policies: Iterable[Any] = (),
                 timeout: float = 600.0, on_wait: Callable[[str], None] | None = None
                 ) -> Publication:
    """Publish a rows file written by ``kvrules aggregate`` (``kvrules publish``)."""
    return publish(read_rows(Path(path)), root, policies, timeout, on_wait)


def publish(rows: Rows, root: str | Path, policies: Iterable[Any] = (),
            timeout: float = 600.0, on_wait: Callable[[str], None] | None = None
            ) -> Publication:
    """Merge ``rows`` into the tables under ``root``; nothing is written unless every table
    merges cleanly (no conflict, no damaged table, no policy mismatch).

    ``policies`` (Policy objects or version strings) are known besides the shipped policy;
    the rows' policy must be one of them. Raises KvrulesUsageError for unusable input (unknown
    policy, malformed rows, an unwritable root, a lock not obtained within ``timeout`` s).
    ``on_wait`` hears, once, that the lock is held and publishing waits for it.
    """
    known = known_policy_versions(policies)
    incoming = _checked_rows(rows, known)
    base = Path(root)
    try:
        base.mkdir(parents=True, exist_ok=True)
        lock = filelock.FileLock(str(base / LOCK_NAME))
        _acquire(lock, timeout, on_wait)
        try:
            plans = [_plan(base, parts, group, rows.policy.version, known)
                     for parts, group in _by_table(incoming)]
            errors = tuple(e for plan in plans for e in plan.errors)
            if not errors:
                for plan in plans:
                    plan.commit()
        finally:
            lock.release()
    except filelock.Timeout as exc:
        raise KvrulesUsageError(f"{root}: another publisher held {LOCK_NAME} for {timeout:g} s; "
                                "nothing was written (try again, or --lock-timeout)") from exc
    except OSError as exc:
        raise KvrulesUsageError(f"cannot publish into {root}: {exc.strerror or exc} "
                                f"({exc.filename or root})") from exc
    return Publication(str(root), rows.policy, tuple(p.result(not errors) for p in plans),
                       errors)


def _checked_rows(rows: Rows, known: frozenset[str]) -> list[Row]:
    """The rows as dicts, refusing an unknown policy, unsafe path parts and duplicate keys."""
    if rows.policy.version not in known:
        raise KvrulesUsageError(f"the rows were classified by policy {rows.policy.version!r}, "
                                f"which is not known (known: {', '.join(sorted(known))}); "
                                "load it with --rules")
    data: list[Row] = rows.table.to_pylist()
    seen: dict[tuple[Any, ...], int] = {}
    runs: dict[str, tuple[Any, ...]] = {}
    for index, row in enumerate(data):
        for part in TABLE_PARTS:
            _safe_part(part, row[part], index)
        if seen.setdefault(row_key(row), index) != index:
            raise KvrulesUsageError(f"rows {seen[row_key(row)]} and {index} share one row key")
        run = tuple(row[c] for c in RUN_IDENTITY)
        if runs.setdefault(row["cell_id"], run) != run:
            raise KvrulesUsageError(f"cell {row['cell_id']} has rows of two run identities")
    return data


def _safe_part(column: str, value: Any, index: int) -> None:
    if (not isinstance(value, str) or value in ("", ".", "..") or "/" in value
            or "\\" in value or "\0" in value):
        raise KvrulesUsageError(f"row {index}: {column} {value!r} cannot name a folder")


def _by_table(rows: list[Row]) -> list[tuple[tuple[str, ...], list[Row]]]:
    def parts(row: Row) -> tuple[str, ...]:
        return tuple(row[p] for p in TABLE_PARTS)
    return [(k, list(g)) for k, g in groupby(sorted(rows, key=parts), key=parts)]


@dataclass
class _TablePlan:
    """One table's merge, computed under the lock before anything is written."""

    folder: Path
    rel: str
    parts: tuple[str, ...]
    merge: Merge
    rows: list[Row]
    classification: dict[str, Any] | None
    errors: list[Diagnostic]

    def commit(self) -> None:
        if self.merge.rows_added:
            _write_table(self.folder, self.parts, self.rows, self.classification)

    def result(self, written: bool) -> TablePublication:
        return TablePublication(self.rel, self.merge, len(self.rows), self.classification,
                                written and self.merge.rows_added > 0)


def _plan(base: Path, parts: tuple[str, ...], incoming: list[Row], version: str,
          known: frozenset[str]) -> _TablePlan:
    folder = base.joinpath(*parts)
    rel = "/".join(parts)
    existing: list[Row] = []
    record: dict[str, Any] = {}
    errors: list[Diagnostic] = []
    if (folder / RECORD_NAME).exists() or (folder / PARQUET_NAME).exists():
        found = inspect(folder, base, known)
        errors += found.check.problems
        existing = found.table.to_pylist() if found.table is not None else []
        record = found.record or {}
    merge = merge_cells(existing, incoming, f"{rel}/{PARQUET_NAME}")
    errors += merge.errors
    merged = existing + list(merge.added)
    classification, problem = _classification(record, merged, merge, version, rel)
    errors += problem
    return _TablePlan(folder, rel, parts, merge, merged, classification, errors)


def _classification(record: dict[str, Any], merged: list[Row], merge: Merge, version: str,
                    rel: str) -> tuple[dict[str, Any] | None, list[Diagnostic]]:
    """The marker over the merged rows; the policy stays the one already recorded."""
    published_policy, _ = read_marker(record)
    adds_dense = any(r["kv_seed_regime"] == DENSE_REGIME for r in merge.added)
    if adds_dense and published_policy not in (None, version):
        return None, [evidence_error(
            codes.MARKER_POLICY_MISMATCH, f"the table's dense rows were classified by policy "
            f"{published_policy}, these by {version}; publish into a fresh root",
            f"{rel}/{RECORD_NAME}", f"/{MARKER}/policy")]
    dense = [r["cell_id"] for r in merged if r["kv_seed_regime"] == DENSE_REGIME]
    return marker(published_policy or version, dense), []


def _write_table(folder: Path, parts: tuple[str, ...], rows: list[Row],
                 classification: dict[str, Any] | None) -> None:
    """Write the parquet then the commit record; put the old parquet back on any failure."""
    table = sorted_table(pa.Table.from_pylist(rows, schema=SCHEMA))
    data = parquet_bytes(table)
    record = _record(table, data, parts, classification)
    folder.mkdir(parents=True, exist_ok=True)
    parquet = folder / PARQUET_NAME
    backup = folder / f".{PARQUET_NAME}.{os.getpid()}.bak"
    if parquet.exists():
        _keep(parquet, backup)
    try:
        atomic_write(parquet, data)
        atomic_write(folder / RECORD_NAME, record)
    except BaseException:
        if backup.exists():
            os.replace(backup, parquet)
        else:
            parquet.unlink(missing_ok=True)
        raise
    finally:
        backup.unlink(missing_ok=True)


def _keep(parquet: Path, backup: Path) -> None:
    backup.unlink(missing_ok=True)
    try:
        os.link(parquet, backup)
    except OSError:
        shutil.copyfile(parquet, backup)


def _record(table: pa.Table, data: bytes, parts: tuple[str, ...],
            classification: dict[str, Any] | None) -> bytes:
    record: dict[str, Any] = {
        "schema_name": SCHEMA_NAME, "schema_version": SCHEMA_VERSION,
        "row_count": table.num_rows, "parquet_sha256": sha256_hex(data),
        **dict(zip(TABLE_PARTS, parts)),
        "source_plan_sha256": sorted(set(table.column("source_plan_sha256").to_pylist())),
        "collector_attempt_ids": sorted(set(table.column("collector_attempt_id").to_pylist()))}
    if classification is not None:
        record[MARKER] = classification
    return (json.dumps(record, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
