"""Ordered decisions (``decisions:``): the documented example is the shipped policy and runs as
a policy, the compiler lowers a decision to stratified rules in which the first step that
holds decides, broken decisions are located diagnostics (never a traceback), and the
authoring tools (lint, explain, coverage) read the block."""
from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import doc_pages
import pytest
import yaml
from typer.testing import CliRunner

from helpers import cli_runner

from kvrules import api
from kvrules.artifacts.discover import discover
from kvrules.artifacts.load import load_cell
from kvrules.authoring.check import check_policy
from kvrules.authoring.coverage import Coverage
from kvrules.authoring.explain.point import PointExplanation, explain
from kvrules.authoring.explain.joins import trace_cell
from kvrules.authoring.policyinfo import deciders
from kvrules.cli.rules import app
from kvrules.facts.extract import extract_cell
from kvrules.pipeline import compile_policy
from kvrules.policy import codes
from kvrules.policy.compiled import CompiledPolicy

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
SHIPPED = ROOT / "rules" / "regime.yaml"
REGIMES = ["n/a", "legacy", "real_kv", "real_attention_kv_random_kda", "fake_fallback",
           "skip:moe_tp_balanced_by_construction", "skip:dense_model_content_insensitive"]
HEADER = {"policy": {"name": "mini", "version": "1",
                     "parameters": {"dense_synthetic_kv": {"type": "boolean", "default": True}},
                     "regimes": REGIMES, "error_codes": ["stamp_regime_mismatch"]}}
SHIPPED_STEPS = [
    "regime.step1_prefill_no_kv", "regime.step1_prefill", "regime.step2_legacy",
    "regime.step2_legacy_without_plan", "regime.step3_moe_tp_skip",
    "regime.step4_real_kv_random_kda", "regime.step4_real_kv",
    "regime.step5_dense_stamp_format", "regime.step5_dense_native_format",
    "regime.step6_fake_stamp", "regime.step7_unapproved_skip", "regime.step8_no_evidence"]


def readme_example() -> str:
    """The YAML between ``<!-- decision-example -->`` and its end marker in the documentation."""
    return doc_pages.block("decision-example", "yaml")


