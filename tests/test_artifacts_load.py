"""load_cell on real campaign folders: every structural code with its file and pointer."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers import (
    DENSE, DP2, EXAMPLES, copy_example, dump, load, pod_dir, replace_text, set_at, snapshot,
)

from kvrules.artifacts.discover import discover
from kvrules.artifacts.load import load_cell
from kvrules.artifacts.model import CellEvidence
from kvrules.diagnostics import (
    ARTIFACT_INCOMPLETE, ARTIFACT_INVALID, ARTIFACT_UNREADABLE, NO_RANK_ARTIFACTS,
    PROVENANCE_MISMATCH, RANK_SET_MISMATCH, RUN_IDENTITY_MISMATCH, SIDECAR_INVALID, Diagnostic,
    evidence_error,
)

CELL = "fpm-llama31-8b-decode-tp1"
POD = f"cells/{CELL}/raw/{CELL}-worker-0"
RANK = f"{POD}/benchmark.json"
PROV = f"{POD}/collector-provenance.json"
CELL2 = "fpm-llama31-8b-decode-tp1-dp2"
POD2 = f"cells/{CELL2}/raw/{CELL2}-worker-0"
PLAN = "collection-plan.json"


def cell_of(campaign: Path) -> CellEvidence:
    (ref,) = discover([str(campaign)])
    return load_cell(ref)


def diags_of(campaign: Path) -> list[Diagnostic]:
    return cell_of(campaign).diagnostics


def err(code: str, message: str, file: str, pointer: str = "") -> Diagnostic:
    return evidence_error(code, message, file, pointer)


@pytest.mark.parametrize("name", sorted(p.name for p in EXAMPLES.iterdir() if p.is_dir()))
def test_bundled_examples_are_structurally_clean(tmp_path: Path, name: str) -> None:
    ev = cell_of(copy_example(tmp_path, name))
    assert ev.diagnostics == []
    assert ev.plan is not None and ev.plan_cell is not None and ev.plan_cell_index == 0
    assert len(ev.provenance) == 1
    assert [d.data["dp"]["rank"] for d in ev.ranks] == list(range(len(ev.ranks)))


def test_loading_never_modifies_files(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path, DP2)
    replace_text(pod_dir(campaign) / "benchmark.json", '"wall_time": 0.0101', '"wall_time": NaN')
    (pod_dir(campaign) / "run.sh").write_text("engine_command=(python3 -m dynamo.vllm)\n")
    before = snapshot(campaign)
    cell_of(campaign)
    assert snapshot(campaign) == before


def test_a_planned_rank_keeps_its_results_as_bytes_read_again_on_demand(
        tmp_path: Path) -> None:
    """A valid rank of a planned cell is kept without its ``results`` once their columns
    are gathered (the next rank file decodes into the memory they held) and with the file's
    bytes: ``results()`` decodes them again, once, to what the file holds."""
    campaign = copy_example(tmp_path, DP2)
    ev = cell_of(campaign)
    assert len(ev.ranks) == 2
    for doc in ev.ranks:
        assert "results" not in doc.data and doc.raw == doc.path.read_bytes()
        assert doc.results() == load(doc.path)["results"]
        assert doc.results() is doc.results()  # decoded once
        assert doc.benchmark_ids() == [r["point"]["benchmark_id"] for r in doc.results()]
    unplanned = load_cell(discover([str(campaign / "cells" / CELL2)])[0])
    assert [d.raw for d in unplanned.ranks] == [None, None]  # the cell's kind needs them all
    assert [d.results() for d in unplanned.ranks] == [d.results() for d in ev.ranks]
    (ref,) = discover([str(campaign)])
    kept = load_cell(ref, keep_results=True)  # the consumers read results one by one
    assert [d.raw for d in kept.ranks] == [None, None]
    assert [d.data["results"] for d in kept.ranks] == [d.results() for d in ev.ranks]


# --- artifact_unreadable ---------------------------------------------------------------

def test_rank_not_json_reports_line_and_column(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path)
    (campaign / RANK).write_text('{\n  "schema_version": 2,\n  oops\n}')
    ev = cell_of(campaign)
    assert ev.diagnostics == [Diagnostic(
        file=RANK, line=3, column=3, code=ARTIFACT_UNREADABLE,
        message="not valid JSON: Expecting property name enclosed in double quotes")]
    assert ev.ranks == []


@pytest.mark.parametrize("text, kind", [("[]", "an array"), ("null", "null"), ('"x"', "a string")])
def test_rank_not_an_object(tmp_path: Path, text: str, kind: str) -> None:
    campaign = copy_example(tmp_path)
    (campaign / RANK).write_text(text)
    assert diags_of(campaign) == [err(ARTIFACT_UNREADABLE,
                                      f"top-level JSON value is {kind}, expected an object", RANK)]


def test_provenance_unreadable(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path)
    (campaign / PROV).write_bytes(b"\xff\xfe\x00garbage")
    (diag,) = diags_of(campaign)
    assert (diag.code, diag.file, diag.pointer) == (ARTIFACT_UNREADABLE, PROV, "")


def test_unreadable_plan_is_an_error_of_every_cell(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path)
    shutil.copytree(campaign / "cells" / CELL, campaign / "cells" / "second-cell")
    (campaign / PLAN).write_text("{")
    refs = discover([str(campaign)])
    assert [r.cell_id for r in refs] == [CELL, "second-cell"]
    want = Diagnostic(file=PLAN, line=1, column=2, code=ARTIFACT_UNREADABLE,
                      message="not valid JSON: Expecting property name enclosed in double quotes")
    for ref in refs:
        ev = load_cell(ref)
        assert ev.diagnostics == [want]
        assert ev.plan is None and len(ev.ranks) == 1


def test_invalid_plan_is_an_error_of_every_cell(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path, DP2)
    set_at(campaign / PLAN, "/cells/0/topology/dp", True)
    assert diags_of(campaign) == [err(
        ARTIFACT_INVALID, "cells[0].topology.dp must be of type integer, got true", PLAN,
        "/cells/0/topology/dp")]


def test_cell_not_listed_in_plan(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path)
    shutil.copytree(campaign / "cells" / CELL, campaign / "cells" / "stray-cell")
    refs = discover([str(campaign)])
    ev = load_cell(refs[1])
    assert ev.cell_id == "stray-cell"
    assert ev.diagnostics == [err(ARTIFACT_INVALID,
                                  "cell folder 'stray-cell' is not listed in the plan's cells",
                                  PLAN, "/cells")]
    assert ev.plan is not None and ev.plan_cell is None and len(ev.ranks) == 1


# --- artifact_invalid ------------------------------------------------------------------

@pytest.mark.parametrize("pointer, value, message, where", [
    ("/schema_version", 3, "schema_version must be 2, got 3", "/schema_version"),
    ("/artifact_type", "rnk", 'artifact_type must be "rank", got "rnk"', "/artifact_type"),
    ("/run_id", 7, "run_id must be of type string, got 7", "/run_id"),
    ("/dp/rank", -1, "dp.rank must be at least 0, got -1", "/dp/rank"),
    ("/dp/size", False, "dp.size must be of type integer, got false", "/dp/size"),
    ("/results/1/point/benchmark_id", True,
     "results[1].point.benchmark_id must be of type integer, got true",
     "/results/1/point/benchmark_id"),
    ("/results/0/point/batch_size", "4",
     'results[0].point.batch_size must be of type integer, got "4"',
     "/results/0/point/batch_size"),
    ("/results/0/point/sample_reasons", [1],
     "results[0].point.sample_reasons[0] must be of type string, got 1",
     "/results/0/point/sample_reasons/0"),
    ("/results/0/kv_seed_regime", "",
     "results[0].kv_seed_regime must be a non-empty string", "/results/0/kv_seed_regime"),
    ("/results/0/kv_seed_regime", 5,
     "results[0].kv_seed_regime must be of type string or null, got 5",
     "/results/0/kv_seed_regime"),
    ("/results/1/fpms/0/wall_time", 0,
     "results[1].fpms[0].wall_time must be greater than 0, got 0", "/results/1/fpms/0/wall_time"),
    ("/results/1/fpms/0/wall_time", -0.5,
     "results[1].fpms[0].wall_time must be greater than 0, got -0.5",
     "/results/1/fpms/0/wall_time"),
    ("/results/0/fpms", [], "results[0].fpms must have exactly 1 item(s), got 0",
     "/results/0/fpms"),
    ("/results", {}, "results must be of type array, got {}", "/results"),
])
def test_rank_schema_violations(tmp_path: Path, pointer: str, value, message: str,
                                where: str) -> None:
    campaign = copy_example(tmp_path)
    set_at(campaign / RANK, pointer, value)
    ev = cell_of(campaign)
    assert ev.diagnostics == [err(ARTIFACT_INVALID, message, RANK, where)]
    assert ev.ranks == []


def test_two_fpms_in_one_result(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path)
    data = load(campaign / RANK)
    data["results"][1]["fpms"].append(data["results"][1]["fpms"][0])
    dump(campaign / RANK, data)
    assert diags_of(campaign) == [err(ARTIFACT_INVALID,
                                      "results[1].fpms must have exactly 1 item(s), got 2",
                                      RANK, "/results/1/fpms")]


@pytest.mark.parametrize("pointer, message, where", [
    ("/run_id", "required field 'run_id' is missing", ""),
    ("/status", "required field 'status' is missing", ""),
    ("/results/0/fpms/0/wall_time",
     "required field 'wall_time' is missing in results[0].fpms[0]", "/results/0/fpms/0"),
    ("/results/1/point/total_kv_read_tokens",
     "required field 'total_kv_read_tokens' is missing in results[1].point", "/results/1/point"),
])
def test_rank_missing_fields(tmp_path: Path, pointer: str, message: str, where: str) -> None:
    campaign = copy_example(tmp_path)
    set_at(campaign / RANK, pointer)
    assert diags_of(campaign) == [err(ARTIFACT_INVALID, message, RANK, where)]


def test_optional_fields_may_be_absent_or_null(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path)
    set_at(campaign / RANK, "/kvwarm")
    set_at(campaign / RANK, "/engine", None)
    set_at(campaign / RANK, "/results/0/kv_seed_regime")
    set_at(campaign / RANK, "/results/1/kv_seed_regime", None)
    set_at(campaign / RANK, "/results/0/point/sample_reasons")
    set_at(campaign / RANK, "/results/1/point/sample_reasons", None)
    set_at(campaign / RANK, "/results/1/unknown_extra", {"anything": [1, 2]})
    assert diags_of(campaign) == []


def test_escaped_pointer_for_odd_keys(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path)
    set_at(campaign / PLAN, "/cells/0/topology", {"tp": 1, "pp": 1, "dp": 1, "moe_tp": 1,
                                                  "moe_ep": 1, "cp": 0, "a/b~c": 1})
    assert diags_of(campaign) == [err(ARTIFACT_INVALID,
                                      "cells[0].topology.cp must be at least 1, got 0",
                                      PLAN, "/cells/0/topology/cp")]


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_wall_time_is_invalid(tmp_path: Path, token: str) -> None:
    campaign = copy_example(tmp_path)
    replace_text(campaign / RANK, '"wall_time": 0.0202', f'"wall_time": {token}')
    assert diags_of(campaign) == [err(
        ARTIFACT_INVALID, f"results[1].fpms[0].wall_time must be of type number, got {token}",
        RANK, "/results/1/fpms/0/wall_time")]


def test_overflowing_wall_time_is_invalid(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path)
    replace_text(campaign / RANK, '"wall_time": 0.0202', '"wall_time": 1e400')
    ev = cell_of(campaign)
    assert ev.diagnostics == [err(ARTIFACT_INVALID, "results[1].fpms[0].wall_time is not finite",
                                  RANK, "/results/1/fpms/0/wall_time")]


def test_point_type_must_be_the_cell_workload_kind(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path)
    set_at(campaign / PLAN, "/cells/0/workload_kind", "prefill")
    ev = cell_of(campaign)
    assert ev.diagnostics == [err(
        ARTIFACT_INVALID,
        "results[0].point.point_type is \"decode\" but the cell's workload_kind is \"prefill\" "
        "(2 results disagree)", RANK, "/results/0/point/point_type")]
    assert len(ev.ranks) == 1  # points can still be listed for the error cell


def test_without_plan_all_point_types_must_agree(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path)
    set_at(campaign / RANK, "/results/1/point/point_type", "prefill")
    cell = campaign / "cells" / CELL
    ev = load_cell(discover([str(cell)])[0])
    rel = f"raw/{CELL}-worker-0/benchmark.json"
    assert ev.diagnostics == [err(
        ARTIFACT_INVALID,
        f"results[1].point.point_type is \"prefill\" but {rel} results[0] is \"decode\"; "
        "without a plan workload_kind all points of a cell must share one point type",
        rel, "/results/1/point/point_type")]


@pytest.mark.parametrize("ids, message, where", [
    ([2, 3], "benchmark ids are not contiguous from 1 to 2: missing 1", "/results"),
    ([1, 3], "benchmark ids are not contiguous from 1 to 2: missing 2", "/results"),
    ([1, 1], "benchmark_id 1 appears twice (results[0] and results[1])",
     "/results/1/point/benchmark_id"),
])
def test_benchmark_ids_contiguous_from_one(tmp_path: Path, ids, message, where) -> None:
    campaign = copy_example(tmp_path)
    for i, bid in enumerate(ids):
        set_at(campaign / RANK, f"/results/{i}/point/benchmark_id", bid)
    assert diags_of(campaign) == [err(ARTIFACT_INVALID, message, RANK, where)]


def test_benchmark_ids_in_any_order(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path)
    set_at(campaign / RANK, "/results/0/point/benchmark_id", 2)
    set_at(campaign / RANK, "/results/1/point/benchmark_id", 1)
    assert diags_of(campaign) == []


# --- artifact_incomplete ---------------------------------------------------------------

def test_incomplete_flags_each_reported_and_document_kept(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path)
    set_at(campaign / RANK, "/status", "failed")
    set_at(campaign / RANK, "/valid", 1)
    set_at(campaign / RANK, "/timing_valid", None)
    set_at(campaign / RANK, "/error", "CUDA OOM")
    ev = cell_of(campaign)
    assert ev.diagnostics == [
        err(ARTIFACT_INCOMPLETE, 'error is "CUDA OOM", expected null', RANK, "/error"),
        err(ARTIFACT_INCOMPLETE, 'status is "failed", expected "complete"', RANK, "/status"),
        err(ARTIFACT_INCOMPLETE, "timing_valid is null, expected true", RANK, "/timing_valid"),
        err(ARTIFACT_INCOMPLETE, "valid is 1, expected true", RANK, "/valid"),
    ]
    assert [d.relpath for d in ev.ranks] == [RANK]
