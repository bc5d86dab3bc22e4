"""``kvrules rules check``: the shipped policy is clean, and every finding code is proven on a
deliberately broken policy under ``tests/files/policies/<code>/`` (exact diagnostics)."""
from __future__ import annotations

import json
from pathlib import Path

import doc_pages
import pytest
from typer.testing import CliRunner

from kvrules.authoring.check import CheckResult, check_policy, insert_after
from kvrules.authoring.lint import CHECKS
from kvrules.cli.rules import app
from kvrules.diagnostics import Diagnostic, KvrulesUsageError
from kvrules.policy import codes
from kvrules.pipeline import PASSES as CHECK_PASSES

POLICIES = Path(__file__).resolve().parent / "files" / "policies"


def _d(fixture: str, file: str, line: int, column: int, code: str, rule: str | None,
       pointer: str, message: str, severity: str = "error") -> Diagnostic:
    return Diagnostic(file=f"{POLICIES / fixture}/{file}", line=line, column=column,
                      message=message, code=code, pointer=pointer, rule=rule,
                      severity=severity)  # type: ignore[arg-type]


EXPECTED: dict[str, list[Diagnostic]] = {
    "rule_yaml_error": [_d(
        "rule_yaml_error", "rules.yaml", 30, 1, codes.RULE_YAML_ERROR, None, "",
        "did not find expected ',' or ']' (while parsing a flow sequence)")],
    "rule_encoding_error": [_d(
        "rule_encoding_error", "zz_control.yaml", 2, 30, codes.RULE_ENCODING_ERROR, None, "",
        "character U+0001 is not allowed in a rule file")],
    "rule_limit_error": [_d(
        "rule_limit_error", "zz_deep.yaml", 2, 70, codes.RULE_LIMIT_ERROR, None, "",
        "nesting deeper than 64 levels")],
    "rule_value_error": [_d(
        "rule_value_error", "zz_inf.yaml", 3, 11, codes.RULE_VALUE_ERROR, None, "",
        "'.inf' is not a finite number; the rule engine cannot represent it")],
    "rule_schema_error": [
        _d("rule_schema_error", "rules.yaml", 28, 5, codes.RULE_SCHEMA_ERROR, "step3_schema",
           "/rules/3", "/rules/3: 'reason' is a required property"),
        _d("rule_schema_error", "rules.yaml", 28, 5, codes.RULE_SCHEMA_ERROR, "step3_schema",
           "/rules/3", "/rules/3: Additional properties are not allowed ('salience' was "
           "unexpected)")],
    "rule_header_error": [_d(
        "rule_header_error", "second.yaml", 1, 1, codes.RULE_HEADER_ERROR, None, "",
        "expected exactly one 'policy:' header, found 2")],
    "rule_extends_error": [_d(
        "rule_extends_error", "policy.yaml", 6, 32, codes.RULE_EXTENDS_ERROR, None,
        "/policy/disable/1", "disable 'dense.d2_typo': the base policy has no rule with that id")],
    "rule_duplicate_id": [_d(
        "rule_duplicate_id", "rules.yaml", 28, 5, codes.RULE_DUPLICATE_ID, "step1_real",
        "/rules/3", f"rule id 'step1_real' is already used at "
        f"{POLICIES / 'rule_duplicate_id'}/rules.yaml:2")],
    "rule_unknown_fact_error": [_d(
        "rule_unknown_fact_error", "rules.yaml", 32, 9, codes.RULE_UNKNOWN_FACT,
        "stamps_unknown_fact", "/rules/3/when/1", "unknown fact type 'stamp'")],
    "rule_unknown_field_error": [
        _d("rule_unknown_field_error", "rules.yaml", 32, 32, codes.RULE_UNKNOWN_FIELD,
           "stamps_unknown_field", "/rules/3/when/0/where/strict_stamps",
           "fact 'params' has no field 'strict_stamps'"),
        _d("rule_unknown_field_error", "rules.yaml", 34, 32, codes.RULE_UNKNOWN_FIELD,
           "stamps_unknown_field", "/rules/3/when/1/where/sample_reason",
           "fact 'point' has no field 'sample_reason' (did you mean 'sample_reasons'?)")],
    "rule_unknown_alias_error": [_d(
        "rule_unknown_alias_error", "rules.yaml", 33, 19, codes.RULE_UNKNOWN_ALIAS,
        "stamps_unknown_alias", "/rules/3/then/error",
        "'p' is not bound by an earlier positive pattern")],
    "rule_duplicate_alias_error": [_d(
        "rule_duplicate_alias_error", "rules.yaml", 33, 9, codes.RULE_DUPLICATE_ALIAS,
        "stamps_duplicate_alias", "/rules/3/when/1",
        "alias 'point' is bound twice; name one with 'as:'")],
    "rule_type_error": [
        _d("rule_type_error", "rules.yaml", 32, 29, codes.RULE_TYPE_ERROR, "literal_type",
           "/rules/3/when/0/where/batch_size",
           "'batch_size' is integer but is compared with string '4'"),
        _d("rule_type_error", "rules.yaml", 41, 23, codes.RULE_TYPE_ERROR, "ref_type",
           "/rules/4/when/1/where/rank",
           "'rank.rank' is integer but is compared with 'launch.run_sh_model_literal' (boolean)"),
        _d("rule_type_error", "rules.yaml", 50, 20, codes.RULE_TYPE_ERROR, "derive_type",
           "/rules/5/then/derive/set/step",
           "'candidate.step' is integer but is set to string '0'")],
    "rule_vocabulary_error": [
        _d("rule_vocabulary_error", "rules.yaml", 12, 15, codes.RULE_VOCABULARY_ERROR,
           "undeclared_regime", "/decisions/0/steps/0/then",
           "regime 'legacy' is not in policy.regimes"),
        _d("rule_vocabulary_error", "rules.yaml", 34, 19, codes.RULE_VOCABULARY_ERROR,
           "undeclared_code", "/rules/0/then/error",
           "error code 'dp_point_disagreement' is not in policy.error_codes")],
    "rule_negation_cycle": [_d(
        "rule_negation_cycle", "rules.yaml", 28, 5, codes.RULE_NEGATION_CYCLE,
        "left_unless_right", "/rules/3", "rule 'left_unless_right' depends on itself "
        "through 'none'")],
    "rule_unsupported_error": [_d(
        "rule_unsupported_error", "rules.yaml", 32, 38, codes.RULE_UNSUPPORTED, "not_a_skip",
        "/rules/3/when/0/where/not/native_regime",
        "'not (native_regime starts_with 'skip:')' cannot be negated")],
    "rule_contradictory_conditions": [
        _d("rule_contradictory_conditions", "rules.yaml", 34, 40,
           "rule_contradictory_conditions", "empty_range",
           "/rules/3/when/0/where/all/0/total_kv_read_tokens",
           "point: total_kv_read_tokens lt 1 and total_kv_read_tokens gt 5 can never hold "
           "together, so the rule can never fire"),
        _d("rule_contradictory_conditions", "rules.yaml", 44, 33,
           "rule_contradictory_conditions", "two_values",
           "/rules/4/when/0/where/all/0/native_regime",
           "point: native_regime eq 'real_kv' and native_regime eq 'fake_fallback' can never "
           "hold together, so the rule can never fire")],
    "rule_never_fires": [
        _d("rule_never_fires", "rules.yaml", 32, 9, "rule_never_fires", "needs_config_bound",
           "/rules/3/when/1", "needs a 'config_bound' fact, but no rule produces one"),
        _d("rule_never_fires", "rules.yaml", 39, 9, "rule_never_fires",
           "needs_legacy_candidate", "/rules/4/when/0",
           "needs a 'candidate' fact matching its conditions, but no rule produces one that "
           "can match (produced by step1_real, step2_fake)")],
    "rule_unused_derived_fact": [_d(
        "rule_unused_derived_fact", "policy.yaml", 11, 7, "rule_unused_derived_fact", None,
        "/policy/derived/expected_model", "derived fact 'expected_model' is declared but no "
        "rule reads it (derived by expected_plan_model)", severity="warning")],
    "rule_ambiguous_regime": [_d(
        "rule_ambiguous_regime", "rules.yaml", 21, 5, "rule_ambiguous_regime",
        "fake_stamp", "/rules/0",
        "can decide regime 'fake_fallback' for the same facts for which 'step1_real' decides "
        "'real_kv' and nothing orders them; make their conditions exclusive or make them "
        "steps of one decision")],
    "rule_unreachable_step": [_d(
        "rule_unreachable_step", "rules.yaml", 15, 9, "rule_unreachable_step",
        "s.dense_stamp", "/decisions/0/steps/1",
        "can never decide: every point it holds for is decided first by the earlier step "
        "'s.fake_stamp'")],
}