def write_policy(root: Path, rules: str, header: dict[str, Any] | None = None) -> Path:
    """A policy directory: a header file and one rule file."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "policy.yaml").write_text(yaml.safe_dump(header or HEADER, sort_keys=False),
                                      encoding="utf-8")
    (root / "rules.yaml").write_text(textwrap.dedent(rules), encoding="utf-8")
    return root


def decisions_of(text: str) -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = yaml.safe_load(text)["decisions"]
    return data


def verdicts(policy_dir: Path, example: str) -> list[tuple[str | None, str | None]]:
    report = api.classify([str(EXAMPLES / example)], api.load_policy(policy_dir))
    return [(p.kv_seed_regime, p.decided_by) for c in report.cells for p in c.points]


def traced(cp: CompiledPolicy, example: str) -> Any:
    (ref,) = discover([str(EXAMPLES / example)])
    return trace_cell(cp, extract_cell(load_cell(ref)))


# --- the documented example -----------------------------------------------------------------

def test_the_readme_example_is_an_excerpt_of_the_shipped_decision() -> None:
    (mine,) = decisions_of(readme_example())
    (shipped,) = decisions_of(SHIPPED.read_text(encoding="utf-8"))
    assert {k: v for k, v in mine.items() if k != "steps"} == \
        {k: v for k, v in shipped.items() if k != "steps"}
    by_id = {s["id"]: s for s in shipped["steps"]}
    ids = [s["id"] for s in mine["steps"]]
    assert ids == [i for i in SHIPPED_STEPS if i in ids]  # same relative order
    for step in mine["steps"]:
        assert step == by_id[step["id"]], step["id"]


def test_the_readme_example_runs_as_a_policy(tmp_path: Path) -> None:
    policy = write_policy(tmp_path / "p", readme_example())
    assert check_policy(str(policy)).diagnostics == ()
    assert verdicts(policy, "moe-tp-approved-skip") == [
        ("skip:moe_tp_balanced_by_construction", "regime.step3_moe_tp_skip")] * 2
    assert verdicts(policy, "dense-legacy-stamp-format") == [
        ("fake_fallback", "regime.step6_fake_stamp")] * 2


# --- lowering and semantics ----------------------------------------------------------------

def test_the_shipped_decision_lowers_to_its_steps_and_one_pick_rule() -> None:
    cp = compile_policy()
    (decision,) = cp.policy.decisions
    assert [s.id for s in decision.steps] == SHIPPED_STEPS
    ids = [r.id for r in cp.policy.rules]
    assert [i for i in ids if i in SHIPPED_STEPS] == SHIPPED_STEPS
    assert "regime.first_matching_step" in ids
    assert "candidate" not in cp.policy.derived
    assert cp.policy.derived["regime_candidate"] == {"point": "string", "step": "integer",
                                                     "regime": "any"}
    steps = [cp.rules[i] for i in SHIPPED_STEPS]
    assert [r.actions[0].args["set"]["step"] for r in steps] == list(range(1, 13))
    assert all(r.patterns[0].fact == "point" for r in steps)  # the subject is bound
    assert cp.strata["regime.first_matching_step"] > max(cp.strata[i] for i in SHIPPED_STEPS)


def test_the_first_step_that_holds_decides_in_written_order(tmp_path: Path) -> None:
    (decision,) = decisions_of(readme_example())
    decision["steps"].insert(0, decision["steps"].pop())  # "otherwise" first: it always wins
    policy = write_policy(tmp_path / "p", yaml.safe_dump({"decisions": [decision]}))
    assert verdicts(policy, "moe-tp-approved-skip") == [
        ("fake_fallback", "regime.step8_no_evidence")] * 2
    found = check_policy(str(policy)).diagnostics  # and the lint says so, step by step
    assert [(d.code, d.rule) for d in found] == [
        ("rule_unreachable_step", s["id"]) for s in decision["steps"][1:]]


def test_a_step_may_bind_the_subject_under_another_alias(tmp_path: Path) -> None:
    policy = write_policy(tmp_path / "p", """\
        decisions:
          - id: regime
            description: d
            subject: point
            as: p
            result: regime
            steps:
              - id: s.decode
                description: decode points read real KV (for this test)
                when: [{fact: p, where: {point_type: decode}}]
                then: real_kv
                reason: "point {p.benchmark_id} is a decode point"
              - id: s.other
                description: otherwise
                then: fake_fallback
                reason: other
        """.replace("fact: p,", "fact: point, as: p,"))
    assert check_policy(str(policy)).diagnostics == ()
    assert verdicts(policy, "moe-tp-approved-skip") == [("real_kv", "s.decode")] * 2


def test_decided_by_is_unchanged_on_every_bundled_example() -> None:
    expected = {"dense-legacy-stamp-format": "regime.step5_dense_stamp_format",
                "dense-native-skip-format": "regime.step5_dense_native_format",
                "dense-no-engine-block": "regime.step7_unapproved_skip",
                "dense-sliding-window": "regime.step7_unapproved_skip",
                "legacy-no-warmup-block": "regime.step2_legacy",
                "moe-tp-approved-skip": "regime.step3_moe_tp_skip"}
    policy = api.load_policy()
    for example, step in expected.items():
        report = api.classify([str(EXAMPLES / example)], policy)
        assert {p.decided_by for c in report.cells for p in c.points} == {step}, example


# --- broken decisions: located diagnostics, never a traceback ------------------------------

STEP_OK = """\
              - id: s.last
                description: otherwise
                then: fake_fallback
                reason: other
