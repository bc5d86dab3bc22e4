"""Verdicts as a parquet dataset: one row per point, partitioned by campaign (hive layout).

Readable by pandas, polars and duckdb (``read_parquet('DIR/**/*.parquet', hive_partitioning=1)``).
The dataset is written into a temporary folder beside ``DIR`` and renamed into place, so a
reader never sees half a dataset. It holds a :data:`MARKER` file: a folder is replaced only
when it is empty or holds one (a dataset kvrules wrote), unless the caller says ``overwrite``,
so a rerun replaces its dataset and never someone's folder. pyarrow is imported only here.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterable, Iterator

from kvrules.diagnostics import KvrulesUsageError
from kvrules.verdicts.model import KVRULES_VERSION, CellVerdict

BATCH_CELLS = 256
"""Cells per record batch: memory stays flat however large the archive."""

MARKER = ".kvrules-dataset"
"""The file that says kvrules wrote a folder (hidden: pyarrow, duckdb and polars skip it)."""


def replaceable(folder: Path) -> bool:
    """Whether ``folder`` may be replaced without ``overwrite``: missing, empty, or a
    dataset kvrules wrote (nothing of anyone else's is lost)."""
    if (folder / MARKER).is_file():
        return True
    try:
        with os.scandir(folder) as entries:
            return next(entries, None) is None
    except (FileNotFoundError, NotADirectoryError):  # nothing there to lose
        return True
    except OSError:  # unreadable: not known to be ours
        return False


def _refuse(folder: Path) -> KvrulesUsageError:
    return KvrulesUsageError(f"{folder} is a folder kvrules did not write (no {MARKER} in it): "
                             "it is kept")


def _cannot_write(folder: Path, exc: OSError) -> KvrulesUsageError:
    return KvrulesUsageError(f"cannot write {folder}: {exc.strerror or exc}")


def _schema() -> Any:
    import pyarrow as pa
    return pa.schema([
        ("campaign", pa.string()), ("cell_id", pa.string()), ("workload_kind", pa.string()),
        ("cell_status", pa.string()), ("benchmark_id", pa.int64()), ("point_type", pa.string()),
        ("batch_size", pa.int64()), ("total_prefill_tokens", pa.int64()),
        ("total_kv_read_tokens", pa.int64()), ("native_regime", pa.string()),
        ("kv_seed_regime", pa.string()), ("eligible", pa.bool_()), ("status", pa.string()),
        ("error_codes", pa.list_(pa.string())), ("decided_by", pa.string())])


def _rows(cell: CellVerdict) -> Iterator[dict[str, Any]]:
    codes = sorted({e.code for e in cell.errors})
    for p in cell.points:
        yield {"campaign": cell.campaign, "cell_id": cell.cell_id,
               "workload_kind": cell.workload_kind, "cell_status": cell.status,
               "benchmark_id": p.benchmark_id, "point_type": p.point_type,
               "batch_size": p.batch_size, "total_prefill_tokens": p.total_prefill_tokens,
               "total_kv_read_tokens": p.total_kv_read_tokens,
               "native_regime": p.native_regime, "kv_seed_regime": p.kv_seed_regime,
               "eligible": p.eligible, "status": p.status, "error_codes": codes,
               "decided_by": p.decided_by}


def _batches(cells: Iterable[CellVerdict], schema: Any) -> Iterator[Any]:
    import pyarrow as pa
    rows: list[dict[str, Any]] = []
    for n, cell in enumerate(cells, start=1):
        rows.extend(_rows(cell))
        if n % BATCH_CELLS == 0 and rows:
            yield pa.RecordBatch.from_pylist(rows, schema=schema)
            rows = []
    if rows:
        yield pa.RecordBatch.from_pylist(rows, schema=schema)


def write_dataset(cells: Iterable[CellVerdict], folder: Path, overwrite: bool = False) -> None:
    """Write the points of ``cells`` under ``folder``, replacing it as a whole when it is
    :func:`replaceable` (or ``overwrite``); else, or when it cannot be written, raise
    KvrulesUsageError and leave nothing behind (no temporary nor old folder)."""
    import pyarrow.dataset as ds
    folder = Path(os.path.abspath(folder))
    if not (overwrite or replaceable(folder)):
        raise _refuse(folder)
    schema = _schema()
    try:
        tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}.",
                                    suffix=".tmp"))
    except OSError as exc:
        raise _cannot_write(folder, exc) from None
    try:
        ds.write_dataset(_batches(cells, schema), tmp, schema=schema, format="parquet",
                         partitioning=["campaign"], partitioning_flavor="hive",
                         existing_data_behavior="overwrite_or_ignore")
        (tmp / MARKER).write_text(f"written by kvrules {KVRULES_VERSION}\n", encoding="utf-8")
        if not (overwrite or replaceable(folder)):  # made meanwhile by someone else
            raise _refuse(folder)
        _replace(tmp, folder)
    except OSError as exc:
        raise _cannot_write(folder, exc) from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _replace(new: Path, folder: Path) -> None:
    """Rename ``new`` to ``folder``; an old dataset there is moved aside first and removed
    once the new one is in place, or moved back when it could not be."""
    old = None
    if os.path.lexists(folder):
        old = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}.", suffix=".old"))
    try:
        if old is not None:
            os.replace(folder, old / "dataset")
        try:
            os.replace(new, folder)
        except OSError:
            if old is not None and os.path.lexists(old / "dataset"):
                os.replace(old / "dataset", folder)
            raise
    finally:
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
