"""Spec section 7 (worked outcomes) and the dense conditions D1-D9, on real artifact files.

Every case starts from a bundled example in one producer format and changes only the
evidence the case is about, so a pass proves the rules (not the fixture) decide.
"""
from __future__ import annotations

import shutil

import pytest
from helpers import copy_example, set_at
from policy_cases import (DELETE, DENSE, FORMATS, classify, error_codes, failed, files,
                          policy, regimes, variant)

from kvrules import api

BOTH = pytest.mark.parametrize("fmt", sorted(FORMATS))
FULL = {"type": "FullAttentionSpec", "dtype": "torch.bfloat16", "block_size": 16,
        "num_kv_heads": 8, "head_size": 128, "sliding_window": None,
        "attention_chunk_size": None, "non_causal": False}
GROUP = "/engine/kv_cache/groups/0"


@BOTH
def test_dense_cell_qualifies_in_both_formats(tmp_path, fmt):
    cell = classify(variant(tmp_path, fmt))
    assert (cell.status, regimes(cell), failed(cell)) == ("ok", [DENSE, DENSE], [])
    assert all(p.eligible for p in cell.points)
    assert cell.qualifications["dense_synthetic_kv"].eligible
    step = "regime.step5_dense_stamp_format" if fmt == "stamp" else "regime.step5_dense_native_format"
    assert {p.decided_by for p in cell.points} == {step}
    assert all(p.trace and p.trace[-1] == "regime.eligible" for p in cell.points)


DISQUALIFY = {
    "sliding_window": ([("bench", GROUP, {**FULL, "type": "SlidingWindowSpec",
                                          "sliding_window": 4096})], ["D9"]),
    "no_engine_block": ([("bench", "/engine", DELETE)], ["D5", "D6", "D7", "D8", "D9"]),
    "not_enabled": ([("bench", "/kvwarm/enabled", False)], ["D2"]),
}


@BOTH
@pytest.mark.parametrize("case", sorted(DISQUALIFY))
def test_disqualified_dense_cell_is_fake_fallback_with_condition_named(tmp_path, fmt, case):
    edits, expected = DISQUALIFY[case]
    cell = classify(variant(tmp_path, fmt, edits))
    assert (cell.status, regimes(cell), failed(cell)) == ("ok", ["fake_fallback"] * 2, expected)
    assert not any(p.eligible for p in cell.points)


@BOTH
def test_d1_off_gives_the_legacy_classification(tmp_path, fmt):
    cell = classify(variant(tmp_path, fmt), pol=policy(dense=False))
    assert (regimes(cell), failed(cell)) == (["fake_fallback"] * 2, ["D1"])


def test_native_skip_point_with_stamp_is_stamp_regime_mismatch(tmp_path):
    cell = classify(variant(tmp_path, "native", [
        ("bench", "/results/0/point/sample_reasons", ["capture", "kvwarm_fake_fallback"])]))
    assert (cell.status, error_codes(cell), regimes(cell)) == (
        "error", ["stamp_regime_mismatch"], [None, None])
    (err,) = cell.errors
    assert (err.file.endswith("benchmark.json"), err.pointer, err.rule) == (
        True, "/results/0/kv_seed_regime", "stamps.other_regime_stamped")


def test_native_skip_under_warm_eligible_block_is_contradiction(tmp_path):
    cell = classify(variant(tmp_path, "native", [
        ("bench", "/kvwarm/warm_eligible", True), ("bench", "/kvwarm/skip_reason", None)]))
    assert error_codes(cell) == ["native_skip_contradiction"]


@pytest.mark.parametrize("reasons", [["kvwarm_fake_fallback"], ["capture", "kvwarm_fake_fallback"]])
def test_moe_tp_approved_skip(tmp_path, reasons):
    cell = classify(variant(tmp_path, "stamp", [
        ("bench", "/kvwarm/skip_reason", "moe_tp_balanced_by_construction"),
        ("bench", "/results/0/point/sample_reasons", reasons)]))
    assert regimes(cell) == ["skip:moe_tp_balanced_by_construction"] * 2
    assert all(p.eligible for p in cell.points)


