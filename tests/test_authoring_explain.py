"""``kvrules explain`` on the bundled examples: the chain from evidence to verdict, the
why-not of every other regime, and dense eligibility condition by condition on every rank."""
from __future__ import annotations

import copy
import json
import os
import shutil
from pathlib import Path

import doc_pages
import pytest
from typer.testing import CliRunner

from kvrules.authoring.explain.point import PointExplanation, explain, explain_point, load_traced
from kvrules.authoring.explain.cell import CellExplanation, Check
from kvrules.authoring.explain.report import render_explanation_json, render_point_text
from kvrules.authoring.policyinfo import deciders
from kvrules.authoring.explain.rulefacts import Evidence
from kvrules.cli.app import app
from kvrules.diagnostics import KvrulesUsageError
from kvrules.policy.compiled import CompiledPolicy
from kvrules.pipeline import compile_policy

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
CELL = "fpm-llama31-8b-decode-tp1"
BENCH = f"cells/{CELL}/raw/{CELL}-worker-0/benchmark.json"


def shown(example: str, file: str = BENCH) -> str:
    """An evidence path as explain shows it: relative to the current directory."""
    return os.path.relpath(EXAMPLES / example / file)


@pytest.fixture(scope="module")
def policy() -> CompiledPolicy:
    return compile_policy()


def _explain(policy: CompiledPolicy, example: str, point: int | None,
             cell: str = CELL) -> PointExplanation | CellExplanation:
    return explain(str(EXAMPLES / example), cell, point, policy)


def test_a_point_chain_goes_from_the_verdict_down_to_the_evidence(policy: CompiledPolicy) -> None:
    x = _explain(policy, "dense-sliding-window", 2)
    assert isinstance(x, PointExplanation)
    assert (x.regime, x.eligible, x.decided_by) == ("fake_fallback", False,
                                                    "regime.step7_unapproved_skip")
    assert [(s.depth, s.rule) for s in x.chain] == [(0, "regime.step7_unapproved_skip")]
    assert x.chain[0].negations == ("no earlier step of decision 'regime' holds for point 2",)
    assert x.chain[0].derived == 'decides "fake_fallback"'
    assert Evidence("kvwarm", "skip_reason", True, "dense_model_content_insensitive",
                    shown("dense-sliding-window"), "/kvwarm/skip_reason") in x.chain[0].evidence


def test_why_not_names_the_first_failed_condition_and_the_observed_value(
        policy: CompiledPolicy) -> None:
    x = _explain(policy, "dense-sliding-window", 2)
    assert isinstance(x, PointExplanation)
    by_rule = {w.rule: w for w in x.why_not}
    stamp = by_rule["regime.step5_dense_stamp_format"]
    assert (stamp.status, stamp.detail) == ("failed", 'needs native_regime is "fake_fallback"')
    assert stamp.evidence == (Evidence("point 2", "native_regime", True,
                                       "skip:dense_model_content_insensitive",
                                       shown("dense-sliding-window"),
                                       "/results/1/kv_seed_regime"),)
    native = by_rule["regime.step5_dense_native_format"]
    assert (native.status, native.detail) == (
        "no fact", "needs the cell to qualify for dense_synthetic_kv (failed: D9)")
    assert by_rule["regime.step8_no_evidence"].status == "outranked"
    assert set(by_rule) == {d.rule.id for d in deciders(policy.policy)} - {
        "regime.step7_unapproved_skip"}


def test_an_eligible_point_shows_eligibility_regime_candidate_and_qualification(
        policy: CompiledPolicy) -> None:
    x = _explain(policy, "dense-legacy-stamp-format", 1)
    assert isinstance(x, PointExplanation)
    assert [(s.depth, s.rule) for s in x.chain] == [
        (0, "regime.eligible"), (1, "regime.step5_dense_stamp_format"), (2, "dense.qualified")]
    assert x.chain[2].negations == (
        'no condition_failed where group is "dense_synthetic_kv"',)
    text = render_point_text(x)
    assert text.startswith("point 1: skip:dense_model_content_insensitive, eligible: step 5: "
                           "dense full-attention cell, legacy stamp format\n")
    assert f'point 1: sample_reasons = ["capture", "kvwarm_fake_fallback"]  (' \
           f'{shown("dense-legacy-stamp-format")}#/results/0/point/sample_reasons)' in text


