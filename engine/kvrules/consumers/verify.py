"""Verification of published tables (spec 6.3): does each commit record vouch for its table?

A table is ``<root>/<system>/<backend>/<backend_version>/fpm_forward_perf.parquet`` plus its
commit record ``fpm_forward_perf.metadata.json``. Every failure is a Diagnostic naming the
record (or the parquet) and a JSON pointer into it; all failures of a table are reported, not
only the first. Publication runs the same checks on an existing table before merging into it,
so a damaged table is never built upon.
"""
from __future__ import annotations

from dataclasses import dataclass

import json
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable

import pyarrow as pa

from kvrules import api
from kvrules.consumers import codes
from kvrules.consumers.marker import marker_problems
from kvrules.consumers.rows import DENSE_REGIME, read_table, row_key, sha256_hex
from kvrules.diagnostics import Diagnostic, KvrulesUsageError, evidence_error, sort_diagnostics

PARQUET_NAME = "fpm_forward_perf.parquet"
RECORD_NAME = "fpm_forward_perf.metadata.json"
SCHEMA_NAME = "aic_fpm_forward_perf"
SCHEMA_VERSION = 7
HISTORICAL = ("schema_version 6 is historical and cannot be finalized: use a fresh output "
              "directory")


@lru_cache(maxsize=1)
def shipped_policy_version() -> str:
    """The version of the policy shipped with kvrules (always a known policy)."""
    return str(api.load_policy().identity.version)


def known_policy_versions(policies: Iterable[Any] = ()) -> frozenset[str]:
    """The shipped policy's version plus those of the policies (or version strings) given."""
    extra = {p if isinstance(p, str) else p.identity.version for p in policies}
    return frozenset({shipped_policy_version(), *extra})


@dataclass(frozen=True)
class TableCheck:
    """The verdict on one published table (``table`` relative to the verified folder)."""

    table: str
    row_count: int | None
    dense_cells: tuple[str, ...]
    problems: tuple[Diagnostic, ...]

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {"table": self.table, "ok": self.ok, "row_count": self.row_count,
                "dense_cells": list(self.dense_cells),
                "problems": [p.to_dict() for p in self.problems]}


@dataclass(frozen=True)
class Verification:
    """Every table found under a folder and its check."""

    root: str
    tables: tuple[TableCheck, ...]

    @property
    def exit_code(self) -> int:
        """0 when every table verifies, 1 otherwise."""
        return 0 if all(t.ok for t in self.tables) else 1

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "verification", "root": self.root, "ok": self.exit_code == 0,
                "tables": [t.to_dict() for t in self.tables]}


@dataclass(frozen=True)
class Inspection:
    """A table as read from disk: its check, its rows and its commit record when readable."""

    check: TableCheck
    table: pa.Table | None
    record: dict[str, Any] | None


def verify(root: str | Path, policies: Iterable[Any] = ()) -> Verification:
    """Check every table under ``root`` (a publication root or one table folder).

    ``policies`` (Policy objects or version strings) are known besides the shipped policy.
    Raises KvrulesUsageError when ``root`` is missing or holds no table.
    """
    base = Path(root)
    if not base.is_dir():
        raise KvrulesUsageError(f"{root}: no such directory")
    folders = sorted({p.parent for name in (PARQUET_NAME, RECORD_NAME)
                      for p in base.rglob(name)})
    if not folders:
        raise KvrulesUsageError(f"{root}: no published table ({RECORD_NAME}) below it")
    known = known_policy_versions(policies)
    return Verification(str(root), tuple(inspect(f, base, known).check for f in folders))


def inspect(folder: Path, base: Path, known: frozenset[str]) -> Inspection:
    """Read one table folder and run every check of spec 6.3 on it."""
    rel = folder.relative_to(base).as_posix()
    prefix = "" if rel == "." else rel + "/"
    problems = _Problems(prefix + RECORD_NAME)
    record = _read_record(folder, problems, prefix)
    table = None
    if record is not None and _schema_ok(record, problems):
        table = _read_parquet(folder, record, problems, prefix)
    if table is not None and record is not None:
        _check_rows(table, record, folder, problems, prefix + PARQUET_NAME)
    dense = _dense_cells(table)
    if table is not None and record is not None:
        marker_problems(record, dense, known, problems.add)
    rows = table.num_rows if table is not None else None
    check = TableCheck(rel, rows, tuple(dense), tuple(sort_diagnostics(problems.items)))
    return Inspection(check, table, record)


