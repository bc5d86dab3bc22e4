"""The formal rows of spec 6.2 as an Arrow table, and how they go to and from files.

Shared by aggregation (which makes rows), publication (which merges them) and verification
(which checks a published table), so the three agree on one column list and one key. Every
write is atomic (temporary file in the target folder, then ``os.replace``) so a reader never
sees half a file, and every file is byte-deterministic for the same rows.
"""
from __future__ import annotations

from dataclasses import dataclass

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from kvrules.diagnostics import KvrulesUsageError
from kvrules.verdicts.model import KVRULES_VERSION, PolicyIdentity

DENSE_REGIME = "skip:dense_model_content_insensitive"

_INT, _STR = pa.int64(), pa.string()
SCHEMA = pa.schema([
    ("cell_id", _STR), ("model_path", _STR), ("system", _STR), ("backend", _STR),
    ("backend_version", _STR), ("parallel_strategy", _STR),
    ("tp", _INT), ("pp", _INT), ("dp", _INT), ("moe_tp", _INT), ("moe_ep", _INT), ("cp", _INT),
    ("model_config_sha256", _STR), ("execution_profile", _STR), ("engram_residency", _STR),
    ("input_modality", _STR), ("workload_kind", _STR),
    ("batch_size", _INT), ("total_prefill_tokens", _INT), ("total_kv_read_tokens", _INT),
    ("kv_seed_regime", _STR), ("latency_ms", pa.float64()),
    ("source_plan_sha256", _STR), ("collector_attempt_id", _STR), ("runtime_run_id", _STR),
    ("runtime_grid_digest", _STR),
])
"""Exactly the columns of spec 6.2, in that order; no column is nullable in practice."""

COLUMNS: tuple[str, ...] = tuple(SCHEMA.names)
RUN_IDENTITY: tuple[str, ...] = ("source_plan_sha256", "collector_attempt_id",
                                 "runtime_run_id", "runtime_grid_digest")
"""Which run produced a cell's rows: plan, collector attempt and runtime run."""
KEY_COLUMNS: tuple[str, ...] = tuple(
    c for c in COLUMNS if c not in ("kv_seed_regime", "latency_ms", *RUN_IDENTITY))
"""The row key of spec 6.3: every column except the regime, the latency and the run identity."""
ORDER: tuple[str, ...] = tuple(dict.fromkeys((
    "cell_id", "workload_kind", "batch_size", "total_prefill_tokens", "total_kv_read_tokens",
    *COLUMNS)))
"""Row order of every table kvrules writes: by cell, then coordinate, then every other column."""
METADATA_KEY = b"kvrules"
"""Parquet schema-metadata key of a rows file: the policy that classified the rows."""

Row = dict[str, Any]


@dataclass(frozen=True)
class Rows:
    """Formal rows and the identity of the policy whose verdicts gave their ``kv_seed_regime``."""

    table: pa.Table
    policy: PolicyIdentity

    @classmethod
    def from_pylist(cls, rows: list[Row], policy: PolicyIdentity) -> "Rows":
        return cls(sorted_table(pa.Table.from_pylist(rows, schema=SCHEMA)), policy)


def row_key(row: Row) -> tuple[Any, ...]:
    return tuple(row[c] for c in KEY_COLUMNS)


def run_identity(row: Row) -> tuple[Any, ...]:
    return tuple(row[c] for c in RUN_IDENTITY)


def sorted_table(table: pa.Table) -> pa.Table:
    """The table in the one deterministic row order (:data:`ORDER`)."""
    return table.sort_by([(c, "ascending") for c in ORDER]) if table.num_rows else table


def parquet_bytes(table: pa.Table) -> bytes:
    """The table as parquet bytes (written in memory so the digest is known before renaming)."""
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd")
    return bytes(sink.getvalue().to_pybytes())


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a synced temporary file and ``os.replace``."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)


def write_rows(rows: Rows, path: Path) -> None:
    """Write rows as ``.parquet`` (with the policy record) or ``.csv``, atomically.

    Raises KvrulesUsageError for another extension or a folder that cannot be written.
    """
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        meta = {METADATA_KEY: json.dumps({"kvrules_version": KVRULES_VERSION,
                                          "policy": rows.policy.to_dict()}, sort_keys=True)}
        data = parquet_bytes(rows.table.replace_schema_metadata(meta))
    elif suffix == ".csv":
        sink = pa.BufferOutputStream()
        pacsv.write_csv(rows.table, sink)
        data = bytes(sink.getvalue().to_pybytes())
    else:
        raise KvrulesUsageError(f"{path}: the rows file must end in .parquet or .csv")
    try:
        atomic_write(path, data)
    except OSError as exc:
        raise KvrulesUsageError(f"cannot write {path}: {exc.strerror or exc}") from exc


def read_table(path: Path) -> pa.Table:
    """A parquet file with exactly the formal columns; KvrulesUsageError naming the file."""
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowException) as exc:
        raise KvrulesUsageError(f"{path}: not a readable parquet file ({exc})") from exc
    if tuple(table.column_names) != COLUMNS:
        raise KvrulesUsageError(f"{path}: columns {list(table.column_names)} are not the "
                                f"formal row columns {list(COLUMNS)}")
    try:
        return table.cast(SCHEMA.with_metadata(table.schema.metadata))
    except (pa.ArrowException, ValueError) as exc:
        raise KvrulesUsageError(f"{path}: column types differ from the formal rows "
                                f"({exc})") from exc


def read_rows(path: Path) -> Rows:
    """A rows file written by ``kvrules aggregate`` (parquet only: CSV has no policy record)."""
    if path.suffix.lower() == ".csv":
        raise KvrulesUsageError(f"{path}: publish reads the .parquet rows of kvrules aggregate; "
                                "a CSV file does not record the policy that classified it")
    if not path.is_file():
        raise KvrulesUsageError(f"{path}: no such file")
    table = read_table(path)
    raw = (table.schema.metadata or {}).get(METADATA_KEY)
    try:
        identity = _policy_record(raw)
    except (ValueError, KeyError, TypeError) as exc:
        raise KvrulesUsageError(f"{path}: no kvrules policy record in the parquet metadata; "
                                "write the rows with kvrules aggregate") from exc
    return Rows(table.replace_schema_metadata(None), identity)


def _policy_record(raw: bytes | None) -> PolicyIdentity:
    """The policy identity kvrules aggregate wrote into the metadata (KeyError: none there)."""
    if raw is None:
        raise KeyError(METADATA_KEY)
    policy: dict[str, Any] = json.loads(raw)["policy"]
    return PolicyIdentity(policy["name"], policy["version"], policy["digest"],
                          dict(policy.get("parameters", {})))
