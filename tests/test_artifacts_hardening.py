"""Nothing a campaign folder holds may crash, hang or fool the artifact stage.

Each test builds the bad evidence in ``tmp_path`` from a bundled example and runs the real
CLI as a separate process (with a timeout, so a hang fails the test): the exit status must
be 0, 1 or 2, there must be no traceback, and the report must name the error code and file.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from helpers import DENSE, copy_example, dump, load, only_cell, pod_dir, replace_text, set_at
from kvrules.artifacts.discover import discover
from kvrules.artifacts.jsonio import MAX_FILE_BYTES, UnreadableFile, read_bounded, read_json
from kvrules.artifacts.load import load_cell
from kvrules.diagnostics import (
    ARTIFACT_INVALID, ARTIFACT_UNREADABLE, RANK_SET_MISMATCH, SIDECAR_INVALID,
)

PLAN = "collection-plan.json"


def classify(campaign: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    """Run ``kvrules classify <campaign> --format json`` as a whole process."""
    proc = subprocess.run([sys.executable, "-m", "kvrules", "classify", str(campaign),
                           "--format", "json", *extra],
                          capture_output=True, timeout=60)
    # undecodable file names may reach the report as raw bytes: not this stage's business
    out, err = (proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace"))
    assert "Traceback" not in err and "Traceback" not in out, err
    assert proc.returncode in (0, 1, 2), err
    return proc.returncode, json.loads(out) if out.strip() else {}


def errors(report: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(code, file, pointer) of every cell error of the report."""
    return [(e["code"], e["file"], e["pointer"]) for c in report["cells"] for e in c["errors"]]


def rel(path: Path, campaign: Path) -> str:
    return path.relative_to(campaign).as_posix()


def assert_error(campaign: Path, code: str, file: str, pointer: str | None = None) -> None:
    rc, report = classify(campaign)
    assert rc == 1
    found = errors(report)
    assert any(c == code and f == file and (pointer is None or p == pointer)
               for c, f, p in found), found


# --- the reproducers ---------------------------------------------------------------------

def test_devzero_symlink_plan_is_refused_unread(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path)
    (campaign / PLAN).unlink()
    (campaign / PLAN).symlink_to("/dev/zero")
    assert_error(campaign, ARTIFACT_UNREADABLE, PLAN)


def test_devzero_symlink_rank_is_refused_unread(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path)
    rank = pod_dir(campaign) / "benchmark.json"
    rank.unlink()
    rank.symlink_to("/dev/zero")
    assert_error(campaign, ARTIFACT_UNREADABLE, rel(rank, campaign))


def test_device_is_refused_without_reading() -> None:
    """Without a root (no containment check) the device itself is refused from stat."""
    data, diag = read_json(Path("/dev/zero"), "zero.json")
    assert data is None and diag is not None and diag.code == ARTIFACT_UNREADABLE
    assert "character device" in diag.message


def test_float_topology_dp_is_invalid_plan(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path)
    set_at(campaign / PLAN, "/cells/0/topology/dp", 1.0)
    assert_error(campaign, ARTIFACT_INVALID, PLAN, "/cells/0/topology/dp")


def test_huge_topology_dp_finishes(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path)
    set_at(campaign / PLAN, "/cells/0/topology/dp", 2 ** 70)
    assert_error(campaign, RANK_SET_MISMATCH, rel(only_cell(campaign) / "raw", campaign))


@pytest.mark.parametrize("cell_id", ["fpm\u0000x", "fpm\ud800x"])
def test_odd_plan_cell_id_is_invalid_plan(tmp_path: Path, cell_id: str) -> None:
    campaign = copy_example(tmp_path)
    set_at(campaign / PLAN, "/cells/0/cell_id", cell_id)
    assert_error(campaign, ARTIFACT_INVALID, PLAN, "/cells/0/cell_id")


def test_fifo_evidence_file_does_not_hang(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path)
    provenance = pod_dir(campaign) / "collector-provenance.json"
    provenance.unlink()
    os.mkfifo(provenance)
    assert_error(campaign, ARTIFACT_UNREADABLE, rel(provenance, campaign))


def test_fifo_run_sh_does_not_hang(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path)
    script = only_cell(campaign) / "run.sh"
    script.unlink(missing_ok=True)
    os.mkfifo(script)
    assert_error(campaign, ARTIFACT_UNREADABLE, rel(script, campaign))