def test_warm_eligible_block_gives_real_kv_and_fake_fallback(tmp_path):
    cell = classify(variant(tmp_path, "stamp", [
        ("bench", "/kvwarm/warm_eligible", True), ("bench", "/kvwarm/skip_reason", None),
        ("bench", "/results/0/point/sample_reasons", ["kvwarm_real_kv"]),
        ("bench", "/results/0/kv_seed_regime", "real_kv")]))
    assert (cell.status, regimes(cell)) == ("ok", ["real_kv", "fake_fallback"])
    assert [p.eligible for p in cell.points] == [True, False]


def test_real_attention_kv_random_kda_keeps_its_name(tmp_path):
    cell = classify(variant(tmp_path, "stamp", [
        ("bench", "/kvwarm/warm_eligible", True), ("bench", "/kvwarm/skip_reason", None),
        ("bench", "/results/0/point/sample_reasons", ["kvwarm_real_kv"]),
        ("bench", "/results/0/kv_seed_regime", "real_attention_kv_random_kda")]))
    assert regimes(cell) == ["real_attention_kv_random_kda", "fake_fallback"]


@pytest.mark.parametrize("strategy,expected", [
    ("tp", ("ok", [], ["legacy", "legacy"])),
    ("single", ("ok", [], ["legacy", "legacy"])),
    ("dep", ("error", ["warmup_required"], [None, None])),
    ("tep", ("error", ["warmup_required"], [None, None])),
    ("pure_tp", ("error", ["warmup_required"], [None, None]))])
def test_no_kvwarm_block(tmp_path, strategy, expected):
    campaign = copy_example(tmp_path, "legacy-no-warmup-block", dest="c")
    set_at(files(campaign)["plan"], "/cells/0/parallel_strategy", strategy)
    cell = classify(campaign)
    assert (cell.status, error_codes(cell), regimes(cell)) == expected


@pytest.mark.parametrize("reason", ["prefix_caching_disabled", "flag_off", "peer_ineligible",
                                    "dataset_unavailable: gone", "content_too_shallow: 3"])
def test_unapproved_skip_reasons_are_fake_fallback(tmp_path, reason):
    cell = classify(variant(tmp_path, "stamp", [("bench", "/kvwarm/skip_reason", reason)]))
    assert (cell.status, regimes(cell), failed(cell)) == ("ok", ["fake_fallback"] * 2, ["D2"])
    assert {p.decided_by for p in cell.points} == {"regime.step6_fake_stamp"}


def test_unstamped_point_under_warmup_fails_closed(tmp_path):
    cell = classify(variant(tmp_path, "stamp", [
        ("bench", "/kvwarm/warm_eligible", True), ("bench", "/kvwarm/skip_reason", None),
        ("bench", "/results/0/point/sample_reasons", ["capture"]),
        ("bench", "/results/0/kv_seed_regime", "unstamped")]))
    assert regimes(cell) == ["fake_fallback", "fake_fallback"]
    assert cell.points[0].decided_by == "regime.step8_no_evidence"


def test_dp2_peer_ineligible_is_warmup_disagreement():
    cell = classify(api_example("dp2-peer-ineligible"))
    assert (cell.status, error_codes(cell), len(cell.points)) == (
        "error", ["dp_warmup_disagreement"], 2)
    assert not any(p.eligible for p in cell.points)


def api_example(name):
    from helpers import EXAMPLES
    return EXAMPLES / name


# --- D-conditions failing alone, in both formats where they apply -------------------------

