"""``kvrules rules test``: the shipped cases pass with full rule coverage, failures read as
diffs, coverage figures are exact on a small policy, and bad test files are usage errors."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvrules.authoring.cases import cell_facts, find_test_files, load_cases, merge
from kvrules.authoring.coverage import Condition
from kvrules.authoring.testing import CaseResult, Mismatch, run_policy_tests
from kvrules.authoring.testing_report import render_test_pretty
from kvrules.cli.app import app
from kvrules.diagnostics import Diagnostic, KvrulesUsageError

FILES = Path(__file__).resolve().parent / "files"
CLEAN = str(FILES / "policies" / "clean")
CASES = FILES / "policy_tests"


def test_the_shipped_cases_ship_pass_and_fire_every_rule() -> None:
    names = [label for label, _, _ in find_test_files(None, None)]
    assert names == ["rules/tests/dense.yaml", "rules/tests/evidence.yaml",
                     "rules/tests/regime.yaml"]
    run = run_policy_tests()
    failed = [(r.file, r.line, r.mismatches) for r in run.results if r.status != "pass"]
    assert failed == []
    assert run.coverage.rules_not_fired == ()
    assert run.coverage.rule_percent == 100.0
    assert run.coverage.condition_percent >= 90.0
    assert run.exit_code(min_rules=100, min_conditions=90) == 0
    forms = run.forms()
    assert forms["overlay"] > 9 * forms["facts"]  # most cases go through the extractor


def test_one_case_covers_two_of_three_rules_and_no_condition() -> None:
    run = run_policy_tests(CLEAN, str(CASES / "coverage_one.yaml"))
    c = run.coverage
    rules = f"{CLEAN}/rules.yaml"
    assert (c.rules_total, c.rules_fired, c.rules_not_fired) == (
        3, ("step2_fake", "decide"), (("step1_real", rules, 2),))
    assert (c.conditions_total, c.conditions_covered) == (3, 0)
    assert c.partial == (
        (Condition("step1_real", rules, 6, 33, "/rules/0/when/0/where/sample_reasons",
                   "sample_reasons contains_any ['kvwarm_real_kv']"), "only false"),
        (Condition("decide", rules, 24, 26, "/rules/2/when/1/none/where/point",
                   "point eq c.point"), "never decided"),
        (Condition("decide", rules, 24, 48, "/rules/2/when/1/none/where/step",
                   "step lt c.step"), "only false"))
    assert round(c.rule_percent, 1) == 66.7 and c.condition_percent == 0.0
    assert run.exit_code(min_rules=66) == 0
    assert run.exit_code(min_rules=67) == 1
    assert run.below(67, 1) == ["rule coverage 66.7% is below 67%",
                                "condition coverage 0.0% is below 1%"]


def test_two_cases_fire_every_rule_and_see_two_conditions_both_ways() -> None:
    c = run_policy_tests(CLEAN, str(CASES / "coverage_two.yaml")).coverage
    assert (len(c.rules_fired), c.conditions_covered, c.conditions_total) == (3, 2, 3)
    assert [(x.text, seen) for x, seen in c.partial] == [("point eq c.point", "only true")]


def test_failures_are_readable_diffs_skips_are_skipped_and_artifacts_are_read() -> None:
    run = run_policy_tests(CLEAN, str(CASES / "failing.yaml"))
    file = str(CASES / "failing.yaml")
    fired1 = "decided by step1_real; fired: step1_real, step2_fake, decide"
    fired2 = "decided by step2_fake; fired: step2_fake, decide"
    assert run.results == (
        CaseResult(file, 3, "expects the wrong regimes, and a point that does not exist",
                   "fail", (Mismatch("points.1.eligible", True, False, fired1),
                            Mismatch("points.2.regime", "real_kv", "fake_fallback", fired2),
                            Mismatch("points.2.decided_by", "step1_real", "step2_fake", fired2),
                            Mismatch("points.3", "present", "absent"))),
        CaseResult(file, 16, "not written yet", "skip", todo="waiting for the prefill rules"),
        CaseResult(file, 20, "a bundled example campaign, read like classify", "pass",
                   form="artifacts"))
    assert run.counts() == {"pass": 1, "fail": 1, "skip": 1}
    assert run.exit_code() == 1
    assert render_test_pretty(run).splitlines()[:9] == [
        f"FAIL {file}:3: expects the wrong regimes, and a point that does not exist",
        "    points.1.eligible: want true, got false",
        f"      ({fired1})",
        '    points.2.regime: want "real_kv", got "fake_fallback"',
        '    points.2.decided_by: want "step1_real", got "step2_fake"',
        f"      ({fired2})",
        '    points.3: want "present", got "absent"',
        f"SKIP {file}:16: not written yet (todo: waiting for the prefill rules)",
        ""]


def test_invalid_test_files_are_usage_errors_with_positions() -> None:
    with pytest.raises(KvrulesUsageError) as err:
        run_policy_tests(CLEAN, str(CASES / "invalid.yaml"))
    file = str(CASES / "invalid.yaml")
    assert err.value.diagnostics == [
        Diagnostic(file, 8, 5, "/cases/1: 'want' is a required property", "rule_test_error",
                   "/cases/1"),
        Diagnostic(file, 8, 5, "/cases/1: Additional properties are not allowed ('wants' was "
                   "unexpected)", "rule_test_error", "/cases/1")]


def test_facts_outside_the_catalogue_are_rejected_where_the_case_is() -> None:
    text = "cases:\n  - note: n\n    facts: {points: {'1': {sample_reason: []}}}\n" \
           "    want: {regime: x}\n"
    with pytest.raises(KvrulesUsageError) as err:
        load_cases([("t.yaml", text, None)])
    assert err.value.diagnostics == [Diagnostic(
        "t.yaml", 2, 5, "point.sample_reason is not in the fact catalogue", "rule_test_error",
        "/cases/0")]


def test_unknown_qualifications_and_parameters_in_a_case_are_usage_errors(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text("cases:\n  - note: n\n    params: {strict: true}\n"
                    "    want: {dense: {eligible: true}}\n", encoding="utf-8")
    with pytest.raises(KvrulesUsageError) as err:
        run_policy_tests(None, str(path))
    assert [d.message for d in err.value.diagnostics] == [
        "case 'n': unknown dense, params.strict"]


def test_compact_facts_merge_and_fill_what_the_extractor_computes() -> None:
    base = {"warmup": {"0": {"block": {}, "skip_reason": "x"}}, "plan": {"is_moe": False}}
    over = {"warmup": {"0": {"skip_reason": "<absent>"}, "1": {"block": {"enabled": True}}},
            "plan": "<absent>", "points": {"2": {"native_regime": "skip:r"}}}
    merged = merge(base, over)
    assert merged == {"warmup": {"0": {"block": {}}, "1": {"block": {"enabled": True}}},
                      "points": {"2": {"native_regime": "skip:r"}}}
    cell = cell_facts(merged)
    by_id = {f.id: f.fields for f in cell.facts}
    assert by_id["cell"] == {"cell_id": "cell", "ranks": [0, 1]}
    assert by_id["kvwarm"] == {"rank": 0, "block": {}}
    assert by_id["warmup1"] == {"rank": 1, "block": {"enabled": True}, "enabled": True}
    assert by_id["launch"] == {}
    assert cell.points[0].fact.fields == {
        "benchmark_id": 2, "point_type": "decode", "batch_size": 1, "total_prefill_tokens": 0,
        "total_kv_read_tokens": 128, "sample_reasons": [], "rank": 0, "on_ranks": [0, 1],
        "views": [{"point_type": "decode", "batch_size": 1, "total_prefill_tokens": 0,
                   "total_kv_read_tokens": 128, "native_regime": "skip:r"}],
        "native_regime": "skip:r", "native_skip_reason": "r"}


def test_cli_exit_codes_and_json(runner: CliRunner) -> None:
    ok = runner.invoke(app, ["rules", "test", "--min-coverage", "100"])
    assert ok.exit_code == 0
    assert ok.stdout.splitlines()[:2] == ["148 cases: 148 passed, 0 failed, 0 skipped",
                                          "rule coverage: 78/78 rules fired (100.0%)"]
    low = runner.invoke(app, ["rules", "test", CLEAN, "--tests", str(CASES / "coverage_one.yaml"),
                              "--min-coverage", "80", "-f", "json"])
    doc = json.loads(low.stdout)
    assert low.exit_code == 1
    assert (doc["summary"], doc["below"]) == ({"pass": 1, "fail": 0, "skip": 0},
                                              ["rule coverage 66.7% is below 80%"])
    assert doc["coverage"]["rules"]["not_fired"] == [
        {"rule": "step1_real", "file": f"{CLEAN}/rules.yaml", "line": 2}]
    bad = runner.invoke(app, ["rules", "test", CLEAN, "--tests", str(CASES / "invalid.yaml")])
    assert bad.exit_code == 2 and "rule_test_error" in bad.stderr