def test_a_point_of_an_error_cell_shows_the_rule_that_raised_the_error(
        policy: CompiledPolicy, runner: CliRunner) -> None:
    x = _explain(policy, "native-skip-with-stamp", 1)
    assert isinstance(x, PointExplanation)
    assert (x.status, [s.rule for s in x.chain], x.why_not) == (
        "error", ["stamps.other_regime_stamped"], ())
    assert [e.code for e in x.errors] == ["stamp_regime_mismatch"]
    result = runner.invoke(app, ["explain", str(EXAMPLES / "native-skip-with-stamp"),
                                 "--cell", CELL, "--point", "1"])
    assert result.exit_code == 1 and "errors:\n  stamp_regime_mismatch:" in result.stdout
    assert result.stdout.startswith(
        "point 1: error: the cell is in error: stamp_regime_mismatch: benchmark 1: native "
        "regime skip:dense_model_content_insensitive must carry no stamp (reasons "
        f'["capture", "kvwarm_fake_fallback"]) ({shown("native-skip-with-stamp")}'
        "#/results/0/kv_seed_regime)\n")


def test_every_why_not_agrees_with_what_fired(policy: CompiledPolicy) -> None:
    for example in sorted(p.name for p in EXAMPLES.iterdir() if p.is_dir()):
        cell = next(p.name for p in (EXAMPLES / example / "cells").iterdir())
        traced = load_traced(str(EXAMPLES / example), cell, policy)
        for point in traced.verdict.points:
            if point.status != "ok":
                continue
            x = explain_point(traced, point.benchmark_id)
            cls = traced.class_of[point.benchmark_id]
            fired = {e.rule for e in traced.evaluation.events if cls in e.points}
            for w in x.why_not:
                assert (w.rule in fired) == (w.status == "outranked"), (example, w)


def test_a_cell_is_explained_condition_by_condition_on_every_rank(
        policy: CompiledPolicy) -> None:
    x = _explain(policy, "dp2-peer-ineligible", None, cell=f"{CELL}-dp2")
    assert isinstance(x, CellExplanation)
    (group,) = x.groups
    assert (group.group, group.eligible, group.failed) == ("dense_synthetic_kv", False, ("D2",))
    rows = [(r.condition, r.scope, r.holds) for r in group.rows]
    assert rows == [
        ("D1", "cell", True), ("D2", "rank 0", True), ("D2", "rank 1", False),
        ("D3", "cell", True), ("D4", "cell", True), ("D5", "rank 0", True),
        ("D5", "rank 1", True), ("D6", "cell", True), ("D6", "rank 0", True),
        ("D6", "rank 1", True), ("D7", "rank 0", True), ("D7", "rank 1", True),
        ("D8", "cell", True), ("D8", "rank 0", True), ("D8", "rank 1", True),
        ("D9", "rank 0", True), ("D9", "rank 1", True)]
    d2_rank1 = group.rows[2]
    fired = [c for c in d2_rank1.checks if c.fired]
    bench1 = f"cells/{CELL}-dp2/raw/{CELL}-dp2-worker-0/benchmark_dp1.json"
    block1 = json.loads((EXAMPLES / "dp2-peer-ineligible" / bench1).read_text())["kvwarm"]
    at = shown("dp2-peer-ineligible", bench1)
    assert fired == [Check("dense.d2_skip_reason", True,
                           "rank 1: kvwarm.skip_reason is peer_ineligible, expected "
                           "dense_model_content_insensitive",
                           (Evidence("rank 1 kvwarm", "block", True, block1, at, "/kvwarm"),
                            Evidence("rank 1 kvwarm", "skip_reason", True, "peer_ineligible",
                                     at, "/kvwarm/skip_reason"),
                            Evidence("rank 1 kvwarm", "rank", True, 1, at, "/kvwarm")))]
    holds = group.rows[1].checks[1]
    assert (holds.rule, holds.fired, holds.detail) == (
        "dense.d2_not_enabled", False, "needs enabled is not true")


