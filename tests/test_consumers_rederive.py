"""Re-deriving published cells with the classification they were published with (spec 6.3)."""
from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest
from consumer_helpers import (LLAMA, MOE, PARQUET, QWEN, RECORD, TABLE, edit, policy, policy_copy,
                              published, renamed)
from helpers import DENSE, EXAMPLES, snapshot

from kvrules import api
from kvrules.consumers.publish import publish
from kvrules.consumers.rederive import (classification_policies, published_classification,
                                       rederive, rederive_cells)
from kvrules.diagnostics import KvrulesUsageError

DENSE_REGIME = "skip:dense_model_content_insensitive"


def test_a_legacy_published_cell_rederives_legacy_and_republishes_unchanged(
        tmp_path: Path) -> None:
    root = tmp_path / "root"
    published(root, [EXAMPLES / DENSE], policy(dense=False))
    before = snapshot(root)
    again = rederive([str(EXAMPLES / DENSE)], root / TABLE, policy())
    assert [r["kv_seed_regime"] for r in again.rows.table.to_pylist()] == ["fake_fallback"] * 2
    assert again.rows.table.equals(pq.read_table(root / PARQUET))
    assert again.rows.policy.parameters == {"dense_synthetic_kv": False}
    result = publish(again.rows, root)
    assert (result.exit_code, result.tables[0].merge.unchanged) == (0, (LLAMA,))
    assert snapshot(root) == before


def test_each_cell_gets_its_own_published_classification(tmp_path: Path) -> None:
    root = tmp_path / "root"
    legacy_cell = renamed(tmp_path, DENSE, "fpm-legacy")
    published(root, [legacy_cell], policy(dense=False))
    published(root, [EXAMPLES / DENSE, EXAMPLES / MOE])
    dense, cells = published_classification(root / TABLE, policy())
    assert (dense, cells) == ({LLAMA}, {LLAMA, QWEN, "fpm-legacy"})
    verdicts = rederive_cells([str(EXAMPLES / DENSE), str(legacy_cell), str(EXAMPLES / MOE)],
                              root / TABLE, policy())
    assert {v.cell_id: v.points[0].kv_seed_regime for v in verdicts} == {
        LLAMA: DENSE_REGIME, "fpm-legacy": "fake_fallback",
        QWEN: "skip:moe_tp_balanced_by_construction"}
    rows = rederive([str(EXAMPLES / DENSE), str(legacy_cell), str(EXAMPLES / MOE)],
                    root / TABLE, policy()).rows
    assert rows.table.equals(pq.read_table(root / PARQUET))


def test_cells_that_the_table_does_not_hold_are_not_classified(tmp_path: Path) -> None:
    root = tmp_path / "root"
    published(root, [EXAMPLES / MOE])
    assert rederive_cells([str(EXAMPLES / DENSE)], root / TABLE, policy()) == []


def test_a_marker_of_another_policy_version_is_a_usage_error(tmp_path: Path) -> None:
    root = tmp_path / "root"
    published(root, [EXAMPLES / DENSE])
    rules = policy_copy(tmp_path)
    edit(rules / "policy.yaml", "version: dense_full_attention_v1", "version: other_v9")
    with pytest.raises(KvrulesUsageError, match="published by policy dense_full_attention_v1, "
                       "not other_v9"):
        rederive([str(EXAMPLES / DENSE)], root / TABLE, api.load_policy(rules))


def test_a_table_that_does_not_verify_is_not_rederived(tmp_path: Path) -> None:
    root = tmp_path / "root"
    published(root, [EXAMPLES / DENSE])
    (root / RECORD).write_text("{}", encoding="utf-8")
    with pytest.raises(KvrulesUsageError, match="does not verify: table_record_invalid"):
        rederive([str(EXAMPLES / DENSE)], root / TABLE, policy())


def test_classification_policies_turn_dense_synthetic_kv_on_and_off() -> None:
    dense, legacy = classification_policies(policy(dense=False))
    assert dense.compiled.parameters == {"dense_synthetic_kv": True}
    assert legacy is policy(dense=False)
