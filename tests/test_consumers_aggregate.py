"""Aggregation (spec 6.2) on real campaign folders: columns, sample selection, latency, errors."""
from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from consumer_helpers import (LLAMA, MOE, QWEN, SLIDING, aggregated, make_prefill, policy,
                              rank_file, renamed, result, set_results)
from helpers import DENSE, DP2, EXAMPLES, copy_example, load, pod_dir, set_at, snapshot

from kvrules import api
from kvrules.consumers.aggregate import AggregatedCell, aggregate
from kvrules.consumers.rows import COLUMNS, read_rows, write_rows
from kvrules.diagnostics import KvrulesUsageError
from kvrules.verdicts.model import Report

DENSE_REGIME = "skip:dense_model_content_insensitive"
PLAN_SHA = "f3e2491b0a3f2dab9c6165e4dfb28232028a8e9eb2c8ede7ecb2212a8d87f551"
RUN_ID = "5e80a0d2753c11974d660ccd19964159"
GRID = "6d4f300e6e58680391a5323e28396f4fd4ba6a2051b249bc6d47cc989e6008df"


def _llama_row(kv: int, latency: float, regime: str = DENSE_REGIME) -> dict[str, object]:
    return {"cell_id": LLAMA, "model_path": "meta-llama/Llama-3.1-8B-Instruct",
            "system": "h200_sxm", "backend": "vllm", "backend_version": "0.11.2",
            "parallel_strategy": "tp", "tp": 1, "pp": 1, "dp": 1, "moe_tp": 1, "moe_ep": 1,
            "cp": 1, "model_config_sha256": "", "execution_profile": "full",
            "engram_residency": "none", "input_modality": "text", "workload_kind": "decode",
            "batch_size": 4, "total_prefill_tokens": 0, "total_kv_read_tokens": kv,
            "kv_seed_regime": regime, "latency_ms": latency, "source_plan_sha256": PLAN_SHA,
            "collector_attempt_id": "attempt-01-d26e7b23", "runtime_run_id": RUN_ID,
            "runtime_grid_digest": GRID}


def _rows(paths: list[Path]) -> list[dict[str, object]]:
    agg = aggregated(paths)
    assert agg.left_out == ()
    rows: list[dict[str, object]] = agg.rows.table.to_pylist()
    return rows


def _latencies(paths: list[Path]) -> list[tuple[object, ...]]:
    return [(r["workload_kind"], r["total_kv_read_tokens"], r["latency_ms"])
            for r in _rows(paths)]


def test_the_dense_example_gives_exactly_the_formal_rows_of_the_spec() -> None:
    agg = aggregated([EXAMPLES / DENSE])
    assert agg.rows.table.column_names == list(COLUMNS)
    assert agg.rows.table.to_pylist() == [_llama_row(128, 1000 * 0.0101),
                                          _llama_row(256, 1000 * 0.0202)]
    assert agg.cells == (AggregatedCell(str(EXAMPLES / DENSE), LLAMA, 2),)
    assert (agg.left_out, agg.exit_code, agg.rows.policy) == ((), 0, policy().identity)


def test_fake_fallback_rows_are_kept_the_regime_column_is_the_filter() -> None:
    rows = _rows([EXAMPLES / SLIDING])
    assert [r["kv_seed_regime"] for r in rows] == ["fake_fallback", "fake_fallback"]


def test_error_cells_are_reported_and_left_out_the_rest_is_kept() -> None:
    agg = aggregated([EXAMPLES / DP2, EXAMPLES / MOE])
    (left,) = agg.left_out
    assert (left.cell_id, [e.code for e in left.errors]) == (
        "fpm-llama31-8b-decode-tp1-dp2", ["dp_warmup_disagreement"])
    assert {r["cell_id"] for r in agg.rows.table.to_pylist()} == {QWEN}
    assert agg.exit_code == 1


def test_latency_is_the_maximum_wall_time_over_ranks(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path, DP2)
    set_at(rank_file(campaign, 1), "/kvwarm", load(rank_file(campaign, 0))["kvwarm"])
    set_results(campaign, [result(1, wall=0.010), result(2, kv=256, wall=0.050)], rank=0)
    set_results(campaign, [result(1, wall=0.030, dp_rank=1),
                           result(2, kv=256, wall=0.020, dp_rank=1)], rank=1)
    assert _latencies([campaign]) == [("decode", 128, 30.0), ("decode", 256, 50.0)]


def test_one_unclamped_sample_is_taken_over_clamped_ones(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path, DENSE)
    clamped = ("capture", "kvwarm_fake_fallback", "context_clamped")
    set_results(campaign, [result(1, reasons=clamped, wall=0.001), result(2, wall=0.002),
                           result(3, reasons=clamped, wall=0.003)])
    assert _latencies([campaign]) == [("decode", 128, 2.0)]


def test_all_clamped_takes_the_lowest_benchmark_id(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path, DENSE)
    clamped = ("capture", "kvwarm_fake_fallback", "context_clamped")
    set_results(campaign, [result(1, kv=256, wall=0.009), result(2, reasons=clamped, wall=0.003),
                           result(3, reasons=clamped, wall=0.001)])
    assert _latencies([campaign]) == [("decode", 128, 3.0), ("decode", 256, 9.0)]


def test_several_unclamped_samples_are_a_coordinate_collision(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path, DENSE)
    set_results(campaign, [result(1), result(2, kv=256), result(3)])
    before = snapshot(campaign)
    agg = aggregated([campaign])
    (left,) = agg.left_out
    (error,) = left.errors
    assert (error.code, error.file, error.pointer) == (
        "coordinate_collision", rank_file(campaign).relative_to(campaign).as_posix(),
        "/results/0/point")
    assert "benchmarks 1, 3 are all unclamped samples" in error.message
    assert (agg.rows.table.num_rows, agg.exit_code) == (0, 1)
    assert snapshot(campaign) == before