def test_the_shipped_policy_checks_clean() -> None:
    result = check_policy()
    assert (result.diagnostics, result.exit_code, result.rules) == ((), 0, 78)


def test_the_fixture_base_policy_checks_clean() -> None:
    assert check_policy(str(POLICIES / "clean")).diagnostics == ()


@pytest.mark.parametrize("fixture", sorted(EXPECTED))
def test_each_broken_policy_gives_exactly_its_diagnostics(fixture: str) -> None:
    result = check_policy(str(POLICIES / fixture))
    assert list(result.diagnostics) == EXPECTED[fixture]
    assert result.exit_code == (0 if fixture == "rule_unused_derived_fact" else 1)


def test_every_finding_code_has_a_fixture() -> None:
    rule_file_codes = {v for k, v in vars(codes).items() if k.startswith("RULE_")}
    reported = rule_file_codes - {codes.RULE_PARAMETER_ERROR}  # overrides, not rule files
    lint_codes = {c.issue.code for c in CHECKS.values()}
    folders = {p.name for p in POLICIES.iterdir() if p.is_dir()} - {"clean"}
    assert folders == reported | lint_codes == set(EXPECTED)


def test_disabling_a_check_drops_exactly_its_findings() -> None:
    result = check_policy(str(POLICIES / "rule_never_fires"), disable=["never-fires"])
    assert result.diagnostics == ()