ALONE = {
    "D2_not_enabled": ([("bench", "/kvwarm/enabled", False)], "D2"),
    "D2_enabled_not_boolean": ([("bench", "/kvwarm/enabled", 1)], None),  # kvwarm_malformed
    "D3_moe": ([("plan", "/capability/is_moe", True)], "D3"),
    "D3_is_moe_string": ([("plan", "/capability/is_moe", "false")], "D3"),
    "D3_attention": ([("plan", "/capability/attention_source", "mla_module")], "D3"),
    # without a payload object the frozen identity (D6) cannot be compared either
    "D3_payload": ([("plan", "/capability/model_config/payload", "llama")], "D3+D6"),
    "D4_experts": ([("plan", "/capability/model_config/payload/num_experts", 8)], "D4"),
    "D4_one_expert": ([("plan", "/capability/model_config/payload/num_local_experts", 1)], "D4"),
    "D4_text_config": ([("plan", "/capability/model_config/payload/text_config",
                         {"n_routed_experts": 64})], "D4"),
    "D5_capture_error": ([("bench", "/engine/capture_error", "no worker")], "D5"),
    "D6_model": ([("bench", "/engine/model/model", "other/model")], "D6"),
    "D6_model_type": ([("bench", "/engine/model/model_type", "mistral")], "D6"),
    "D6_architectures": ([("bench", "/engine/model/architectures",
                           ["LlamaForCausalLM", "Extra"])], "D6"),
    "D7_tp": ([("bench", "/engine/parallel/tensor_parallel_size", 2)], "D7"),
    "D7_tp_boolean": ([("bench", "/engine/parallel/tensor_parallel_size", True)], "D7"),
    "D7_missing_key": ([("bench", "/engine/parallel/pipeline_parallel_size", DELETE)], "D7"),
    "D7_dp_rank": ([("bench", "/engine/parallel/data_parallel_rank", 1)], "D7"),
    "D7_cp": ([("bench", "/engine/parallel/decode_context_parallel_size", 2)], "D7"),
    "D7_cp_absent_in_plan": ([("plan", "/cells/0/topology/cp", DELETE),
                              ("bench", "/engine/parallel/prefill_context_parallel_size", 2)],
                             "D7"),
    "D7_expert_parallel": ([("bench", "/engine/parallel/enable_expert_parallel", True)], "D7"),
    "D7_expert_parallel_missing": ([("bench", "/engine/parallel/enable_expert_parallel",
                                     DELETE)], "D7"),
    "D8_version": ([("bench", "/engine/versions/vllm", "0.12.0")], "D8"),
    "D9_sliding": ([("bench", GROUP + "/sliding_window", 4096)], "D9"),
    "D9_chunked": ([("bench", GROUP + "/attention_chunk_size", 8192)], "D9"),
    "D9_non_causal": ([("bench", GROUP + "/non_causal", True)], "D9"),
    "D9_key_absent": ([("bench", GROUP + "/sliding_window", DELETE)], "D9"),
    "D9_mla": ([("bench", GROUP, {**FULL, "type": "MLAAttentionSpec"})], "D9"),
    "D9_mamba": ([("bench", "/engine/kv_cache/groups", [FULL, {"type": "MambaSpec"}])], "D9"),
    "D9_typeless": ([("bench", GROUP + "/type", DELETE)], "D9"),
    "D9_empty": ([("bench", "/engine/kv_cache/groups", [])], "D9"),
    "D9_empty_wrapper": ([("bench", GROUP, {"type": "UniformTypeKVCacheSpecs",
                                            "specs": []})], "D9"),
    "D9_wrapped_window": ([("bench", GROUP, {"type": "UniformTypeKVCacheSpecs", "specs": [
        FULL, {**FULL, "type": "SlidingWindowSpec", "sliding_window": 128}]})], "D9"),
    "D9_full_with_specs": ([("bench", GROUP, {**FULL, "specs": [FULL]})], "D9"),
}


@BOTH
@pytest.mark.parametrize("case", sorted(ALONE))
def test_each_dense_condition_failing_alone(tmp_path, fmt, case):
    edits, condition = ALONE[case]
    cell = classify(variant(tmp_path, fmt, edits))
    if condition is None:
        assert error_codes(cell) == ["kvwarm_malformed"]
        return
    assert (cell.status, failed(cell), regimes(cell)) == (
        "ok", condition.split("+"), ["fake_fallback", "fake_fallback"])


