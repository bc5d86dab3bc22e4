"""Verdicts as a parquet dataset: one row per point, partitioned by campaign (hive layout).

Readable by pandas, polars and duckdb (``read_parquet('DIR/**/*.parquet', hive_partitioning=1)``).
The dataset is written into a temporary folder beside ``DIR`` and renamed into place, so a
reader never sees half a dataset. pyarrow is imported only here.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterable, Iterator

from kvrules.verdicts.model import CellVerdict

BATCH_CELLS = 256
"""Cells per record batch: memory stays flat however large the archive."""


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


def write_dataset(cells: Iterable[CellVerdict], folder: Path) -> None:
    """Write the points of ``cells`` under ``folder`` (replaced as a whole when present)."""
    import pyarrow.dataset as ds
    schema = _schema()
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}.", suffix=".tmp"))
    try:
        ds.write_dataset(_batches(cells, schema), tmp, schema=schema, format="parquet",
                         partitioning=["campaign"], partitioning_flavor="hive",
                         existing_data_behavior="overwrite_or_ignore")
        _replace(tmp, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _replace(new: Path, folder: Path) -> None:
    """Rename ``new`` to ``folder``; an old dataset there is moved aside first, then removed."""
    old = None
    if folder.exists():
        old = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}.", suffix=".old"))
        os.replace(folder, old / "dataset")
    os.replace(new, folder)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
