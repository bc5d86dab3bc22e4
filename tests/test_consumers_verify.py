"""Verification (spec 6.3): every failure, each found by tampering with a real published table."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from consumer_helpers import (LEGACY, LLAMA, MOE, PARQUET, QWEN, RECORD, TABLE, edit, policy,
                              policy_copy, published, record, renamed, write_record)
from helpers import DENSE, EXAMPLES

from kvrules import api
from kvrules.consumers.rows import parquet_bytes, sha256_hex
from kvrules.consumers.verify import HISTORICAL, verify
from kvrules.diagnostics import KvrulesUsageError

REC, PAR = RECORD.as_posix(), PARQUET.as_posix()
MARK = "/kv_seed_classification"
VERSION = "dense_full_attention_v1"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A real table: a dense cell (marker) and an MoE cell (no dense rows)."""
    target = tmp_path / "root"
    published(target, [EXAMPLES / DENSE, EXAMPLES / MOE])
    return target


def _failures(root: Path, policies: tuple[Any, ...] = ()) -> list[tuple[str, str, str]]:
    result = verify(root, policies)
    (table,) = result.tables
    assert result.exit_code == (0 if table.ok else 1)
    return [(p.code, p.file, p.pointer) for p in table.problems]


def _tamper(root: Path, change: Callable[[dict[str, Any]], None]) -> None:
    data = record(root)
    change(data)
    write_record(root, data)


def _rewrite_parquet(root: Path, table: pa.Table, keep_record: bool = True) -> None:
    data = parquet_bytes(table)
    (root / PARQUET).write_bytes(data)
    if not keep_record:
        _tamper(root, lambda r: r.update(parquet_sha256=sha256_hex(data),
                                         row_count=table.num_rows))


def test_a_published_table_verifies(root: Path) -> None:
    result = verify(root)
    assert result.to_dict() == {"kind": "verification", "root": str(root), "ok": True,
                                "tables": [{"table": TABLE.as_posix(), "ok": True,
                                            "row_count": 4, "dense_cells": [LLAMA],
                                            "problems": []}]}
    assert verify(root / TABLE).exit_code == 0


def test_a_parquet_digest_that_does_not_match(root: Path) -> None:
    table = pq.read_table(root / PARQUET)
    latency = pa.array([v * 2 for v in table.column("latency_ms").to_pylist()])
    _rewrite_parquet(root, table.set_column(21, "latency_ms", latency))
    assert _failures(root) == [("table_digest_mismatch", REC, "/parquet_sha256")]


def test_a_row_count_that_does_not_match(root: Path) -> None:
    _tamper(root, lambda r: r.update(row_count=5))
    (problem,) = verify(root).tables[0].problems
    assert (problem.code, problem.pointer, problem.message) == (
        "table_row_count_mismatch", "/row_count",
        "fpm_forward_perf.parquet has 4 rows, the commit record says 5")


def test_schema_6_is_historical(root: Path) -> None:
    _tamper(root, lambda r: r.update(schema_version=6))
    (problem,) = verify(root).tables[0].problems
    assert (problem.code, problem.message) == ("table_schema_historical", HISTORICAL)
    assert "use a fresh output directory" in HISTORICAL


def test_another_schema_version_or_name_is_refused(root: Path) -> None:
    _tamper(root, lambda r: r.update(schema_version=8))
    assert _failures(root) == [("table_schema_unsupported", REC, "/schema_version")]
    _tamper(root, lambda r: r.update(schema_version=7, schema_name="something_else"))
    assert _failures(root) == [("table_record_invalid", REC, "/schema_name")]


def test_the_marker_missing_while_dense_rows_exist(root: Path) -> None:
    _tamper(root, lambda r: r.pop("kv_seed_classification"))
    (problem,) = verify(root).tables[0].problems
    assert (problem.code, problem.pointer) == ("marker_missing", MARK)
    assert LLAMA in problem.message


def test_the_marker_names_an_unknown_policy(root: Path) -> None:
    _tamper(root, lambda r: r.update(kv_seed_classification={"policy": "dense_v0",
                                                             "cells": [LLAMA]}))
    assert _failures(root) == [("marker_unknown_policy", REC, MARK + "/policy")]


def test_a_policy_the_caller_loads_is_known(tmp_path: Path, root: Path) -> None:
    rules = policy_copy(tmp_path)
    edit(rules / "policy.yaml", f"version: {VERSION}", "version: dense_v0")
    _tamper(root, lambda r: r.update(kv_seed_classification={"policy": "dense_v0",
                                                             "cells": [LLAMA]}))
    assert _failures(root, (api.load_policy(rules),)) == []
    assert _failures(root, ("dense_v0",)) == []