def test_unknown_check_ids_and_missing_directories_are_usage_errors(tmp_path: Path) -> None:
    with pytest.raises(KvrulesUsageError, match="unknown check id"):
        check_policy(disable=["no-such-check"])
    with pytest.raises(KvrulesUsageError, match="not found"):
        check_policy(str(tmp_path / "missing"))
    with pytest.raises(KvrulesUsageError, match="no rule files"):
        check_policy(str(tmp_path))


def test_lint_passes_are_inserted_after_stratify() -> None:
    names = [n for n, _ in insert_after(CHECK_PASSES, "stratify", (("x", print),))]
    assert names == ["load_yaml", "validate_schema", "resolve_extends", "build_model",
                     "lower_decisions", "resolve_names", "check_types", "stratify", "x",
                     "check_engine_limits",
                     "lower_to_durable"]
    with pytest.raises(ValueError):
        insert_after(CHECK_PASSES, "nope", ())


def test_cli_text_output_and_exit_codes(runner: CliRunner) -> None:
    clean = runner.invoke(app, ["check"])
    assert (clean.exit_code, clean.stdout) == (0, "rules: 9 files, 78 rules: no findings\n")
    broken = runner.invoke(app, ["check", str(POLICIES / "rule_ambiguous_regime")])
    where = POLICIES / "rule_ambiguous_regime"
    assert broken.exit_code == 1
    assert broken.stdout == (
        f"{where}/rules.yaml:21:5: rule_ambiguous_regime: can decide regime 'fake_fallback' "
        "for the same facts for which 'step1_real' decides 'real_kv' and nothing orders them; "
        "make their conditions exclusive or make them steps of one decision (rule: fake_stamp)"
        f"\n{where}: 2 files, 3 rules: 1 error, 0 warnings\n")
    warned = runner.invoke(app, ["check", str(POLICIES / "rule_unused_derived_fact")])
    assert warned.exit_code == 0 and "rule_unused_derived_fact (warning)" in warned.stdout


