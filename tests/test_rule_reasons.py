"""The shipped rules' reasons name the real cause and the expected value: each
reason on a real campaign (a bundled example with one field changed) that produces it."""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Callable

import pytest

from kvrules.authoring.explain.causes import qualification_failures
from kvrules.authoring.explain.point import load_traced
from kvrules.pipeline import compile_policy
from kvrules.policy.compiled import CompiledPolicy

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
CELL = "fpm-llama31-8b-decode-tp1"
BENCH = f"cells/{CELL}/raw/{CELL}-worker-0/benchmark.json"


@pytest.fixture(scope="module")
def policy() -> CompiledPolicy:
    return compile_policy()


def _reasons(policy: CompiledPolicy, tmp_path: Path,
             edit: Callable[[dict[str, Any]], None]) -> dict[str, tuple[str, ...]]:
    """dense-native-skip-format (dense-eligible) with one edit: condition -> reasons."""
    root = tmp_path / "campaign"
    shutil.copytree(EXAMPLES / "dense-native-skip-format", root)
    doc = json.loads((root / BENCH).read_text())
    edit(doc)
    (root / BENCH).write_text(json.dumps(doc))
    traced = load_traced(str(root), None, policy)
    return {c.condition: c.reasons for c in qualification_failures(traced, "dense_synthetic_kv")}


def test_a_specs_key_is_named_as_the_cause(policy: CompiledPolicy, tmp_path: Path) -> None:
    got = _reasons(policy, tmp_path,
                   lambda d: d["engine"]["kv_cache"]["groups"][0].update(specs=[]))
    assert got == {"D9": (
        "rank 0 group 0 FullAttentionSpec is not plain full attention: expected "
        "sliding_window null, attention_chunk_size null, non_causal false and no specs key; "
        "found sliding_window null, attention_chunk_size null, non_causal false, specs []",)}


def test_an_empty_group_list_is_not_called_an_array(policy: CompiledPolicy,
                                                    tmp_path: Path) -> None:
    got = _reasons(policy, tmp_path, lambda d: d["engine"]["kv_cache"].update(groups=[]))
    assert got == {"D9": ("rank 0 has no cache groups: engine.kv_cache.groups is [], "
                          "expected a non-empty list",)}


def test_a_skip_reason_names_the_expected_one(policy: CompiledPolicy, tmp_path: Path) -> None:
    got = _reasons(policy, tmp_path, lambda d: d["kvwarm"].update(skip_reason=None))
    assert got["D2"] == ("rank 0: kvwarm.skip_reason is null, expected "
                         "dense_model_content_insensitive",)


def test_an_empty_skip_reason_is_shown_quoted(policy: CompiledPolicy, tmp_path: Path) -> None:
    got = _reasons(policy, tmp_path, lambda d: d["kvwarm"].update(skip_reason=""))
    assert got["D2"] == ('rank 0: kvwarm.skip_reason is "", expected '
                         "dense_model_content_insensitive",)


def test_architectures_say_a_list_is_expected(policy: CompiledPolicy, tmp_path: Path) -> None:
    got = _reasons(policy, tmp_path,
                   lambda d: d["engine"]["model"].update(architectures="LlamaForCausalLM"))
    assert got == {"D6": (
        "rank 0 engine architectures is LlamaForCausalLM, expected exactly the plan's list "
        '["LlamaForCausalLM"] (a JSON list of the same names in the same order)',)}


def test_an_unexpected_model_says_what_was_expected(policy: CompiledPolicy,
                                                    tmp_path: Path) -> None:
    got = _reasons(policy, tmp_path,
                   lambda d: d["engine"]["model"].update(model="/models/checkpoint"))
    assert got == {"D6": (
        "rank 0 engine model /models/checkpoint is not an expected launched model: expected "
        "the plan's model_path, or a mounted checkpoint that generator-overrides.json proves",)}


def test_absent_is_spelled_one_way(policy: CompiledPolicy) -> None:
    traced = load_traced(str(EXAMPLES / "dense-no-engine-block"), None, policy)
    reasons = [r for c in qualification_failures(traced, "dense_synthetic_kv")
               for r in c.reasons]
    assert reasons[0] == "rank 0 has no engine block: engine is absent, expected an object"
    assert all("<absent>" not in r for r in reasons) and len(reasons) == 10