@BOTH
def test_wrapped_full_attention_still_qualifies(tmp_path, fmt):
    wrapper = {"type": "UniformTypeKVCacheSpecs", "specs": [FULL, FULL]}
    cell = classify(variant(tmp_path, fmt, [("bench", GROUP, wrapper)]))
    assert (failed(cell), regimes(cell)) == ([], [DENSE, DENSE])


@BOTH
def test_no_plan_cannot_prove_dense(tmp_path, fmt):
    campaign = variant(tmp_path, fmt)
    cell_dir = files(campaign)["cell"]
    report = api.classify([str(cell_dir)], policy())
    (cell,) = report.cells
    assert (cell.status, regimes(cell)) == ("ok", ["fake_fallback"] * 2)
    assert {"D3", "D6"} <= set(failed(cell))


@BOTH
def test_missing_provenance_fails_d8(tmp_path, fmt):
    campaign = variant(tmp_path, fmt)
    files(campaign)["prov"].unlink()
    cell = classify(campaign)
    assert (failed(cell), regimes(cell)) == (["D8"], ["fake_fallback"] * 2)


# --- mounted checkpoint (D6 launch evidence) -----------------------------------------------

def _planner_digest(resolved):
    """The digest the real planners freeze (spec 2.4), written out independently of kvrules."""
    import hashlib
    import json
    text = json.dumps(resolved, sort_keys=True, separators=(",", ":"))  # ensure_ascii=True
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


MOUNT = {"k8s_model_path_in_pvc": "checkpoint", "k8s_pvc_mount_path": "/models"}
RESOLVED_ENV = [{"name": "DYN_BENCH_KV_WARMUP", "value": "on"},
                {"name": "DYN_BENCH_PREFILL_REAL_SEED", "value": "on"}]


def _mounted(tmp_path, fmt, run_model="/models/checkpoint", request="/models/checkpoint",
             digest_ok=True, overrides=None, resolved=None):
    import json
    overrides = overrides if overrides is not None else {"K8sConfig": dict(MOUNT)}
    resolved = resolved if resolved is not None else {"K8sConfig": {**MOUNT,
                                                                    "extra_env": RESOLVED_ENV}}
    campaign = variant(tmp_path, fmt, [("bench", "/engine/model/model", "/models/checkpoint")])
    paths = files(campaign)
    (campaign / "generator-overrides.json").write_text(json.dumps(overrides))
    set_at(paths["plan"], "/generator_config_sha256",
           _planner_digest(resolved) if digest_ok else "0" * 64)
    (paths["cell"] / "generator-request.json").write_text(
        json.dumps({"ServiceConfig": {"model_path": request}}))
    (paths["cell"] / "run.sh").write_text(
        f"#!/bin/sh\nengine_command=(python3 -m dynamo.vllm --model {run_model} --tp 1)\n")
    return classify(campaign)


@BOTH
def test_mounted_checkpoint_digest_is_of_the_resolved_overrides(tmp_path, fmt):
    """The archive holds the overrides as written; the plan froze the resolved form."""
    archived = {"K8sConfig": {**MOUNT, "extra_env": [{"name": "HF_HOME", "value": "/café"}]}}
    resolved = {"K8sConfig": {**MOUNT, "extra_env": [{"name": "HF_HOME", "value": "/café"},
                                                     *RESOLVED_ENV]}}
    cell = _mounted(tmp_path, fmt, overrides=archived, resolved=resolved)
    assert (failed(cell), regimes(cell)) == ([], [DENSE, DENSE])


@BOTH
def test_mounted_checkpoint_archived_in_resolved_form_gives_the_same_digest(tmp_path, fmt):
    resolved = {"K8sConfig": {**MOUNT, "extra_env": RESOLVED_ENV}}
    cell = _mounted(tmp_path, fmt, overrides=resolved, resolved=resolved)
    assert (failed(cell), regimes(cell)) == ([], [DENSE, DENSE])


