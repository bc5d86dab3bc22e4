"""The policy analysis the authoring tools share: fact identity keys hold on real cells, and
the shipped policy's regime deciders are read as the spec's ordered steps."""
from __future__ import annotations

from pathlib import Path

from kvrules.artifacts.discover import discover
from kvrules.artifacts.load import load_cell
from kvrules.authoring.policyinfo import FACT_KEYS, deciders
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
    """Read from the ordered decision of rules/regime.yaml: positions, not guessed steps."""
    policy = compile_policy().policy
    steps = [(d.rule.id, d.order, d.regime, d.subject, d.decision and d.decision.id)
             for d in deciders(policy)]
    assert steps == [(rid, k, regime, "point", "regime") for k, (rid, regime) in enumerate([
        ("regime.step1_prefill_no_kv", "n/a"),
        ("regime.step1_prefill", "n/a"),
        ("regime.step2_legacy", "legacy"),
        ("regime.step2_legacy_without_plan", "fake_fallback"),
        ("regime.step3_moe_tp_skip", "skip:moe_tp_balanced_by_construction"),
        ("regime.step4_real_kv_random_kda", "real_attention_kv_random_kda"),
        ("regime.step4_real_kv", "real_kv"),
        ("regime.step5_dense_stamp_format", "skip:dense_model_content_insensitive"),
        ("regime.step5_dense_native_format", "skip:dense_model_content_insensitive"),
        ("regime.step6_fake_stamp", "fake_fallback"),
        ("regime.step7_unapproved_skip", "fake_fallback"),
        ("regime.step8_no_evidence", "fake_fallback")], 1)]