def test_the_marker_names_a_cell_without_dense_rows(root: Path) -> None:
    _tamper(root, lambda r: r.update(kv_seed_classification={"policy": VERSION,
                                                             "cells": [LLAMA, QWEN]}))
    assert _failures(root) == [("marker_extra_cell", REC, MARK + "/cells/1")]


def test_the_marker_is_empty_while_dense_rows_exist(root: Path) -> None:
    _tamper(root, lambda r: r.update(kv_seed_classification={"policy": VERSION, "cells": []}))
    assert _failures(root) == [("marker_empty", REC, MARK + "/cells")]


def test_the_marker_has_duplicates(root: Path) -> None:
    _tamper(root, lambda r: r.update(kv_seed_classification={"policy": VERSION,
                                                             "cells": [LLAMA, LLAMA]}))
    assert _failures(root) == [("marker_duplicate", REC, MARK + "/cells/0")]


def test_the_marker_misses_a_dense_cell_or_is_unsorted(tmp_path: Path) -> None:
    target = tmp_path / "two-dense"
    published(target, [EXAMPLES / DENSE, renamed(tmp_path, DENSE, "fpm-a")])
    _tamper(target, lambda r: r.update(kv_seed_classification={"policy": VERSION,
                                                               "cells": [LLAMA, "fpm-a"]}))
    assert _failures(target) == [("marker_unsorted", REC, MARK + "/cells")]
    _tamper(target, lambda r: r.update(kv_seed_classification={"policy": VERSION,
                                                               "cells": ["fpm-a"]}))
    assert _failures(target) == [("marker_missing_cell", REC, MARK + "/cells")]


def test_a_marker_without_dense_rows_or_of_the_wrong_shape(tmp_path: Path) -> None:
    target = tmp_path / "legacy"
    published(target, [EXAMPLES / LEGACY])
    _tamper(target, lambda r: r.update(kv_seed_classification={"policy": VERSION, "cells": []}))
    assert _failures(target) == [("marker_unexpected", REC, MARK)]
    _tamper(target, lambda r: r.update(kv_seed_classification=[LLAMA]))
    assert _failures(target) == [("marker_unexpected", REC, MARK),
                                 ("marker_invalid", REC, MARK)]


def test_a_parquet_without_commit_record(root: Path) -> None:
    (root / RECORD).unlink()
    assert _failures(root) == [("table_uncommitted", PAR, "")]


def test_a_commit_record_that_is_not_json(root: Path) -> None:
    (root / RECORD).write_text("{not json", encoding="utf-8")
    assert _failures(root) == [("table_record_invalid", REC, "")]


def test_a_commit_record_without_its_parquet(root: Path) -> None:
    (root / PARQUET).unlink()
    assert _failures(root) == [("table_parquet_missing", REC, "/parquet_sha256")]


def test_record_identity_and_lists_must_match_the_rows_and_folder(root: Path) -> None:
    _tamper(root, lambda r: r.update(system="b200_sxm", collector_attempt_ids=["x"]))
    assert _failures(root) == [("table_record_mismatch", REC, "/collector_attempt_ids"),
                               ("table_record_mismatch", REC, "/system")]


def test_duplicate_row_keys(root: Path) -> None:
    table = pq.read_table(root / PARQUET)
    _rewrite_parquet(root, pa.concat_tables([table, table.slice(3, 1)]), keep_record=False)
    assert _failures(root) == [("table_duplicate_key", PAR, "/4")]


def test_a_parquet_with_other_columns(root: Path) -> None:
    table = pq.read_table(root / PARQUET).drop_columns(["cp"])
    _rewrite_parquet(root, table, keep_record=False)
    assert _failures(root) == [("table_parquet_unreadable", PAR, "")]


def test_every_table_under_the_root_is_checked(tmp_path: Path, root: Path) -> None:
    other = root / "b200_sxm" / "vllm" / "0.11.2"
    other.mkdir(parents=True)
    for name in ("fpm_forward_perf.parquet", "fpm_forward_perf.metadata.json"):
        (other / name).write_bytes((root / TABLE / name).read_bytes())
    result = verify(root)
    assert [(t.table, t.ok) for t in result.tables] == [
        ("b200_sxm/vllm/0.11.2", False), (TABLE.as_posix(), True)]
    assert {p.code for p in result.tables[0].problems} == {"table_record_mismatch"}


def test_no_table_or_no_folder_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(KvrulesUsageError, match="no published table"):
        verify(tmp_path)
    with pytest.raises(KvrulesUsageError, match="no such directory"):
        verify(tmp_path / "missing")


def test_the_record_is_pretty_json_with_the_spec_key_order(root: Path) -> None:
    text = (root / RECORD).read_text(encoding="utf-8")
    assert list(json.loads(text)) == [
        "schema_name", "schema_version", "row_count", "parquet_sha256", "system", "backend",
        "backend_version", "source_plan_sha256", "collector_attempt_ids",
        "kv_seed_classification"]
    assert policy().identity.version == VERSION