def test_a_clamp_on_any_rank_makes_the_sample_clamped(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path, DP2)
    set_at(rank_file(campaign, 1), "/kvwarm", load(rank_file(campaign, 0))["kvwarm"])
    clamped = ("capture", "kvwarm_fake_fallback", "context_clamped")
    set_results(campaign, [result(1, wall=0.001), result(2, wall=0.002)], rank=0)
    set_results(campaign, [result(1, reasons=clamped, wall=0.001, dp_rank=1),
                           result(2, wall=0.002, dp_rank=1)], rank=1)
    assert _latencies([campaign]) == [("decode", 128, 2.0)]


def _prefill(campaign: Path, seeded_extra: dict[str, object] | None = None) -> None:
    make_prefill(campaign)
    set_results(campaign, [
        result(1, "prefill", prefill=512, kv=0, native="real_prefix",
               reasons=("capture", "prefill_real_seed"), wall=0.004, **(seeded_extra or {})),
        result(2, "prefill", prefill=512, kv=0, native="not_applicable", reasons=("capture",),
               wall=0.005)])


def test_zero_kv_prefill_takes_the_not_applicable_sample(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path, DENSE)
    _prefill(campaign)
    rows = _rows([campaign])
    assert [(r["workload_kind"], r["kv_seed_regime"], r["latency_ms"]) for r in rows] == [
        ("prefill", "n/a", 5.0)]


def test_zero_kv_prefill_with_a_different_point_is_a_collision(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path, DENSE)
    _prefill(campaign, {"expected_capture_size": 8})
    (left,) = aggregated([campaign]).left_out
    assert [e.code for e in left.errors] == ["coordinate_collision"]


def test_rows_are_sorted_by_cell_then_coordinate_and_files_are_deterministic(
        tmp_path: Path) -> None:
    campaign = renamed(tmp_path, DENSE, "fpm-a")
    set_results(campaign, [result(1, batch=8, kv=64), result(2, batch=1, kv=512),
                           result(3, batch=1, kv=128)])
    agg = aggregated([EXAMPLES / MOE, campaign])
    assert [(r["cell_id"], r["batch_size"], r["total_kv_read_tokens"])
            for r in agg.rows.table.to_pylist()] == [
        ("fpm-a", 1, 128), ("fpm-a", 1, 512), ("fpm-a", 8, 64), (QWEN, 4, 128), (QWEN, 4, 256)]
    first, second = tmp_path / "a.parquet", tmp_path / "b.parquet"
    write_rows(agg.rows, first)
    write_rows(aggregated([EXAMPLES / MOE, campaign]).rows, second)
    assert first.read_bytes() == second.read_bytes()


def test_parquet_records_the_policy_and_reads_back(tmp_path: Path) -> None:
    agg = aggregated([EXAMPLES / DENSE], policy(dense=False))
    path = tmp_path / "rows.parquet"
    write_rows(agg.rows, path)
    back = read_rows(path)
    assert back.table.equals(agg.rows.table)
    assert back.policy == policy(dense=False).identity
    assert pq.read_table(path).column("kv_seed_regime").to_pylist() == ["fake_fallback"] * 2


def test_csv_by_extension(tmp_path: Path) -> None:
    path = tmp_path / "rows.csv"
    write_rows(aggregated([EXAMPLES / DENSE]).rows, path)
    header, first, *_ = path.read_text(encoding="utf-8").splitlines()
    assert header.split(",") == [json.dumps(c) for c in COLUMNS]
    assert f'"{DENSE_REGIME}",10.1,' in first


def test_another_extension_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(KvrulesUsageError, match=r"must end in \.parquet or \.csv"):
        write_rows(aggregated([EXAMPLES / DENSE]).rows, tmp_path / "rows.json")


def test_a_missing_provenance_leaves_the_cell_out_naming_the_file(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path, DENSE)
    (pod_dir(campaign) / "collector-provenance.json").unlink()
    (left,) = aggregated([campaign]).left_out
    errors = sorted((e.code, e.file, e.pointer) for e in left.errors)
    where = f"cells/{LLAMA}/raw/*/collector-provenance.json"
    assert errors == [("row_evidence_missing", where, "/attempt_id"),
                      ("row_evidence_missing", where, "/runtime/backend_version")]


def test_a_single_cell_folder_without_plan_is_left_out(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path, DENSE)
    cell = campaign / "cells" / LLAMA
    agg = aggregate(api.classify([str(cell)], policy()))
    (left,) = agg.left_out
    assert [(e.code, e.file) for e in left.errors] == [("row_evidence_missing", ".")]
    assert "collection plan" in left.errors[0].message
    with_plan = aggregate(api.classify([str(cell)], policy(), plan=str(
        campaign / "collection-plan.json")), plan=str(campaign / "collection-plan.json"))
    assert with_plan.rows.table.num_rows == 2


def test_a_cell_id_met_twice_keeps_the_first_input(tmp_path: Path) -> None:
    agg = aggregated([EXAMPLES / DENSE, EXAMPLES / SLIDING])
    (left,) = agg.left_out
    assert (left.campaign, [e.code for e in left.errors]) == (str(EXAMPLES / SLIDING),
                                                              ["duplicate_cell"])
    assert {r["kv_seed_regime"] for r in agg.rows.table.to_pylist()} == {DENSE_REGIME}


def test_a_saved_report_aggregates_like_the_live_one() -> None:
    live = api.classify([str(EXAMPLES / DENSE), str(EXAMPLES / MOE)], policy())
    saved = Report.from_dict(json.loads(json.dumps(live.to_dict())))
    assert aggregate(saved).rows.table.equals(aggregate(live).rows.table)