"""


def _decision(steps: str, head: str = "subject: point") -> str:
    return ("decisions:\n  - id: regime\n    description: d\n    " + head +
            "\n    result: regime\n    steps:\n" + textwrap.indent(textwrap.dedent(steps), "      "))


BROKEN: dict[str, tuple[str, list[tuple[str, str, str | None]]]] = {
    "unknown fact in a step": (_decision("""\
        - id: s.one
          description: x
          when: [{fact: pointt}]
          then: real_kv
          reason: x
        """), [(codes.RULE_UNKNOWN_FACT, "/decisions/0/steps/0/when/0", "s.one")]),
    "unknown field in a step": (_decision("""\
        - id: s.one
          description: x
          when: [{fact: point, where: {no_such_field: 1}}]
          then: real_kv
          reason: x
        """), [(codes.RULE_UNKNOWN_FIELD, "/decisions/0/steps/0/when/0/where/no_such_field",
                "s.one")]),
    "then refers to an unbound alias": (_decision("""\
        - id: s.one
          description: x
          then: {ref: warmup.skip_reason}
          reason: x
        """), [(codes.RULE_UNKNOWN_ALIAS, "/decisions/0/steps/0/then", "s.one")]),
    "reason refers to an unbound alias": (_decision("""\
        - id: s.one
          description: x
          then: real_kv
          reason: "{cell.cell_id}"
        """), [(codes.RULE_UNKNOWN_ALIAS, "/decisions/0/steps/0/reason", "s.one")]),
    "regime not in the vocabulary": (_decision("""\
        - id: s.one
          description: x
          when: [{fact: point, where: {point_type: decode}}]
          then: legacy_kv
          reason: x
        """), [(codes.RULE_VOCABULARY_ERROR, "/decisions/0/steps/0/then", "s.one")]),
    "duplicate step id": (_decision("""\
        - id: s.one
          description: x
          when: [{fact: point, where: {point_type: decode}}]
          then: real_kv
          reason: x
        - id: s.one
          description: y
          then: fake_fallback
          reason: y
        """), [(codes.RULE_DUPLICATE_ID, "/decisions/0/steps/1", "s.one")]),
    "empty steps": ("decisions:\n  - {id: regime, description: d, subject: point, "
                    "result: regime, steps: []}\n",
                    [(codes.RULE_SCHEMA_ERROR, "/decisions/0/steps", "regime")]),
    "a step without then": (_decision("""\
        - id: s.one
          description: x
          reason: x
        """), [(codes.RULE_SCHEMA_ERROR, "/decisions/0/steps/0", "s.one")]),
    "decisions is not a list": ("decisions: 3\n",
                                [(codes.RULE_SCHEMA_ERROR, "/decisions", None)]),
    "unknown result": (_decision(STEP_OK).replace("result: regime", "result: verdict"),
                       [(codes.RULE_SCHEMA_ERROR, "/decisions/0/result", "regime")]),
    "unknown subject": (_decision(STEP_OK, "subject: pointt"),
                        [(codes.RULE_UNKNOWN_FACT, "/decisions/0/subject", "regime")]),
    "a regime decided about cells": (_decision(STEP_OK, "subject: cell"),
                                     [(codes.RULE_UNSUPPORTED, "/decisions/0/subject",
                                       "regime")]),
    "the subject alias bound to another fact": (_decision("""\
        - id: s.one
          description: x
          when: [{fact: cell, as: point}]
          then: real_kv
          reason: x
        """), [(codes.RULE_DUPLICATE_ALIAS, "/decisions/0/steps/0/when/0", "s.one")]),
    "a step that reads the decision's own result": (_decision("""\
        - id: s.one
          description: x
          when: [{fact: verdict_regime, as: v}]
          then: real_kv
          reason: x
        """), [(codes.RULE_NEGATION_CYCLE, "/decisions/0", "regime.first_matching_step")]),
}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_a_broken_decision_is_a_located_diagnostic(tmp_path: Path, name: str) -> None:
    text, expected = BROKEN[name]
    policy = write_policy(tmp_path / "p", text)
    found = check_policy(str(policy)).diagnostics
    assert [(d.code, d.pointer, d.rule) for d in found if d.severity == "error"] == expected
    assert all(d.file.endswith("rules.yaml") and d.line > 0 for d in found)


def test_diagnostics_point_at_the_line_of_the_broken_key(tmp_path: Path) -> None:
    lines = {"unknown subject": (4, 14), "regime not in the vocabulary": (10, 15),
             "unknown fact in a step": (9, 16)}
    for name, where in lines.items():
        policy = write_policy(tmp_path / name.replace(" ", "_"), BROKEN[name][0])
        (found,) = check_policy(str(policy)).diagnostics
        assert (found.line, found.column) == where, name


def test_a_cycle_through_the_order_names_the_decision(tmp_path: Path) -> None:
    text, _ = BROKEN["a step that reads the decision's own result"]
    (found,) = check_policy(str(write_policy(tmp_path / "p", text))).diagnostics
    assert found.message == ("decision 'regime' depends on its own result: a step reads a "
                             "fact derived from the regime it decides, so no order of its "
                             "steps exists")


def test_two_decisions_with_one_id_and_a_clashing_derived_fact(tmp_path: Path) -> None:
    one = _decision(STEP_OK)
    two = one.replace("decisions:\n", "").replace("s.last", "s.again")
    policy = write_policy(tmp_path / "p", one + two)
    found = check_policy(str(policy)).diagnostics
    assert [(d.code, d.pointer, d.line) for d in found] == [
        (codes.RULE_DUPLICATE_ID, "/decisions/1", 11)]
    header = {"policy": {**HEADER["policy"], "derived": {"regime_candidate": {"fields": {}}}}}
    clash = write_policy(tmp_path / "q", one, header)
    assert [d.code for d in check_policy(str(clash)).diagnostics] == [codes.RULE_DUPLICATE_ID]


def test_rules_check_never_tracebacks_on_broken_decisions(tmp_path: Path) -> None:
    runner = cli_runner()
    for i, (text, _) in enumerate(BROKEN.values()):
        policy = write_policy(tmp_path / f"p{i}", text)
        result = runner.invoke(app, ["check", str(policy)])
        assert result.exit_code == 1, (text, result.output)
        assert result.exception is None or isinstance(result.exception, SystemExit)


def test_a_hand_written_candidate_without_a_regime_no_longer_crashes_check(
        tmp_path: Path) -> None:
    """rules check must not guess a decision's order from a hand-written candidate fact (it
    used to raise KeyError: 'regime')."""
    header = {"policy": {**HEADER["policy"], "derived": {"candidate": {"fields": {
        "point": {"type": "string"}, "step": {"type": "integer"},
        "regime": {"type": "string"}}}}}}
    policy = write_policy(tmp_path / "p", """\
        rules:
          - id: propose
            description: proposes a candidate without a regime
            when: [{fact: point}]
            then: {derive: {fact: candidate, set: {point: {ref: point.id}, step: 1}}}
            reason: x
          - id: decide
            description: the lowest step decides
            when:
              - {fact: candidate, as: c}
              - none: {fact: candidate, where: {point: {ref: c.point}, step: {lt: {ref: c.step}}}}
            then: {regime: {point: {ref: c.point}, value: {ref: c.regime}}}
            reason: x
        """, header)
    assert check_policy(str(policy)).errors == 0


# --- authoring tools read the block --------------------------------------------------------

def test_steps_of_one_decision_are_ordered_but_a_second_decision_is_not(
        tmp_path: Path) -> None:
    (decision,) = decisions_of(readme_example())
    other = {**decision, "id": "other",
             "steps": [{**s, "id": s["id"].replace("regime.", "other.")}
                       for s in decision["steps"]]}
    other["steps"][0] = {**other["steps"][0], "then": "fake_fallback"}
    policy = write_policy(tmp_path / "p", yaml.safe_dump({"decisions": [decision, other]}))
    found = check_policy(str(policy)).diagnostics
    assert {(d.code, d.rule) for d in found} >= {
        ("rule_ambiguous_regime", "other.step1_prefill_no_kv")}
    assert all(d.rule and d.rule.startswith("other.") for d in found)
    cp = api.load_policy(policy).compiled
    orders = [(d.decision.id if d.decision else None, d.order) for d in deciders(cp.policy)]
    assert orders == [("regime", k) for k in range(1, 7)] + [("other", k) for k in range(1, 7)]


def test_a_step_is_covered_when_it_decided_and_the_pick_rule_is_not_counted() -> None:
    cp = compile_policy()
    coverage = Coverage(cp.policy)
    coverage.record(traced(cp, "moe-tp-approved-skip"))
    report = coverage.report()
    assert "regime.step3_moe_tp_skip" in report.rules_fired
    assert "regime.step8_no_evidence" not in report.rules_fired  # it held, but never decided
    missing = {r for r, _, _ in report.rules_not_fired}
    assert "regime.step8_no_evidence" in missing
    assert "regime.first_matching_step" not in missing | set(report.rules_fired)
    assert report.rules_total == len(cp.policy.rules) - 1


def test_explain_names_the_order_and_the_outranked_steps() -> None:
    x = explain(str(EXAMPLES / "moe-tp-approved-skip"), "fpm-qwen3-30b-a3b-decode-tp2", 1,
                compile_policy())
    assert isinstance(x, PointExplanation)
    rules = [s.rule for s in x.chain]
    assert rules[:2] == ["regime.eligible", "regime.step3_moe_tp_skip"]  # not the pick rule
    assert x.chain[1].negations == (
        "no earlier step of decision 'regime' holds for point 1",)
    why = {w.rule: w for w in x.why_not}
    assert set(why) == set(SHIPPED_STEPS) - {"regime.step3_moe_tp_skip"}
    assert (why["regime.step8_no_evidence"].status, why["regime.step8_no_evidence"].detail) == (
        "outranked", "held, but an earlier step decided (regime.step3_moe_tp_skip)")
    assert why["regime.step2_legacy"].proposes == "legacy"
