"""Publication (spec 6.3) into real roots: layout, merge, first publisher wins, conflicts,
the marker, atomicity, the lock, and two publishing processes at once."""
from __future__ import annotations

import hashlib
import multiprocessing
from pathlib import Path

import filelock
import pyarrow.parquet as pq
import pytest
from consumer_helpers import (LLAMA, MOE, PARQUET, QWEN, SLIDING, TABLE, aggregated, edit,
                              policy, policy_copy, published, rank_file, record, renamed,
                              write_record)
from helpers import DENSE, EXAMPLES, copy_example, set_at, snapshot

from kvrules import api
from kvrules.consumers import publish as publish_module
from kvrules.consumers.merge import CONFLICT
from kvrules.consumers.publish import LOCK_NAME, publish, publish_file
from kvrules.consumers.rows import Rows, write_rows
from kvrules.consumers.verify import HISTORICAL, verify
from kvrules.diagnostics import KvrulesUsageError

DENSE_REGIME = "skip:dense_model_content_insensitive"
VERSION = "dense_full_attention_v1"


def _table(root: Path) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = pq.read_table(root / PARQUET).to_pylist()
    return rows


def test_a_first_publish_writes_the_table_and_its_commit_record(tmp_path: Path) -> None:
    root = tmp_path / "root"
    result = published(root, [EXAMPLES / DENSE, EXAMPLES / MOE])
    data = (root / PARQUET).read_bytes()
    assert record(root) == {
        "schema_name": "aic_fpm_forward_perf", "schema_version": 7, "row_count": 4,
        "parquet_sha256": hashlib.sha256(data).hexdigest(), "system": "h200_sxm",
        "backend": "vllm", "backend_version": "0.11.2",
        "source_plan_sha256": [
            "03c3fff22431bbd66ac47ddcdf85250012faaa915db1484c634a71c3cc5d1244",
            "f3e2491b0a3f2dab9c6165e4dfb28232028a8e9eb2c8ede7ecb2212a8d87f551"],
        "collector_attempt_ids": ["attempt-01-4b2dcbb3", "attempt-01-d26e7b23"],
        "kv_seed_classification": {"policy": VERSION, "cells": [LLAMA]}}
    (table,) = result.tables
    assert (table.table, table.merge.published, table.row_count, table.written) == (
        TABLE.as_posix(), (LLAMA, QWEN), 4, True)
    assert verify(root).exit_code == 0
    assert sorted(p.name for p in (root / TABLE).iterdir()) == [
        "fpm_forward_perf.metadata.json", "fpm_forward_perf.parquet"]


def test_publishing_the_same_rows_again_changes_no_byte(tmp_path: Path) -> None:
    root = tmp_path / "root"
    published(root, [EXAMPLES / DENSE])
    before = snapshot(root)
    again = published(root, [EXAMPLES / DENSE])
    assert (again.tables[0].merge.unchanged, again.tables[0].written) == ((LLAMA,), False)
    assert snapshot(root) == before


def test_legacy_then_dense_is_a_conflicting_row_and_the_table_stays_byte_identical(
        tmp_path: Path) -> None:
    root = tmp_path / "root"
    published(root, [EXAMPLES / DENSE], policy(dense=False))
    assert "kv_seed_classification" not in record(root)
    before = snapshot(root)
    result = publish(aggregated([EXAMPLES / DENSE]).rows, root)
    assert result.exit_code == 1
    assert [(e.code, e.file, e.pointer) for e in result.errors] == [
        ("conflicting_fpm_row", PARQUET.as_posix(), "/0/kv_seed_regime"),
        ("conflicting_fpm_row", PARQUET.as_posix(), "/1/kv_seed_regime")]
    assert all(e.message.startswith(CONFLICT + ": cell " + LLAMA) for e in result.errors)
    assert "kv_seed_regime published 'fake_fallback', new '" + DENSE_REGIME in \
        result.errors[0].message
    assert (result.tables[0].written, snapshot(root)) == (False, before)