@BOTH
def test_a_declared_switch_keeps_its_value(tmp_path, fmt):
    env = [{"name": "DYN_BENCH_KV_WARMUP", "value": "OFF"}]
    resolved = {"K8sConfig": {**MOUNT, "extra_env": env + RESOLVED_ENV[1:]}}
    cell = _mounted(tmp_path, fmt, overrides={"K8sConfig": {**MOUNT, "extra_env": env}},
                    resolved=resolved)
    assert (failed(cell), regimes(cell)) == ([], [DENSE, DENSE])


@BOTH
@pytest.mark.parametrize("env", [[{"name": "DYN_BENCH_KV_WARMUP", "value": "maybe"}],
                                 [{"name": "DYN_BENCH_PREFILL_REAL_SEED", "value": 1}],
                                 [{"value": "on"}], "not a list"])
def test_unresolvable_overrides_prove_nothing(tmp_path, fmt, env):
    overrides = {"K8sConfig": {**MOUNT, "extra_env": env}}
    cell = _mounted(tmp_path, fmt, overrides=overrides, resolved=overrides)
    assert "D6" in failed(cell)
    assert any("generator-overrides.json proves nothing" in c.reason
               for c in cell.qualifications["dense_synthetic_kv"].failed)


@BOTH
def test_mounted_checkpoint_with_matching_launch_evidence_qualifies(tmp_path, fmt):
    cell = _mounted(tmp_path, fmt)
    assert (failed(cell), regimes(cell)) == ([], [DENSE, DENSE])


@pytest.mark.parametrize("kwargs", [{"digest_ok": False}, {"run_model": "'$MODEL'"},
                                    {"request": "/models/other"}, {"run_model": "/x"}])
def test_mounted_checkpoint_without_full_launch_evidence_fails_d6(tmp_path, kwargs):
    cell = _mounted(tmp_path, "stamp", **kwargs)
    assert (failed(cell), regimes(cell)) == (["D6"], ["fake_fallback"] * 2)


# --- the rules decide: change the policy, the verdicts follow --------------------------------

def _policy_copy(tmp_path):
    from kvrules.resources import rules_dir
    target = tmp_path / "rules"
    target.mkdir()
    for entry in rules_dir().iterdir():
        if entry.name.endswith(".yaml"):
            (target / entry.name).write_text(entry.read_text(encoding="utf-8"))
    return target


def _drop_rule(path, rule_id):
    import yaml
    data = yaml.safe_load(path.read_text())
    data["rules"] = [r for r in data["rules"] if r["id"] != rule_id]
    for decision in data.get("decisions", []):  # a step of an ordered decision is a rule too
        decision["steps"] = [s for s in decision["steps"] if s["id"] != rule_id]
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def test_removing_the_native_dense_rule_changes_only_the_native_format(tmp_path):
    rules = _policy_copy(tmp_path)
    _drop_rule(rules / "regime.yaml", "regime.step5_dense_native_format")
    edited = api.load_policy(rules)
    native = classify(variant(tmp_path, "native", name="n"), pol=edited)
    stamp = classify(variant(tmp_path, "stamp", name="s"), pol=edited)
    assert regimes(native) == ["fake_fallback"] * 2
    assert regimes(stamp) == [DENSE, DENSE]


def test_removing_a_cache_rule_lets_sliding_window_through(tmp_path):
    rules = _policy_copy(tmp_path)
    _drop_rule(rules / "cache_kinds.yaml", "cache.d9_unknown_group_kind")
    cell = classify(copy_example(tmp_path, "dense-sliding-window", dest="c"),
                    pol=api.load_policy(rules))
    assert regimes(cell) == [DENSE, DENSE]


def test_eligibility_list_lives_in_the_rules(tmp_path):
    rules = _policy_copy(tmp_path)
    text = (rules / "regime.yaml").read_text()
    (rules / "regime.yaml").write_text(text.replace(
        'legacy, n/a, "skip:moe_tp_balanced_by_construction", "skip:dense_model_content_insensitive"]',
        'legacy, n/a, "skip:moe_tp_balanced_by_construction"]'))
    cell = classify(variant(tmp_path, "stamp"), pol=api.load_policy(rules))
    assert regimes(cell) == [DENSE, DENSE]
    assert not any(p.eligible for p in cell.points)