def test_sliding_window_fails_d9_on_rank_0(policy: CompiledPolicy, runner: CliRunner) -> None:
    result = runner.invoke(app, ["explain", str(EXAMPLES / "dense-sliding-window"),
                                 "--cell", CELL], terminal_width=200)
    assert result.exit_code == 0
    at = shown("dense-sliding-window")
    assert ("    rank 0: FAILED\n"
            "      cache.d9_no_groups did not fire: needs groups is not an array or groups is "
            "empty\n"
            ) in result.stdout
    assert ("      cache.d9_unknown_group_kind fired: rank 0 group 0 is SlidingWindowSpec\n"
            f"        rank 0 group 0: spec_index is absent  ({at}#/engine/kv_cache/groups/0)\n"
            f'        rank 0 group 0: type = "SlidingWindowSpec"  ({at}#/engine/kv_cache/groups/0)'
            ) in result.stdout


def test_json_output_and_usage_errors(policy: CompiledPolicy, runner: CliRunner) -> None:
    x = _explain(policy, "dense-native-skip-format", 1)
    doc = json.loads(render_explanation_json(x))
    assert (doc["kind"], doc["regime"], doc["chain"][0]["rule"]) == (
        "point", "skip:dense_model_content_insensitive", "regime.eligible")
    with pytest.raises(KvrulesUsageError, match="no cell 'nope'"):
        _explain(policy, "dense-native-skip-format", None, cell="nope")
    with pytest.raises(KvrulesUsageError, match=r"has no point 9 \(benchmark ids: 1-2\)"):
        _explain(policy, "dense-native-skip-format", 9)
    result = runner.invoke(app, ["explain", str(EXAMPLES / "dense-native-skip-format"),
                                 "--cell", CELL, "-f", "json"])
    assert result.exit_code == 0 and json.loads(result.stdout)["kind"] == "cell"


def _run(runner: CliRunner, *args: str) -> str:
    result = runner.invoke(app, ["explain", *args], terminal_width=400)
    assert result.exit_code == 0, result.output
    return str(result.stdout)


def test_a_point_answers_first_with_the_root_cause_and_its_location(
        runner: CliRunner) -> None:
    """The first line is the verdict and the condition that kept the point from an
    eligible regime, with the evidence location; the other failed conditions follow, each
    id once."""
    out = _run(runner, str(EXAMPLES / "dense-no-engine-block"), "--cell", CELL, "--point", "1")
    lines = out.splitlines()
    assert lines[0] == (
        "point 1: fake_fallback, not eligible: the cell does not qualify for "
        "dense_synthetic_kv: D5 failed: rank 0 has no engine block: engine is absent, "
        f"expected an object ({shown('dense-no-engine-block')}#/engine)")
    assert [line.split(" failed:")[0] for line in lines[1:5]] == ["  D6", "  D7", "  D8", "  D9"]
    assert lines[1].startswith("  D6 failed: rank 0 engine model absent is not an expected "
                               "launched model: expected the plan's model_path")
    assert "<absent>" not in out and " p1" not in out and "candidate" not in out
    sliding = _run(runner, str(EXAMPLES / "dense-sliding-window"), "--point", "1")
    assert sliding.splitlines()[0] == (
        "point 1: fake_fallback, not eligible: the cell does not qualify for "
        "dense_synthetic_kv: D9 failed: rank 0 group 0 is SlidingWindowSpec "
        f"({shown('dense-sliding-window')}#/engine/kv_cache/groups/0)")


def test_fails_shows_only_what_failed(runner: CliRunner) -> None:
    cell = _run(runner, str(EXAMPLES / "dense-sliding-window"), "--fails")
    assert "holds" not in cell and "did not fire" not in cell
    assert "    rank 0: FAILED\n      cache.d9_unknown_group_kind fired: rank 0 group 0 is " \
           "SlidingWindowSpec\n" in cell
    full = _run(runner, str(EXAMPLES / "dense-sliding-window"))
    assert "did not fire" in full and len(cell) < len(full) / 3
    point = _run(runner, str(EXAMPLES / "dense-sliding-window"), "--point", "2", "--fails")
    assert "how:" not in point and "why not:" not in point
    assert ("eligible regimes not reached:\n  regime.step5_dense_native_format "
            "(skip:dense_model_content_insensitive): the cell does not qualify for "
            "dense_synthetic_kv\n      D9 failed: rank 0 group 0 is SlidingWindowSpec") in point