def test_integral_float_sidecar_version_is_sidecar_invalid(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path)
    sidecar = pod_dir(campaign) / "benchmark_merged_worker_probe.json"
    dump(sidecar, {"schema": "dynamo.fpm.benchmark_worker_probe", "schema_version": 1.0})
    assert_error(campaign, SIDECAR_INVALID, rel(sidecar, campaign), "/schema_version")


def test_valid_sidecar_is_accepted(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path)
    dump(pod_dir(campaign) / "benchmark_merged_worker_probe.json",
         {"schema": "dynamo.fpm.benchmark_worker_probe", "schema_version": 1})
    rc, report = classify(campaign)
    assert rc == 0 and errors(report) == []


# --- symlinks ------------------------------------------------------------------------------

def test_symlink_leaving_the_campaign_is_refused(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path)
    outside = tmp_path / "outside.json"
    provenance = pod_dir(campaign) / "collector-provenance.json"
    outside.write_bytes(provenance.read_bytes())
    provenance.unlink()
    provenance.symlink_to(outside)
    assert_error(campaign, ARTIFACT_UNREADABLE, rel(provenance, campaign))


def test_symlink_inside_the_campaign_is_followed(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path)
    provenance = pod_dir(campaign) / "collector-provenance.json"
    (campaign / "kept.json").write_bytes(provenance.read_bytes())
    provenance.unlink()
    provenance.symlink_to(campaign / "kept.json")
    rc, report = classify(campaign)
    assert rc == 0 and errors(report) == []


def test_a_campaign_root_swapped_for_a_link_is_resolved_again(tmp_path: Path) -> None:
    """The campaign folder's real location is remembered per folder identity: swapped for a
    link to another folder, files below it are judged against the new location (a stale
    answer would refuse them, or accept a file that leaves the new one)."""
    root, elsewhere = tmp_path / "campaign", tmp_path / "elsewhere"
    root.mkdir()
    elsewhere.mkdir()
    (root / "a.json").write_bytes(b"{}")
    (elsewhere / "a.json").write_bytes(b"[]")
    (tmp_path / "outside.json").write_bytes(b"{}")
    assert read_bounded(root / "a.json", root) == b"{}"
    root.rename(tmp_path / "old")
    root.symlink_to(elsewhere)
    assert read_bounded(root / "a.json", root) == b"[]"
    (elsewhere / "leak.json").symlink_to(tmp_path / "outside.json")
    with pytest.raises(UnreadableFile, match="leads outside the campaign folder"):
        read_bounded(root / "leak.json", root)


def test_a_linked_folder_leading_outside_is_refused_for_its_files(tmp_path: Path) -> None:
    """A file reached through a linked folder is judged by where it really is (the open
    file's own location), not by the name it was asked for."""
    root = tmp_path / "campaign"
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "f.json").write_bytes(b"{}")
    root.mkdir()
    (root / "linked").symlink_to(tmp_path / "outside")
    with pytest.raises(UnreadableFile, match="leads outside the campaign folder"):
        read_bounded(root / "linked" / "f.json", root)
    assert read_bounded(tmp_path / "outside" / "f.json") == b"{}"  # no root: no such rule