def test_cli_json_output(runner: CliRunner) -> None:
    result = runner.invoke(app, ["check", str(POLICIES / "rule_never_fires"), "-f", "json"])
    doc = json.loads(result.stdout)
    assert result.exit_code == 1
    assert (doc["rules"], doc["errors"], doc["warnings"]) == (5, 2, 0)
    assert [(d["code"], d["line"], d["rule"], d["severity"]) for d in doc["diagnostics"]] == [
        ("rule_never_fires", 32, "needs_config_bound", "error"),
        ("rule_never_fires", 39, "needs_legacy_candidate", "error")]


def test_cli_unusable_input_exits_2(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(app, ["check", str(tmp_path / "missing")])
    assert result.exit_code == 2
    assert "no such file or folder" in result.stderr


def test_check_result_counts() -> None:
    diag = EXPECTED["rule_unused_derived_fact"][0]
    result = CheckResult("p", ("a",), 1, (diag,))
    assert (result.errors, result.warnings, result.exit_code) == (0, 1, 0)


def test_every_check_is_documented_in_its_docstring_and_the_documentation() -> None:
    readme = doc_pages.all_text()
    for cid, check in CHECKS.items():
        doc = check.issue.__doc__ or ""
        assert "Fails" in doc and "Passes" in doc, cid
        row = f"| `{cid}` | `{check.issue.code}` | {check.issue.severity} | " \
              f"{check.issue.description} |"
        assert row in readme, cid


def _shipped_copy(tmp_path: Path) -> Path:
    import shutil

    from kvrules.resources import rules_dir
    folder = tmp_path / "policy"
    shutil.copytree(str(rules_dir()), folder, ignore=shutil.ignore_patterns("tests"))
    return folder


def _edit(path: Path, old: str, new: str) -> int:
    """Replace the first ``old`` by ``new``; the 1-based line where the edit starts."""
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    return text[:text.index(old)].count("\n") + 1


def _findings(folder: Path) -> list[tuple[str, int, str]]:
    result = check_policy(str(folder))
    return [(d.code, d.line or 0, d.message) for d in result.diagnostics if d.severity == "error"]


def test_an_undeclared_condition_id_is_an_error_at_its_line(tmp_path: Path) -> None:
    folder = _shipped_copy(tmp_path)
    line = _edit(folder / "cache_kinds.yaml", "condition: D9, reason: \"rank {rank.rank} has no",
                 "condition: D22, reason: \"rank {rank.rank} has no")
    assert _findings(folder) == [(
        codes.RULE_VOCABULARY_ERROR, line, "condition 'D22' is not declared under "
        "policy.qualifications.dense_synthetic_kv.conditions (declared: D1, D2, D3, D4, D5, "
        "D6, D7, D8, D9)")]


def test_a_fact_typo_is_one_finding_with_a_suggestion(tmp_path: Path) -> None:
    """Not also 'rank is not bound' for every use of the alias the typo left unbound."""
    folder = _shipped_copy(tmp_path)
    line = _edit(folder / "cache_kinds.yaml", "      - fact: rank\n", "      - fact: rnak\n")
    assert _findings(folder) == [(codes.RULE_UNKNOWN_FACT, line,
                                  "unknown fact type 'rnak' (did you mean 'rank'?)")]


def test_field_and_alias_typos_suggest_the_known_name(tmp_path: Path) -> None:
    folder = _shipped_copy(tmp_path)
    field = _edit(folder / "cache_kinds.yaml", "{not: {groups: {is: array}}}",
                  "{not: {gruops: {is: array}}}")
    alias = _edit(folder / "cache_kinds.yaml", "engine.kv_cache.groups is {rank.groups}",
                  "engine.kv_cache.groups is {rnak.groups}")
    assert _findings(folder) == [
        (codes.RULE_UNKNOWN_FIELD, field, "fact 'rank' has no field 'gruops' (did you mean "
         "'groups'?)"),
        (codes.RULE_UNKNOWN_ALIAS, alias, "'rnak' is not bound by an earlier positive pattern "
         "(did you mean 'rank'?)")]


def test_the_same_finding_is_reported_once(tmp_path: Path) -> None:
    folder = _shipped_copy(tmp_path)
    _edit(folder / "cache_kinds.yaml", "engine.kv_cache.groups is {rank.groups}",
          "engine.kv_cache.groups is {rank.gruops}, {rank.gruops}")
    result = check_policy(str(folder))
    assert len(result.diagnostics) == len(set(result.diagnostics)) == 1


def test_a_broken_rule_file_does_not_hide_findings_in_the_others(tmp_path: Path) -> None:
    folder = _shipped_copy(tmp_path)
    (folder / "zz_broken.yaml").write_text("rules:\n  - id: x\n    bogus: 1\n", encoding="utf-8")
    _edit(folder / "cache_kinds.yaml", "{not: {groups: {is: array}}}",
          "{not: {gruops: {is: array}}}")
    found = {(Path(d.file).name, d.code) for d in check_policy(str(folder)).diagnostics}
    assert ("cache_kinds.yaml", codes.RULE_UNKNOWN_FIELD) in found
    assert ("zz_broken.yaml", codes.RULE_SCHEMA_ERROR) in found
    assert all(d.severity == "error" for d in check_policy(str(folder)).diagnostics)  # no lint
    with pytest.raises(KvrulesUsageError):  # and the policy still never compiles
        from kvrules.pipeline import compile_policy
        compile_policy(str(folder))


def test_a_broken_header_file_stops_at_its_own_errors(tmp_path: Path) -> None:
    folder = _shipped_copy(tmp_path)
    (folder / "policy.yaml").write_text("policy: [\n", encoding="utf-8")
    codes_found = {d.code for d in check_policy(str(folder)).diagnostics}
    assert codes_found == {codes.RULE_YAML_ERROR}


def test_cli_checks_the_local_rules_folder_and_files_of_a_policy(
        runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No path inside a checkout checks ./rules (a typo there is found, never the installed
    copy); files, as pre-commit passes them, check the policy they belong to, once."""
    folder = _shipped_copy(tmp_path)
    folder.rename(tmp_path / "rules")
    line = _edit(tmp_path / "rules" / "cache_kinds.yaml", "{not: {groups: {is: array}}}",
                 "{not: {gruops: {is: array}}}")
    monkeypatch.chdir(tmp_path)
    for args in (["check"], ["check", "rules/cache_kinds.yaml", "rules/dense.yaml"]):
        result = runner.invoke(app, args)
        assert result.exit_code == 1, result.output
        assert result.stdout.count("rules: 9 files") == 1
        assert f"rules/cache_kinds.yaml:{line}:38: rule_unknown_field_error" in result.stdout


def test_cli_sarif_and_github_formats(runner: CliRunner, tmp_path: Path) -> None:
    folder = _shipped_copy(tmp_path)
    _edit(folder / "cache_kinds.yaml", "{not: {groups: {is: array}}}",
          "{not: {gruops: {is: array}}}")
    sarif = runner.invoke(app, ["check", str(folder), "--format", "sarif"])
    assert sarif.exit_code == 1
    assert json.loads(sarif.stdout)["runs"][0]["results"][0]["ruleId"] == \
        "rule_unknown_field_error"
    github = runner.invoke(app, ["check", str(folder), "--format", "github"])
    assert github.stdout.startswith("::error file=")