class _Problems:
    """Collects diagnostics of one table, by default located in its commit record."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.items: list[Diagnostic] = []

    def add(self, code: str, message: str, pointer: str = "", file: str | None = None) -> None:
        self.items.append(evidence_error(code, message, file or self.file, pointer))


def _read_record(folder: Path, problems: _Problems, prefix: str) -> dict[str, Any] | None:
    path = folder / RECORD_NAME
    if not path.exists():
        problems.add(codes.TABLE_UNCOMMITTED, f"{PARQUET_NAME} has no commit record "
                     f"{RECORD_NAME} (an interrupted publish?)", file=prefix + PARQUET_NAME)
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        problems.add(codes.TABLE_RECORD_INVALID, f"the commit record is not readable JSON: {exc}")
        return None
    if not isinstance(data, dict):
        problems.add(codes.TABLE_RECORD_INVALID, "the commit record is not a JSON object")
        return None
    return data


def _schema_ok(record: dict[str, Any], problems: _Problems) -> bool:
    if record.get("schema_name") != SCHEMA_NAME:
        problems.add(codes.TABLE_RECORD_INVALID, f"schema_name is "
                     f"{json.dumps(record.get('schema_name'))}, expected {SCHEMA_NAME}",
                     "/schema_name")
        return False
    version = record.get("schema_version")
    if version == 6:
        problems.add(codes.TABLE_SCHEMA_HISTORICAL, HISTORICAL, "/schema_version")
        return False
    if version != SCHEMA_VERSION:
        problems.add(codes.TABLE_SCHEMA_UNSUPPORTED, f"schema_version {json.dumps(version)} "
                     f"is not supported (kvrules writes and reads {SCHEMA_VERSION})",
                     "/schema_version")
        return False
    return True


def _read_parquet(folder: Path, record: dict[str, Any], problems: _Problems,
                  prefix: str) -> pa.Table | None:
    path = folder / PARQUET_NAME
    try:
        data = path.read_bytes()
    except OSError as exc:
        problems.add(codes.TABLE_PARQUET_MISSING, f"{PARQUET_NAME} cannot be read: "
                     f"{exc.strerror or exc}", "/parquet_sha256")
        return None
    digest = sha256_hex(data)
    if record.get("parquet_sha256") != digest:
        problems.add(codes.TABLE_DIGEST_MISMATCH, f"{PARQUET_NAME} has sha256 {digest}, the "
                     f"commit record says {json.dumps(record.get('parquet_sha256'))}",
                     "/parquet_sha256")
    try:
        table = read_table(path)
    except KvrulesUsageError as exc:
        problems.add(codes.TABLE_PARQUET_UNREADABLE, exc.message.replace(str(path), PARQUET_NAME),
                     file=prefix + PARQUET_NAME)
        return None
    if record.get("row_count") != table.num_rows:
        problems.add(codes.TABLE_ROW_COUNT_MISMATCH, f"{PARQUET_NAME} has {table.num_rows} rows, "
                     f"the commit record says {json.dumps(record.get('row_count'))}", "/row_count")
    return table


def _check_rows(table: pa.Table, record: dict[str, Any], folder: Path, problems: _Problems,
                parquet: str) -> None:
    """The record's identity and lists against the rows and the folder path; unique keys."""
    parts = folder.resolve().parts[-3:]
    for field, part in zip(("system", "backend", "backend_version"), parts):
        values = sorted(set(table.column(field).to_pylist()))
        if record.get(field) != part or values not in ([], [part]):
            problems.add(codes.TABLE_RECORD_MISMATCH, f"{field}: the commit record says "
                         f"{json.dumps(record.get(field))}, the folder {part!r}, the rows "
                         f"{values}", f"/{field}")
    for field, column in (("source_plan_sha256", "source_plan_sha256"),
                          ("collector_attempt_ids", "collector_attempt_id")):
        values = sorted(set(table.column(column).to_pylist()))
        if record.get(field) != values:
            problems.add(codes.TABLE_RECORD_MISMATCH, f"{field} must list the rows' distinct "
                         f"{column} values {values}", f"/{field}")
    seen: set[tuple[Any, ...]] = set()
    for index, row in enumerate(table.to_pylist()):
        key = row_key(row)
        if key in seen:
            problems.add(codes.TABLE_DUPLICATE_KEY, f"row {index} repeats the key of an "
                         f"earlier row (cell {row['cell_id']})", f"/{index}", parquet)
        seen.add(key)


def _dense_cells(table: pa.Table | None) -> list[str]:
    """Sorted cells with at least one ``skip:dense_model_content_insensitive`` row."""
    if table is None:
        return []
    rows = zip(table.column("cell_id").to_pylist(), table.column("kv_seed_regime").to_pylist())
    return sorted({cell for cell, regime in rows if regime == DENSE_REGIME})