def test_a_file_that_grows_while_read_is_read_whole_or_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One read of the size ``fstat`` gave, then on to the end: a file appended to between
    the two is read whole up to the limit, never cut at its earlier size."""
    path = tmp_path / "f.json"
    path.write_bytes(b"[1" + b" " * 100)
    real_fstat = os.fstat

    def stale_fstat(fd: int) -> os.stat_result:  # the size before an append lands
        st = real_fstat(fd)
        with open(path, "ab") as more:
            more.write(b", 2]")
        return st

    monkeypatch.setattr(os, "fstat", stale_fstat)
    assert read_bounded(path) == b"[1" + b" " * 100 + b", 2]"
    with pytest.raises(UnreadableFile, match="file is larger than 103 bytes"):
        read_bounded(path, limit=103)


def test_symlink_loop_is_refused(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path)
    pod = pod_dir(campaign)
    (pod / "benchmark_dp1.json").symlink_to(pod / "benchmark_dp2.json")
    (pod / "benchmark_dp2.json").symlink_to(pod / "benchmark_dp1.json")
    assert_error(campaign, ARTIFACT_UNREADABLE, rel(pod / "benchmark_dp1.json", campaign))


def test_symlinked_folder_below_raw_is_reported(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path)
    pod = pod_dir(campaign)
    (pod.parent / "linked-pod").symlink_to(tmp_path)
    assert_error(campaign, ARTIFACT_UNREADABLE, rel(pod.parent / "linked-pod", campaign))


def test_deeply_nested_raw_folders_never_raise(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path)
    chain = [os.fsencode(pod_dir(campaign))]
    try:
        for _ in range(1200):
            chain.append(os.path.join(chain[-1], b"d"))
            os.mkdir(chain[-1])
        classify(campaign)
    finally:  # bottom-up: shutil.rmtree (pytest's tmp cleanup) would recurse too deeply
        for folder in reversed(chain[1:]):
            if os.path.isdir(folder):
                os.rmdir(folder)


# --- size limit, duplicate keys, nesting ---------------------------------------------------

def test_size_limit_reads_at_most_limit_plus_one(tmp_path: Path) -> None:
    path = tmp_path / "f.json"
    path.write_bytes(b"{}" + b" " * 9)
    assert read_bounded(path, limit=11) == b"{}" + b" " * 9
    with pytest.raises(UnreadableFile, match="file is larger than 10 bytes"):
        read_bounded(path, limit=10)


def test_file_larger_than_the_limit_is_unreadable(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path)
    rank = pod_dir(campaign) / "benchmark_dp1.json"
    with open(rank, "wb") as out:  # sparse: no disk space, and never read
        out.truncate(MAX_FILE_BYTES + 1)
    rc, report = classify(campaign)
    assert rc == 1
    (err,) = [e for c in report["cells"] for e in c["errors"]
              if e["file"] == rel(rank, campaign)]
    assert err["code"] == ARTIFACT_UNREADABLE and "file is larger than" in err["message"]


@pytest.mark.parametrize("name", ["benchmark.json", "collector-provenance.json", PLAN])
def test_duplicate_key_is_refused(tmp_path: Path, name: str) -> None:
    campaign = copy_example(tmp_path)
    path = campaign / PLAN if name == PLAN else pod_dir(campaign) / name
    text = path.read_text(encoding="utf-8")
    path.write_text('{"dup_key": 1, "dup_key": 2, ' + text.lstrip()[1:], encoding="utf-8")
    rc, report = classify(campaign)
    assert rc == 1
    found = [e for c in report["cells"] for e in c["errors"] if e["file"] == rel(path, campaign)]
    assert found and found[0]["code"] == ARTIFACT_UNREADABLE
    assert "dup_key" in found[0]["message"]


@pytest.mark.parametrize("depth", [500, 100_000])
def test_deep_nesting_never_raises(tmp_path: Path, depth: int) -> None:
    campaign = copy_example(tmp_path)
    provenance = pod_dir(campaign) / "collector-provenance.json"
    text = provenance.read_text(encoding="utf-8").rstrip().rstrip("}")
    provenance.write_text(text + ', "deep": ' + "[" * depth + "]" * depth + "}",
                          encoding="utf-8")
    classify(campaign)


# --- integers are JSON integers (spec 2.1 / 3) ---------------------------------------------

_RANK_INTS = ["/results/0/point/batch_size", "/results/0/point/total_kv_read_tokens",
              "/results/0/point/benchmark_id", "/dp/rank", "/dp/size",
              "/results/0/fpms/0/counter_id", "/results/0/fpms/0/dp_rank", "/schema_version"]


@pytest.mark.parametrize("ptr", _RANK_INTS)
def test_float_in_rank_integer_field_is_invalid(tmp_path: Path, ptr: str) -> None:
    campaign = copy_example(tmp_path)
    rank = pod_dir(campaign) / "benchmark.json"
    data = load(rank)
    node = data
    *parents, last = ptr.split("/")[1:]
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    node[last] = float(node.get(last, 1))
    dump(rank, data)
    assert_error(campaign, ARTIFACT_INVALID, rel(rank, campaign), ptr)


@pytest.mark.parametrize("value", [True, 1e400, "NaN", "Infinity", 10 ** 30 + 0.5])
def test_non_integer_batch_size_is_invalid(tmp_path: Path, value: Any) -> None:
    campaign = copy_example(tmp_path)
    rank = pod_dir(campaign) / "benchmark.json"
    if isinstance(value, str):
        set_at(rank, "/results/0/point/batch_size", "TOKEN")
        replace_text(rank, '"TOKEN"', value)
    elif value == 1e400:
        set_at(rank, "/results/0/point/batch_size", "TOKEN")
        replace_text(rank, '"TOKEN"', "1e400")
    else:
        set_at(rank, "/results/0/point/batch_size", value)
    assert_error(campaign, ARTIFACT_INVALID, rel(rank, campaign), "/results/0/point/batch_size")


@pytest.mark.parametrize("ptr", ["/cells/0/topology/tp", "/cells/0/topology/pp",
                                 "/cells/0/topology/moe_ep", "/schema_version"])
def test_float_in_plan_integer_field_is_invalid(tmp_path: Path, ptr: str) -> None:
    campaign = copy_example(tmp_path)
    set_at(campaign / PLAN, ptr, 1.0)
    assert_error(campaign, ARTIFACT_INVALID, PLAN, ptr)


def test_float_provenance_version_is_invalid(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path)
    provenance = pod_dir(campaign) / "collector-provenance.json"
    set_at(provenance, "/schema_version", 1.0)
    assert_error(campaign, ARTIFACT_INVALID, rel(provenance, campaign), "/schema_version")


# --- plan layout of schema_version 10 (spec 2.2) --------------------------------------------

def test_schema_version_10_plan_is_accepted(tmp_path: Path) -> None:
    base = copy_example(tmp_path, DENSE, "base")
    _, want = classify(base)
    campaign = copy_example(tmp_path, DENSE, "v10")
    plan = load(campaign / PLAN)
    plan.pop("schema", None)
    plan["schema_name"], plan["schema_version"] = "aic_fpm_collection_plan", 10
    for cell in plan["cells"]:
        cell.pop("execution_identity", None)
    dump(campaign / PLAN, plan)
    rc, report = classify(campaign)
    assert rc == 0 and errors(report) == []
    regimes = [[p["kv_seed_regime"] for p in c["points"]] for c in report["cells"]]
    assert regimes == [[p["kv_seed_regime"] for p in c["points"]] for c in want["cells"]]
    ev = load_cell(discover([str(campaign)])[0])
    assert ev.plan_cell is not None and ev.plan_cell["execution_identity"] == {
        "model_config_sha256": "", "execution_profile": "full", "engram_residency": "none",
        "input_modality": "text"}


# --- discovery --------------------------------------------------------------------------------

def test_hidden_cell_folder_is_reported(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path)
    cell = only_cell(campaign)
    hidden = cell.parent / ".hidden-cell"
    hidden.mkdir()
    (hidden / "raw").mkdir()
    rc, report = classify(campaign)
    assert rc == 1
    assert ".hidden-cell" in [c["cell_id"] for c in report["cells"]]
    assert cell.name in [c["cell_id"] for c in report["cells"] if c["status"] == "ok"]


def test_undecodable_file_name_never_raises(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path)
    pod = pod_dir(campaign)
    odd = os.path.join(os.fsencode(pod), b"benchmark_\xff.json")
    with open(odd, "wb") as out:
        out.write(b"[]")
    rc, _ = classify(campaign)
    assert rc == 1


# --- any JSON value anywhere never raises in the artifact stage ------------------------------

_VALUES: list[Any] = [None, True, 0, -1, 1.5, 10 ** 40, math.inf, "", "x", [], [None], {},
                      {"a": [1]}]
_SPOTS = [("benchmark.json", p) for p in (
    "/dp", "/dp/rank", "/dp/size", "/results", "/results/0", "/results/0/point",
    "/results/0/point/point_type", "/results/0/point/benchmark_id",
    "/results/0/point/sample_reasons", "/results/0/kv_seed_regime", "/results/0/fpms",
    "/results/0/fpms/0", "/results/0/fpms/0/wall_time", "/run_id", "/status", "/kvwarm",
    "/engine", "/artifact_type")] + [(PLAN, p) for p in (
    "/cells", "/cells/0", "/cells/0/cell_id", "/cells/0/topology", "/cells/0/topology/dp",
    "/cells/0/workload_kind", "/cells/0/execution_identity", "/capability")] + [
    ("collector-provenance.json", p) for p in ("/runtime", "/cell_id", "/schema_version")]


@pytest.mark.parametrize("name, ptr", _SPOTS)
def test_any_json_value_never_raises(tmp_path: Path, name: str, ptr: str) -> None:
    campaign = copy_example(tmp_path)
    path = campaign / PLAN if name == PLAN else pod_dir(campaign) / name
    original = path.read_bytes()
    for i, value in enumerate(_VALUES):
        path.write_bytes(original)
        text = json.dumps(value, allow_nan=True) if value is not math.inf else "1e400"
        set_at(path, ptr, f"@@{i}@@")
        replace_text(path, f'"@@{i}@@"', text)
        for ref in discover([str(campaign)]):
            load_cell(ref)  # must not raise, whatever the value