def test_a_cell_published_by_another_run_is_skipped_whole_and_reported(tmp_path: Path) -> None:
    root = tmp_path / "root"
    published(root, [EXAMPLES / DENSE])
    rerun = copy_example(tmp_path, SLIDING)
    set_at(rank_file(rerun), "/run_id", "another-run")
    before = _table(root)
    result = published(root, [rerun, EXAMPLES / MOE])
    (table,) = result.tables
    (skipped,) = table.merge.skipped
    assert (skipped.cell_id, skipped.published_run["runtime_run_id"],
            skipped.incoming_run["runtime_run_id"]) == (
        LLAMA, "5e80a0d2753c11974d660ccd19964159", "another-run")
    assert table.merge.published == (QWEN,)
    assert [r for r in _table(root) if r["cell_id"] == LLAMA] == before


def test_merging_recomputes_the_marker_over_the_whole_table(tmp_path: Path) -> None:
    root = tmp_path / "root"
    published(root, [EXAMPLES / MOE])
    assert "kv_seed_classification" not in record(root)
    published(root, [renamed(tmp_path, DENSE, "fpm-z-dense")])
    published(root, [EXAMPLES / DENSE, renamed(tmp_path, SLIDING, "fpm-b-sliding")])
    assert record(root)["kv_seed_classification"] == {
        "policy": VERSION, "cells": [LLAMA, "fpm-z-dense"]}
    assert [r["cell_id"] for r in _table(root)] == [
        "fpm-b-sliding", "fpm-b-sliding", LLAMA, LLAMA, QWEN, QWEN, "fpm-z-dense", "fpm-z-dense"]
    assert record(root)["row_count"] == 8
    assert verify(root).exit_code == 0


def test_a_historical_schema_6_table_is_refused_byte_identical(tmp_path: Path) -> None:
    root = tmp_path / "root"
    published(root, [EXAMPLES / MOE])
    write_record(root, {**record(root), "schema_version": 6})
    before = snapshot(root)
    result = publish(aggregated([EXAMPLES / DENSE]).rows, root)
    assert [(e.code, e.message, e.pointer) for e in result.errors] == [
        ("table_schema_historical", HISTORICAL, "/schema_version")]
    assert HISTORICAL == ("schema_version 6 is historical and cannot be finalized: use a fresh "
                          "output directory")
    assert snapshot(root) == before


def test_a_damaged_table_is_never_built_upon(tmp_path: Path) -> None:
    root = tmp_path / "root"
    published(root, [EXAMPLES / MOE])
    write_record(root, {**record(root), "row_count": 3})
    before = snapshot(root)
    result = publish(aggregated([EXAMPLES / DENSE]).rows, root)
    assert [e.code for e in result.errors] == ["table_row_count_mismatch"]
    assert snapshot(root) == before


def _custom_policy(tmp_path: Path, version: str) -> api.Policy:
    rules = policy_copy(tmp_path, version)
    edit(rules / "policy.yaml", "version: dense_full_attention_v1", f"version: {version}")
    return api.load_policy(rules)


def test_rows_of_an_unknown_policy_are_refused_unless_the_caller_loads_it(tmp_path: Path) -> None:
    custom = _custom_policy(tmp_path, "dense_full_attention_v2")
    rows = aggregated([EXAMPLES / DENSE], custom).rows
    with pytest.raises(KvrulesUsageError, match="policy 'dense_full_attention_v2', which is "
                       "not known"):
        publish(rows, tmp_path / "root")
    assert not (tmp_path / "root" / TABLE).exists()
    publish(rows, tmp_path / "root", [custom])
    assert record(tmp_path / "root")["kv_seed_classification"]["policy"] == \
        "dense_full_attention_v2"


def test_dense_rows_of_another_policy_cannot_join_a_marked_table(tmp_path: Path) -> None:
    root = tmp_path / "root"
    published(root, [EXAMPLES / DENSE])
    custom = _custom_policy(tmp_path, "dense_full_attention_v2")
    before = snapshot(root)
    result = publish(aggregated([renamed(tmp_path, DENSE, "fpm-x")], custom).rows, root, [custom])
    assert [(e.code, e.pointer) for e in result.errors] == [
        ("marker_policy_mismatch", "/kv_seed_classification/policy")]
    assert snapshot(root) == before


