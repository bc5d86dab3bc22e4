"""Which files are rank artifacts, and the checks across ranks, pods and launch files."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers import DENSE, DP2, copy_example, dump, load, pod_dir, set_at

from kvrules.artifacts.discover import discover
from kvrules.artifacts.load import load_cell
from kvrules.artifacts.model import CellEvidence, NonFiniteNumber
from kvrules.diagnostics import (
    ARTIFACT_INVALID, ARTIFACT_UNREADABLE, NO_RANK_ARTIFACTS, PROVENANCE_MISMATCH,
    RANK_SET_MISMATCH, RUN_IDENTITY_MISMATCH, SIDECAR_INVALID, Diagnostic, evidence_error,
    sort_diagnostics,
)

CELL = "fpm-llama31-8b-decode-tp1"
RAW = f"cells/{CELL}/raw"
POD = f"{RAW}/{CELL}-worker-0"
RANK = f"{POD}/benchmark.json"
CELL2 = "fpm-llama31-8b-decode-tp1-dp2"
RAW2 = f"cells/{CELL2}/raw"
POD2 = f"{RAW2}/{CELL2}-worker-0"
R0, R1 = f"{POD2}/benchmark.json", f"{POD2}/benchmark_dp1.json"


def cell_of(campaign: Path) -> CellEvidence:
    (ref,) = discover([str(campaign)])
    return load_cell(ref)


def err(code: str, message: str, file: str, pointer: str = "") -> Diagnostic:
    return evidence_error(code, message, file, pointer)


# --- which files are rank artifacts ------------------------------------------------------

def test_no_rank_artifacts(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path)
    (campaign / RANK).unlink()
    ev = cell_of(campaign)
    assert ev.diagnostics == [err(NO_RANK_ARTIFACTS,
                                  f"no rank artifact (benchmark*.json) below {RAW}", RAW)]
    assert ev.ranks == [] and len(ev.provenance) == 1


def test_missing_raw_folder_has_no_rank_artifacts(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path)
    shutil.rmtree(campaign / RAW)
    (campaign / RAW).parent.mkdir(exist_ok=True)
    assert cell_of(campaign).diagnostics == [
        err(NO_RANK_ARTIFACTS, f"no rank artifact (benchmark*.json) below {RAW}", RAW)]


def test_merged_artifacts_are_ignored(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path)
    pod = pod_dir(campaign)
    (pod / "benchmark_merged.json").write_text("not even json")
    merged = load(pod / "benchmark.json")
    merged.update(artifact_type="merged", schema_version=99)
    dump(pod / "benchmark_all.json", merged)
    ev = cell_of(campaign)
    assert ev.diagnostics == []
    assert [d.relpath for d in ev.ranks] == [RANK]


def test_only_merged_artifacts_means_no_rank_artifacts(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path)
    pod = pod_dir(campaign)
    (pod / "benchmark.json").rename(pod / "benchmark_merged.json")
    assert [d.code for d in cell_of(campaign).diagnostics] == [NO_RANK_ARTIFACTS]


def test_worker_probe_sidecar_envelope_checked_then_ignored(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path)
    pod = pod_dir(campaign)
    dump(pod / "benchmark_merged_worker_probe.json",
         {"schema": "dynamo.fpm.benchmark_worker_probe", "schema_version": 1, "x": [1]})
    ev = cell_of(campaign)
    assert ev.diagnostics == []
    assert [d.relpath for d in ev.sidecars] == [f"{POD}/benchmark_merged_worker_probe.json"]
    assert [d.relpath for d in ev.ranks] == [RANK]


@pytest.mark.parametrize("envelope, message, pointer", [
    ({"schema": "dynamo.fpm.other", "schema_version": 1},
     'schema must be "dynamo.fpm.benchmark_worker_probe", got "dynamo.fpm.other"', "/schema"),
    ({"schema": "dynamo.fpm.benchmark_worker_probe", "schema_version": 2},
     "schema_version must be 1, got 2", "/schema_version"),
    ({"schema": "dynamo.fpm.benchmark_worker_probe"},
     "required field 'schema_version' is missing", ""),
])
def test_sidecar_invalid(tmp_path: Path, envelope: dict, message: str, pointer: str) -> None:
    campaign = copy_example(tmp_path)
    dump(pod_dir(campaign) / "benchmark_worker_probe.json", envelope)
    ev = cell_of(campaign)
    assert ev.diagnostics == [err(SIDECAR_INVALID, message,
                                  f"{POD}/benchmark_worker_probe.json", pointer)]
    assert ev.sidecars == []


def test_unreadable_sidecar(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path)
    (pod_dir(campaign) / "benchmark_worker_probe.json").write_text("[1]")
    assert cell_of(campaign).diagnostics == [err(
        ARTIFACT_UNREADABLE, "top-level JSON value is an array, expected an object",
        f"{POD}/benchmark_worker_probe.json")]


def test_rank_artifacts_found_at_any_depth(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path, DP2)
    deep = campaign / RAW2 / "pod-b" / "nested" / "deeper"
    deep.mkdir(parents=True)
    (campaign / R1).rename(deep / "benchmark_dp1.json")
    ev = cell_of(campaign)
    assert ev.diagnostics == []
    assert [d.relpath for d in ev.ranks] == [R0, f"{RAW2}/pod-b/nested/deeper/benchmark_dp1.json"]


def test_ranks_sorted_by_dp_rank_then_path(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path, DP2)
    (campaign / R0).rename(campaign / f"{POD2}/benchmark_z.json")
    ev = cell_of(campaign)
    assert [(d.data["dp"]["rank"], d.relpath) for d in ev.ranks] == [
        (0, f"{POD2}/benchmark_z.json"), (1, R1)]


def test_invalid_rank_left_out_valid_rank_kept(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path, DP2)
    set_at(campaign / R1, "/grid_digest", None)
    ev = cell_of(campaign)
    assert ev.diagnostics == [err(ARTIFACT_INVALID,
                                  "grid_digest must be of type string, got null", R1,
                                  "/grid_digest")]
    assert [d.relpath for d in ev.ranks] == [R0]


# --- rank set, run identity, provenance ----------------------------------------------------

def test_missing_rank(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path, DP2)
    (campaign / R1).unlink()
    assert cell_of(campaign).diagnostics == [err(
        RANK_SET_MISMATCH,
        "dp ranks found [0] are not exactly 0..1 (plan topology dp=2): missing rank(s) 1", RAW2)]


def test_rank_twice(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path, DP2)
    set_at(campaign / R1, "/dp/rank", 0)
    assert cell_of(campaign).diagnostics == [
        err(RANK_SET_MISMATCH,
            "dp ranks found [0] are not exactly 0..1 (plan topology dp=2): missing rank(s) 1",
            RAW2),
        err(RANK_SET_MISMATCH, f"dp.rank 0 appears twice (also in {R0})", R1, "/dp/rank"),
    ]


def test_dp_size_differs_from_plan(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path, DP2)
    set_at(campaign / R1, "/dp/size", 3)
    assert cell_of(campaign).diagnostics == [
        err(RANK_SET_MISMATCH, "dp.size is 3 but plan topology dp=2", R1, "/dp/size")]


def test_rank_outside_plan_dp(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path)
    set_at(campaign / RANK, "/dp/rank", 1)
    assert cell_of(campaign).diagnostics == [
        err(RANK_SET_MISMATCH,
            "dp ranks found [1] are not exactly 0..0 (plan topology dp=1): missing rank(s) 0",
            RAW),
        err(RANK_SET_MISMATCH, "dp.rank 1 is outside 0..0 (plan topology dp=1)", RANK,
            "/dp/rank"),
    ]


def test_missing_rank_not_claimed_when_a_rank_file_is_unreadable(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path, DP2)
    (campaign / R1).write_text("")
    assert [d.code for d in cell_of(campaign).diagnostics] == [ARTIFACT_UNREADABLE]


def test_single_dp2_cell_without_plan_assumes_one_rank(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path, DP2)
    cell = campaign / "cells" / CELL2
    ev = load_cell(discover([str(cell)])[0])
    pod = f"raw/{CELL2}-worker-0"
    assert ev.diagnostics == [
        err(RANK_SET_MISMATCH, "dp.size is 2 but no plan: dp=1 assumed",
            f"{pod}/benchmark.json", "/dp/size"),
        err(RANK_SET_MISMATCH, "dp.rank 1 is outside 0..0 (no plan: dp=1 assumed)",
            f"{pod}/benchmark_dp1.json", "/dp/rank"),
        err(RANK_SET_MISMATCH, "dp.size is 2 but no plan: dp=1 assumed",
            f"{pod}/benchmark_dp1.json", "/dp/size"),
    ]


@pytest.mark.parametrize("field", ["run_id", "grid_digest"])
def test_run_identity_mismatch(tmp_path: Path, field: str) -> None:
    campaign = copy_example(tmp_path, DP2)
    want = load(campaign / R0)[field]
    set_at(campaign / R1, f"/{field}", "other")
    assert cell_of(campaign).diagnostics == [err(
        RUN_IDENTITY_MISMATCH, f'{field} "other" differs from "{want}" in {R0}', R1, f"/{field}")]


def _second_pod(campaign: Path) -> Path:
    """Move rank 1 and a copy of the provenance into a second pod folder."""
    pod_b = campaign / RAW2 / f"{CELL2}-worker-1"
    pod_b.mkdir()
    (campaign / R1).rename(pod_b / "benchmark_dp1.json")
    shutil.copy(campaign / POD2 / "collector-provenance.json", pod_b)
    return pod_b


def test_identical_provenance_across_pods(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path, DP2)
    _second_pod(campaign)
    ev = cell_of(campaign)
    assert ev.diagnostics == [] and len(ev.provenance) == 2


@pytest.mark.parametrize("pointer, value", [
    ("/attempt_id", "attempt-02"),
    ("/runtime/backend_version", "0.11.3"),
    ("/extra_field", 1.0),
    ("/extra_field", "only in one pod"),
])
def test_provenance_mismatch(tmp_path: Path, pointer: str, value) -> None:
    campaign = copy_example(tmp_path, DP2)
    pod_b = _second_pod(campaign)
    set_at(pod_b / "collector-provenance.json", pointer, value)
    assert cell_of(campaign).diagnostics == [err(
        PROVENANCE_MISMATCH,
        f"collector provenance differs from {POD2}/collector-provenance.json at {pointer}",
        f"{RAW2}/{CELL2}-worker-1/collector-provenance.json", pointer)]


def test_invalid_provenance(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path)
    set_at(campaign / POD / "collector-provenance.json", "/runtime/backend_version", 11)
    ev = cell_of(campaign)
    assert ev.diagnostics == [err(
        ARTIFACT_INVALID, "runtime.backend_version must be of type string, got 11",
        f"{POD}/collector-provenance.json", "/runtime/backend_version")]
    assert ev.provenance == []


# --- launch evidence -------------------------------------------------------------------------

def test_launch_evidence_is_loaded(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path)
    overrides = {"K8sConfig": {"k8s_model_path_in_pvc": "checkpoint",
                               "k8s_pvc_mount_path": "/models"}}
    dump(campaign / "generator-overrides.json", overrides)
    dump(campaign / "cells" / CELL / "generator-request.json",
         {"ServiceConfig": {"model_path": "/models/checkpoint"}})
    script = "engine_command=(python3 -m dynamo.vllm --model /models/checkpoint)\n"
    (campaign / "cells" / CELL / "run.sh").write_text(script)
    ev = cell_of(campaign)
    assert ev.diagnostics == []
    assert ev.generator_overrides is not None
    assert (ev.generator_overrides.relpath, ev.generator_overrides.data) == (
        "generator-overrides.json", overrides)
    assert ev.generator_request is not None
    assert ev.generator_request.relpath == f"cells/{CELL}/generator-request.json"
    assert ev.run_sh is not None and ev.run_sh.text == script
    assert ev.run_sh.relpath == f"cells/{CELL}/run.sh"


def test_launch_evidence_absent(tmp_path: Path) -> None:
    ev = cell_of(copy_example(tmp_path))
    assert (ev.generator_overrides, ev.generator_request, ev.run_sh) == (None, None, None)


def test_single_cell_finds_overrides_beside_the_plan(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path)
    dump(campaign / "generator-overrides.json", {"K8sConfig": {}})
    cell = campaign / "cells" / CELL
    ev = load_cell(discover([str(cell)], plan=str(campaign / "collection-plan.json"))[0])
    assert ev.generator_overrides is not None
    assert ev.generator_overrides.relpath == "../../generator-overrides.json"


@pytest.mark.parametrize("name, file", [
    ("generator-overrides.json", "generator-overrides.json"),
    (f"cells/{CELL}/generator-request.json", f"cells/{CELL}/generator-request.json"),
])
def test_unreadable_launch_json(tmp_path: Path, name: str, file: str) -> None:
    campaign = copy_example(tmp_path)
    (campaign / name).write_text("[]")
    ev = cell_of(campaign)
    assert ev.diagnostics == [err(ARTIFACT_UNREADABLE,
                                  "top-level JSON value is an array, expected an object", file)]


def test_run_sh_not_utf8(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path)
    (campaign / "cells" / CELL / "run.sh").write_bytes(b"\xff\xfe")
    ev = cell_of(campaign)
    assert ev.run_sh is None
    assert ev.diagnostics == [err(ARTIFACT_UNREADABLE, "not UTF-8 text: invalid start byte",
                                  f"cells/{CELL}/run.sh")]


# --- aggregate behaviour ---------------------------------------------------------------------

def test_diagnostics_sorted_and_deduplicated(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path, DP2)
    set_at(campaign / R1, "/run_id", "other")
    set_at(campaign / R1, "/status", "failed")
    set_at(campaign / R0, "/results/0/point/benchmark_id", 2)
    diags = cell_of(campaign).diagnostics
    assert diags == sort_diagnostics(diags)
    assert len(set(diags)) == len(diags) == 3


def test_non_finite_values_outside_validated_fields_are_markers(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path)
    text = (campaign / RANK).read_text().replace('"giant_kv_threshold": 1000000',
                                                 '"giant_kv_threshold": Infinity')
    (campaign / RANK).write_text(text)
    ev = cell_of(campaign)
    assert ev.diagnostics == []
    assert ev.ranks[0].data["kvwarm"]["giant_kv_threshold"] == NonFiniteNumber("Infinity")


def test_raw_that_cannot_be_listed(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path)
    shutil.rmtree(campaign / RAW)
    (campaign / RAW).write_text("not a folder")
    assert cell_of(campaign).diagnostics == [
        err(ARTIFACT_UNREADABLE, "cannot list folder: Not a directory", RAW)]
