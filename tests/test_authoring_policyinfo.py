"""The policy analysis the authoring tools share: fact identity keys hold on real cells, and
the shipped policy's regime deciders are read as the spec's ordered steps."""
from __future__ import annotations

from pathlib import Path

from kvrules.artifacts.discover import discover
from kvrules.artifacts.load import load_cell
from kvrules.authoring.policyinfo import FACT_KEYS, Proposal, deciders, proposals
from kvrules.facts.extract import extract_cell
from kvrules.pipeline import compile_policy

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_fact_keys_identify_every_extracted_fact() -> None:
    for example in sorted(p for p in EXAMPLES.iterdir() if p.is_dir()):
        for ref in discover([str(example)]):
            cell = extract_cell(load_cell(ref))
            facts = cell.facts + [row.fact for row in cell.points]
            seen: set[tuple[object, ...]] = set()
            for fact in facts:
                keys = FACT_KEYS[fact.type]
                key = (fact.type, *(fact.fields.get(k) for k in keys))
                assert key not in seen, (example.name, key)
                seen.add(key)


def test_the_shipped_regime_steps() -> None:
    policy = compile_policy().policy
    assert proposals(policy) == [Proposal("candidate", "regime", "step", "point")]
    steps = [(d.rule.id, d.order, d.regime, d.subject) for d in deciders(policy)]
    assert steps == [
        ("regime.step1_prefill_no_kv", 1, "n/a", "point"),
        ("regime.step1_prefill", 1, "n/a", "point"),
        ("regime.step2_legacy", 2, "legacy", "point"),
        ("regime.step2_legacy_without_plan", 2, "fake_fallback", "point"),
        ("regime.step3_moe_tp_skip", 3, "skip:moe_tp_balanced_by_construction", "point"),
        ("regime.step4_real_kv", 4, "real_kv", "point"),
        ("regime.step4_real_kv_random_kda", 4, "real_attention_kv_random_kda", "point"),
        ("regime.step5_dense_stamp_format", 5, "skip:dense_model_content_insensitive", "point"),
        ("regime.step5_dense_native_format", 5, "skip:dense_model_content_insensitive",
         "point"),
        ("regime.step6_fake_stamp", 6, "fake_fallback", "point"),
        ("regime.step7_unapproved_skip", 7, "fake_fallback", "point"),
        ("regime.step8_no_evidence", 8, "fake_fallback", "point")]
