"""Every semantic evidence error of spec section 3, raised by the shipped rules on real files.

An error cell is not classified: every point has status error, no regime, not eligible;
other cells of the same campaign are still classified.
"""
from __future__ import annotations

import json
import shutil

import pytest
from helpers import EXAMPLES, copy_example, load, dump, set_at
from policy_cases import DELETE, DENSE, classify, error_codes, files, policy, regimes, variant

from kvrules import api
from kvrules.diagnostics import Diagnostic

MALFORMED = {
    "null_block": [("bench", "/kvwarm", None)],
    "string_block": [("bench", "/kvwarm", "on")],
    "enabled_string": [("bench", "/kvwarm/enabled", "true")],
    "warm_eligible_missing": [("bench", "/kvwarm/warm_eligible", DELETE)],
    "eligible_with_reason": [("bench", "/kvwarm/warm_eligible", True)],
    "ineligible_without_reason": [("bench", "/kvwarm/skip_reason", DELETE)],
    "ineligible_empty_reason": [("bench", "/kvwarm/skip_reason", "")],
    "ineligible_numeric_reason": [("bench", "/kvwarm/skip_reason", 3)],
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_kvwarm_malformed(tmp_path, case):
    cell = classify(variant(tmp_path, "stamp", MALFORMED[case]))
    assert (cell.status, "kvwarm_malformed" in error_codes(cell)) == ("error", True)
    assert all((p.status, p.kv_seed_regime, p.eligible) == ("error", None, False)
               for p in cell.points)


def test_error_names_file_pointer_and_rule(tmp_path):
    cell = classify(variant(tmp_path, "stamp", [("bench", "/kvwarm/enabled", "yes")]))
    (err,) = [e for e in cell.errors if e.code == "kvwarm_malformed"]
    assert err == Diagnostic(
        file="cells/fpm-llama31-8b-decode-tp1/raw/fpm-llama31-8b-decode-tp1-worker-0/"
             "benchmark.json",
        line=None, column=None, code="kvwarm_malformed", pointer="/kvwarm/enabled",
        rule="warmup.enabled_not_boolean",
        message="rank 0: kvwarm.enabled is not a boolean (yes)")


def _stamps(reasons, native, point_type=None, kv=None):
    edits = [("bench", "/results/0/point/sample_reasons", reasons),
             ("bench", "/results/0/kv_seed_regime", native)]
    return edits


STAMP_MISMATCH = {
    "fake_native_without_stamp": _stamps(["capture"], "fake_fallback"),
    "fake_native_with_real_stamp": _stamps(["kvwarm_real_kv"], "fake_fallback"),
    "fake_native_with_two_stamps": _stamps(["kvwarm_fake_fallback", "prefill_real_seed"],
                                           "fake_fallback"),
    "real_native_with_fake_stamp": _stamps(["kvwarm_fake_fallback"], "real_kv"),
    "kda_native_without_stamp": _stamps([], "real_attention_kv_random_kda"),
    "real_prefix_on_decode": _stamps(["prefill_real_seed"], "real_prefix"),
    "fake_prefix_on_decode": _stamps(["prefill_fake_prefix"], "fake_prefix"),
    "not_applicable_stamped": _stamps(["kvwarm_fake_fallback"], "not_applicable"),
    "unstamped_stamped": _stamps(["prefill_fake_prefix"], "unstamped"),
}


@pytest.mark.parametrize("case", sorted(STAMP_MISMATCH))
def test_stamp_regime_mismatch(tmp_path, case):
    cell = classify(variant(tmp_path, "stamp", STAMP_MISMATCH[case]))
    assert "stamp_regime_mismatch" in error_codes(cell)


def test_historical_points_without_native_regime_are_not_checked(tmp_path):
    cell = classify(variant(tmp_path, "stamp", [
        ("bench", "/results/0/kv_seed_regime", DELETE),
        ("bench", "/results/1/kv_seed_regime", None)]))
    assert (cell.status, regimes(cell)) == ("ok", ["fake_fallback", "fake_fallback"])


@pytest.mark.parametrize("edits", [
    [("bench", "/kvwarm", DELETE)],
    [("bench", "/kvwarm/skip_reason", "moe_tp_balanced_by_construction")],
    [("bench", "/kvwarm/warm_eligible", True), ("bench", "/kvwarm/skip_reason", None)]],
    ids=["no_block", "reason_differs", "warm_eligible"])
def test_native_skip_contradiction(tmp_path, edits):
    cell = classify(variant(tmp_path, "native", edits))
    assert "native_skip_contradiction" in error_codes(cell)


def test_real_kv_under_ineligible_warmup(tmp_path):
    cell = classify(variant(tmp_path, "stamp", _stamps(["kvwarm_real_kv"], "real_kv")))
    assert error_codes(cell) == ["real_kv_under_ineligible_warmup"]


def test_dense_warmup_required_for_dep(tmp_path):
    cell = classify(variant(tmp_path, "stamp", [("plan", "/cells/0/parallel_strategy", "dep")]))
    assert error_codes(cell) == ["warmup_required"]


def test_config_bound_cell_requires_real_kv(tmp_path):
    cell = classify(variant(tmp_path, "stamp", [
        ("plan", "/cells/0/execution_identity/model_config_sha256", "ab" * 32)]))
    assert error_codes(cell) == ["config_bound_requires_real_kv"]


def test_config_bound_cell_with_real_kv_is_fine(tmp_path):
    cell = classify(variant(tmp_path, "stamp", [
        ("plan", "/cells/0/execution_identity/model_config_sha256", "ab" * 32),
        ("bench", "/kvwarm/warm_eligible", True), ("bench", "/kvwarm/skip_reason", None)]
        + [("bench", f"/results/{i}/point/sample_reasons", ["kvwarm_real_kv"]) for i in (0, 1)]
        + [("bench", f"/results/{i}/kv_seed_regime", "real_kv") for i in (0, 1)]))
    assert (cell.status, regimes(cell)) == ("ok", ["real_kv", "real_kv"])


def _prefill(tmp_path, kv, bound=False, native="not_applicable"):
    edits = [("plan", "/cells/0/workload_kind", "prefill")]
    for i in (0, 1):
        edits += [("bench", f"/results/{i}/point/point_type", "prefill"),
                  ("bench", f"/results/{i}/point/total_kv_read_tokens", kv),
                  ("bench", f"/results/{i}/point/sample_reasons", []),
                  ("bench", f"/results/{i}/kv_seed_regime", native)]
    if bound:
        edits.append(("plan", "/cells/0/execution_identity/model_config_sha256", "cd" * 32))
    return classify(variant(tmp_path, "stamp", edits))


def test_prefill_points_are_not_applicable(tmp_path):
    cell = _prefill(tmp_path, kv=0)
    assert (cell.status, regimes(cell)) == ("ok", ["n/a", "n/a"])
    assert all(p.eligible for p in cell.points)


def test_config_bound_prefill_reading_kv_requires_real_kv(tmp_path):
    assert error_codes(_prefill(tmp_path, kv=64, bound=True)) == ["config_bound_requires_real_kv"]
    assert regimes(_prefill(tmp_path / "b", kv=0, bound=True)) == ["n/a", "n/a"]


def test_prefill_cell_ignores_malformed_kvwarm(tmp_path):
    edits = [("plan", "/cells/0/workload_kind", "prefill"), ("bench", "/kvwarm", None)]
    for i in (0, 1):
        edits += [("bench", f"/results/{i}/point/point_type", "prefill"),
                  ("bench", f"/results/{i}/point/total_kv_read_tokens", 0),
                  ("bench", f"/results/{i}/point/sample_reasons", []),
                  ("bench", f"/results/{i}/kv_seed_regime", "not_applicable")]
    cell = classify(variant(tmp_path, "stamp", edits))
    assert (cell.status, regimes(cell)) == ("ok", ["n/a", "n/a"])


# --- two ranks ---------------------------------------------------------------------------

def _dp2(tmp_path):
    """The dp2 example with both ranks agreeing on a dense skip (a qualifying cell)."""
    campaign = copy_example(tmp_path, "dp2-peer-ineligible", dest="dp2")
    pod = next((campaign / "cells").iterdir()) / "raw"
    rank0, rank1 = sorted(pod.rglob("benchmark*.json"))
    data = load(rank1)
    data["kvwarm"] = load(rank0)["kvwarm"]
    dump(rank1, data)
    return campaign, rank0, rank1


def test_two_agreeing_ranks_qualify(tmp_path):
    campaign, _, _ = _dp2(tmp_path)
    cell = classify(campaign)
    assert (cell.status, regimes(cell)) == ("ok", [DENSE, DENSE])


def test_rank_disagreeing_on_a_point_is_dp_point_disagreement(tmp_path):
    campaign, _, rank1 = _dp2(tmp_path)
    set_at(rank1, "/results/1/point/batch_size", 8)
    cell = classify(campaign)
    assert error_codes(cell) == ["dp_point_disagreement"]


def test_rank_disagreeing_on_native_regime_is_dp_point_disagreement(tmp_path):
    campaign, _, rank1 = _dp2(tmp_path)
    set_at(rank1, "/results/0/kv_seed_regime", None)
    cell = classify(campaign)
    assert error_codes(cell) == ["dp_point_disagreement"]


def test_rank_without_kvwarm_is_warmup_disagreement(tmp_path):
    campaign, _, rank1 = _dp2(tmp_path)
    set_at(rank1, "/kvwarm")
    assert "dp_warmup_disagreement" in error_codes(classify(campaign))


def test_one_rank_failing_a_dense_check_disqualifies_the_cell(tmp_path):
    campaign, _, rank1 = _dp2(tmp_path)
    set_at(rank1, "/engine/kv_cache/groups/0/sliding_window", 1024)
    cell = classify(campaign)
    assert regimes(cell) == ["fake_fallback", "fake_fallback"]
    assert [f.reason for f in cell.qualifications["dense_synthetic_kv"].failed] == [
        "rank 1 group 0 FullAttentionSpec is not plain full attention: expected "
        "sliding_window null, attention_chunk_size null, non_causal false and no specs key; "
        "found sliding_window 1024, attention_chunk_size null, non_causal false, specs absent"]


# --- a campaign where one cell errors and the others are classified --------------------------

def test_error_cell_does_not_stop_the_other_cells(tmp_path):
    campaign = copy_example(tmp_path, "dense-legacy-stamp-format", dest="multi")
    plan_path = campaign / "collection-plan.json"
    plan = load(plan_path)
    base_id = plan["cells"][0]["cell_id"]
    for suffix in ("b", "c"):
        new_id = f"{base_id}-{suffix}"
        shutil.copytree(campaign / "cells" / base_id, campaign / "cells" / new_id)
        plan["cells"].append(dict(plan["cells"][0], cell_id=new_id))
        for prov in (campaign / "cells" / new_id).rglob("collector-provenance.json"):
            set_at(prov, "/cell_id", new_id)
    dump(plan_path, plan)
    bad = next((campaign / "cells" / f"{base_id}-b").rglob("benchmark.json"))
    set_at(bad, "/results/0/point/sample_reasons", ["kvwarm_real_kv"])
    report = api.classify([str(campaign)], policy())
    assert [(c.cell_id, c.status) for c in report.cells] == [
        (base_id, "ok"), (f"{base_id}-b", "error"), (f"{base_id}-c", "ok")]
    assert report.exit_code == 1
    assert [regimes(c) for c in report.cells] == [[DENSE, DENSE], [None, None], [DENSE, DENSE]]
    summary = report.summary
    assert (summary.cells, summary.cells_error, summary.points, summary.points_eligible) == (
        3, 1, 6, 4)