def test_a_failed_commit_record_write_puts_the_old_table_back(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "root"
    published(root, [EXAMPLES / MOE])
    before = snapshot(root)
    real = publish_module.atomic_write

    def failing(path: Path, data: bytes) -> None:
        if path.name.endswith(".json"):
            raise OSError(28, "No space left on device")
        real(path, data)

    monkeypatch.setattr(publish_module, "atomic_write", failing)
    with pytest.raises(KvrulesUsageError, match="No space left on device"):
        publish(aggregated([EXAMPLES / DENSE]).rows, root)
    assert snapshot(root) == before


def test_a_held_lock_is_waited_for_then_a_usage_error(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    rows = aggregated([EXAMPLES / DENSE]).rows
    with filelock.FileLock(str(root / LOCK_NAME)):
        with pytest.raises(KvrulesUsageError, match="another publisher held"):
            publish(rows, root, timeout=0.2)
    assert not (root / TABLE).exists()


def test_a_rows_file_must_be_kvrules_parquet(tmp_path: Path) -> None:
    rows = aggregated([EXAMPLES / DENSE]).rows
    write_rows(rows, tmp_path / "rows.csv")
    with pytest.raises(KvrulesUsageError, match="a CSV file does not record the policy"):
        publish_file(tmp_path / "rows.csv", tmp_path / "root")
    pq.write_table(rows.table, tmp_path / "bare.parquet")
    with pytest.raises(KvrulesUsageError, match="no kvrules policy record"):
        publish_file(tmp_path / "bare.parquet", tmp_path / "root")
    (tmp_path / "junk.parquet").write_text("not parquet", encoding="utf-8")
    with pytest.raises(KvrulesUsageError, match="junk.parquet: not a readable parquet file"):
        publish_file(tmp_path / "junk.parquet", tmp_path / "root")


def test_a_system_that_cannot_name_a_folder_is_refused(tmp_path: Path) -> None:
    rows = aggregated([EXAMPLES / DENSE]).rows
    bad = rows.table.set_column(2, "system", [["../escape"] * rows.table.num_rows])
    with pytest.raises(KvrulesUsageError, match="system '../escape' cannot name a folder"):
        publish(Rows(bad, rows.policy), tmp_path / "root")


# --- two publishers in two processes -------------------------------------------------------

def _publisher(root: str, files: list[str], start: "multiprocessing.synchronize.Event") -> None:
    start.wait()
    for path in files:
        result = publish_file(path, root, timeout=60)
        assert result.exit_code == 0, result.errors


def test_two_concurrent_publishers_never_corrupt_the_table_and_lose_no_row(
        tmp_path: Path) -> None:
    files: dict[str, list[str]] = {"a": [], "b": []}
    for side in files:
        for i in range(6):
            campaign = renamed(tmp_path, DENSE if i % 2 else MOE, f"fpm-{side}{i}")
            path = tmp_path / f"{side}{i}.parquet"
            write_rows(aggregated([campaign]).rows, path)
            files[side].append(str(path))
    root = tmp_path / "root"
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Event()
    workers = [ctx.Process(target=_publisher, args=(str(root), files[s], start)) for s in files]
    for worker in workers:
        worker.start()
    start.set()
    for worker in workers:
        worker.join(120)
    assert [w.exitcode for w in workers] == [0, 0]
    cells = sorted({r["cell_id"] for r in _table(root)})
    assert cells == sorted(f"fpm-{s}{i}" for s in "ab" for i in range(6))
    assert record(root)["row_count"] == 24
    assert record(root)["kv_seed_classification"]["cells"] == sorted(
        f"fpm-{s}{i}" for s in "ab" for i in (1, 3, 5))
    assert verify(root).exit_code == 0
    assert [p.name for p in (root / TABLE).iterdir() if p.name.startswith(".")] == []