def _campaign_with_points(tmp_path: Path) -> Path:
    """dense-sliding-window with a third point like point 1."""
    root = tmp_path / "campaign"
    shutil.copytree(EXAMPLES / "dense-sliding-window", root)
    bench = root / BENCH
    doc = json.loads(bench.read_text())
    again = copy.deepcopy(doc["results"][0])
    again["point"]["benchmark_id"] = 3
    doc["results"].append(again)
    bench.write_text(json.dumps(doc))
    return root


def test_a_cell_lists_its_ineligible_points_grouped_by_cause(
        runner: CliRunner, tmp_path: Path) -> None:
    root = _campaign_with_points(tmp_path)
    lines = _run(runner, str(root)).splitlines()
    assert lines[0] == (
        "points 1-3: fake_fallback, not eligible: the cell does not qualify for "
        "dense_synthetic_kv: D9 failed: rank 0 group 0 is SlidingWindowSpec "
        f"({os.path.relpath(root / BENCH)}#/engine/kv_cache/groups/0)")
    assert lines[1] == ""
    doc = json.loads(_run(runner, str(root), "-f", "json"))
    (group,) = doc["points"]
    assert (group["points"], group["regime"], doc["answer"]) == ([1, 2, 3], "fake_fallback",
                                                                 lines[:1])
    assert [(c["condition"], c["reasons"]) for c in group["causes"][0]["conditions"]] == [
        ("D9", ["rank 0 group 0 is SlidingWindowSpec"])]


def test_point_json_carries_the_root_cause(runner: CliRunner) -> None:
    doc = json.loads(_run(runner, str(EXAMPLES / "dense-no-engine-block"), "--point", "2",
                          "-f", "json"))
    first = doc["causes"][0]
    assert (first["step"], first["regime"], first["detail"]) == (
        "regime.step5_dense_native_format", "skip:dense_model_content_insensitive",
        "the cell does not qualify for dense_synthetic_kv")
    assert [c["condition"] for c in first["conditions"]] == ["D5", "D6", "D7", "D8", "D9"]
    assert first["conditions"][0]["location"] == f"{shown('dense-no-engine-block')}#/engine"
    assert doc["answer"][0].startswith("point 2: fake_fallback, not eligible: the cell does "
                                       "not qualify for dense_synthetic_kv: D5 failed:")


def test_cell_is_optional_only_when_the_path_holds_one_cell(
        runner: CliRunner, tmp_path: Path) -> None:
    for name in ("dense-sliding-window", "moe-tp-approved-skip"):
        shutil.copytree(EXAMPLES / name, tmp_path / name)
    result = runner.invoke(app, ["explain", str(tmp_path)])
    assert result.exit_code == 2
    assert "holds 2 cells: name one with --cell (cells: fpm-llama31-8b-decode-tp1, " \
           "fpm-qwen3-30b-a3b-decode-tp2)" in result.output
    one = _run(runner, str(tmp_path), "--cell", "fpm-qwen3-30b-a3b-decode-tp2")
    assert one.startswith("cell fpm-qwen3-30b-a3b-decode-tp2: every point is eligible\n")




@pytest.mark.parametrize("command", ["kvrules explain examples/dense-sliding-window --point 1",
                                     "kvrules explain examples/dense-sliding-window --fails"])
def test_the_readme_shows_real_explain_output(command: str, runner: CliRunner,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    text = doc_pages.all_text()
    shown_block = text.split(f"$ {command}\n", 1)[1].split("\n```", 1)[0] + "\n"
    monkeypatch.chdir(doc_pages.ROOT)  # paths are shown relative to the current directory
    assert _run(runner, *command.split()[2:]) == shown_block


def test_a_policy_parameter_is_named_as_the_location(runner: CliRunner) -> None:
    out = _run(runner, str(EXAMPLES / "dense-native-skip-format"), "--no-dense-synthetic-kv")
    assert out.splitlines()[0] == (
        "points 1-2: fake_fallback, not eligible: the cell does not qualify for "
        "dense_synthetic_kv: D1 failed: dense synthetic KV classification is off (policy "
        "parameter dense_synthetic_kv)")
