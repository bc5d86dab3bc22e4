"""``kvrules explain`` on the bundled examples: the chain from evidence to verdict, the
why-not of every other regime, and dense eligibility condition by condition on every rank."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvrules.authoring.explain import PointExplanation, explain, explain_point, load_traced
from kvrules.authoring.explain_cell import CellExplanation, Check
from kvrules.authoring.explain_report import render_explanation_json, render_point_text
from kvrules.authoring.policyinfo import deciders
from kvrules.authoring.rulefacts import Evidence
from kvrules.cli.app import app
from kvrules.diagnostics import KvrulesUsageError
from kvrules.policy.compiled import CompiledPolicy
from kvrules.pipeline import compile_policy

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
CELL = "fpm-llama31-8b-decode-tp1"
BENCH = f"cells/{CELL}/raw/{CELL}-worker-0/benchmark.json"


@pytest.fixture(scope="module")
def policy() -> CompiledPolicy:
    return compile_policy()


@pytest.fixture
def runner() -> CliRunner:
    try:
        return CliRunner(mix_stderr=False)  # type: ignore[call-arg]
    except TypeError:
        return CliRunner()


def _explain(policy: CompiledPolicy, example: str, point: int | None,
             cell: str = CELL) -> PointExplanation | CellExplanation:
    return explain(str(EXAMPLES / example), cell, point, policy)


def test_a_point_chain_goes_from_the_verdict_down_to_the_evidence(policy: CompiledPolicy) -> None:
    x = _explain(policy, "dense-sliding-window", 2)
    assert isinstance(x, PointExplanation)
    assert (x.regime, x.eligible, x.decided_by) == ("fake_fallback", False,
                                                    "regime.step7_unapproved_skip")
    assert [(s.depth, s.rule) for s in x.chain] == [
        (0, "regime.first_matching_step"), (1, "regime.step7_unapproved_skip")]
    assert x.chain[0].negations == ("no earlier step of decision 'regime' holds for this point",)
    assert x.chain[1].derived == \
        "regime_candidate {point: 'p2', step: 11, regime: 'fake_fallback'}"
    assert Evidence("kvwarm", "skip_reason", True, "dense_model_content_insensitive", BENCH,
                    "/kvwarm/skip_reason") in x.chain[1].evidence


def test_why_not_names_the_first_failed_condition_and_the_observed_value(
        policy: CompiledPolicy) -> None:
    x = _explain(policy, "dense-sliding-window", 2)
    assert isinstance(x, PointExplanation)
    by_rule = {w.rule: w for w in x.why_not}
    stamp = by_rule["regime.step5_dense_stamp_format"]
    assert (stamp.status, stamp.detail) == (
        "failed", "point p2: native_regime eq 'fake_fallback' does not hold")
    assert stamp.evidence == (Evidence("p2", "native_regime", True,
                                       "skip:dense_model_content_insensitive", BENCH,
                                       "/results/1/kv_seed_regime"),)
    native = by_rule["regime.step5_dense_native_format"]
    assert (native.status, native.detail) == (
        "no fact", "needs a qualified fact: not qualified (dense_synthetic_kv: D9)")
    assert by_rule["regime.step8_no_evidence"].status == "outranked"
    assert set(by_rule) == {d.rule.id for d in deciders(policy.policy)} - {
        "regime.step7_unapproved_skip"}


def test_an_eligible_point_shows_eligibility_regime_candidate_and_qualification(
        policy: CompiledPolicy) -> None:
    x = _explain(policy, "dense-legacy-stamp-format", 1)
    assert isinstance(x, PointExplanation)
    assert [(s.depth, s.rule) for s in x.chain] == [
        (0, "regime.eligible"), (1, "regime.first_matching_step"),
        (2, "regime.step5_dense_stamp_format"), (3, "dense.qualified")]
    assert x.chain[3].negations == (
        "no condition_failed where group eq 'dense_synthetic_kv'",)
    text = render_point_text(x)
    assert "verdict: skip:dense_model_content_insensitive, eligible, decided by " \
           "regime.step5_dense_stamp_format" in text
    assert f'p1.sample_reasons = ["capture", "kvwarm_fake_fallback"]  ({BENCH}#' \
           "/results/0/point/sample_reasons)" in text


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
    assert fired == [Check("dense.d2_skip_reason", True,
                           "rank 1: kvwarm.skip_reason is peer_ineligible",
                           (Evidence("warmup1", "block", True, block1, bench1, "/kvwarm"),
                            Evidence("warmup1", "skip_reason", True, "peer_ineligible", bench1,
                                     "/kvwarm/skip_reason"),
                            Evidence("warmup1", "rank", True, 1, bench1, "/kvwarm")))]
    holds = group.rows[1].checks[1]
    assert (holds.rule, holds.fired, holds.detail) == (
        "dense.d2_not_enabled", False, "warmup0: not (enabled eq True) does not hold")


def test_sliding_window_fails_d9_on_rank_0(policy: CompiledPolicy, runner: CliRunner) -> None:
    result = runner.invoke(app, ["explain", str(EXAMPLES / "dense-sliding-window"),
                                 "--cell", CELL], terminal_width=200)
    assert result.exit_code == 0
    assert ("    rank 0: FAILED\n"
            "      cache.d9_no_groups did not fire: rank0: not (groups is 'array') does not "
            "hold\n") in result.stdout
    assert ("      cache.d9_unknown_group_kind fired: rank 0 group 0 is SlidingWindowSpec\n"
            f"        spec0.0.spec_index is absent  ({BENCH}#/engine/kv_cache/groups/0)\n"
            f'        spec0.0.type = "SlidingWindowSpec"  ({BENCH}#/engine/kv_cache/groups/0)'
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
