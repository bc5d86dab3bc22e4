"""CI outputs of the authoring commands: GitHub annotations, SARIF 2.1.0, JUnit XML."""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from kvrules.authoring.check import check_policy
from kvrules.authoring.ci_formats import (render_check_github, render_check_sarif,
                                          render_test_github, render_test_junit)
from kvrules.authoring.testing import run_policy_tests
from kvrules.resources import rules_dir


@pytest.fixture
def broken(tmp_path: Path) -> Path:
    folder = tmp_path / "policy"
    shutil.copytree(str(rules_dir()), folder)
    target = folder / "cache_kinds.yaml"
    text = target.read_text(encoding="utf-8")
    target.write_text(text.replace("{not: {groups: {is: array}}}",
                                   "{not: {gruops: {is: array}}}", 1), encoding="utf-8")
    return folder


def _typo_line(folder: Path) -> int:
    text = (folder / "cache_kinds.yaml").read_text(encoding="utf-8")
    return text[:text.index("gruops")].count("\n") + 1


def test_sarif_names_each_finding_by_code_file_line_and_column(broken: Path) -> None:
    log = json.loads(render_check_sarif(check_policy(str(broken))))
    assert log["version"] == "2.1.0"
    run = log["runs"][0]
    assert run["tool"]["driver"]["name"] == "kvrules"
    [result] = run["results"]
    assert result["ruleId"] == "rule_unknown_field_error" and result["level"] == "error"
    loc = result["locations"][0]["physicalLocation"]
    assert loc["artifactLocation"]["uri"].endswith("cache_kinds.yaml")
    assert loc["region"] == {"startLine": _typo_line(broken), "startColumn": 38}
    assert result["properties"]["rule"] == "cache.d9_no_groups"
    assert [r["id"] for r in run["tool"]["driver"]["rules"]] == ["rule_unknown_field_error"]


def test_sarif_of_a_clean_policy_has_no_results() -> None:
    log = json.loads(render_check_sarif(check_policy(None)))
    assert log["runs"][0]["results"] == []


SARIF_SCHEMA = Path(__file__).parent / "files" / "formats" / "sarif-schema-2.1.0.json"


@pytest.mark.parametrize("policy", ["broken", "shipped"])
def test_sarif_validates_against_the_oasis_sarif_2_1_0_schema(broken: Path, policy: str) -> None:
    from jsonschema import Draft4Validator, FormatChecker
    schema = json.loads(SARIF_SCHEMA.read_text(encoding="utf-8"))
    log = json.loads(render_check_sarif(check_policy(str(broken) if policy == "broken"
                                                     else None)))
    errors = sorted(e.message for e in Draft4Validator(
        schema, format_checker=FormatChecker()).iter_errors(log))
    assert errors == [] and log["version"] == "2.1.0"


def test_github_annotations_for_check(broken: Path) -> None:
    lines = render_check_github(check_policy(str(broken))).splitlines()
    assert lines[0].startswith("::error file=")
    assert f",line={_typo_line(broken)},col=38," in lines[0]
    assert "gruops" in lines[0] and lines[-1].startswith("::notice title=kvrules rules check::")


def _failing_cases(tmp_path: Path) -> Path:
    folder = tmp_path / "policy"
    shutil.copytree(str(rules_dir()), folder)
    shutil.copytree(Path(__file__).resolve().parents[1] / "examples", tmp_path / "examples")
    case_file = sorted((folder / "tests").glob("*.yaml"))[0]
    text = case_file.read_text(encoding="utf-8")
    assert "regime: fake_fallback" in text or "regime: legacy" in text
    swapped = text.replace("regime: fake_fallback", "regime: real_kv", 1) \
        if "regime: fake_fallback" in text else text.replace("regime: legacy", "regime: real_kv", 1)
    case_file.write_text(swapped, encoding="utf-8")
    return folder


def test_junit_has_a_testcase_per_case_and_per_threshold(tmp_path: Path) -> None:
    run = run_policy_tests(str(_failing_cases(tmp_path)))
    root = ET.fromstring(render_test_junit(run, min_rules=100, min_conditions=0))
    suite = root.find("testsuite")
    assert suite is not None
    cases = suite.findall("testcase")
    assert len(cases) == len(run.results) + 1  # one threshold was set
    failed = [c for c in cases if c.find("failure") is not None]
    assert int(suite.get("failures", "-1")) == len(failed) >= 1
    assert any("real_kv" in (c.find("failure").text or "") for c in failed)  # type: ignore[union-attr]
    assert cases[-1].get("classname") == "coverage"


def test_github_annotations_for_test_point_at_the_failing_case(tmp_path: Path) -> None:
    run = run_policy_tests(str(_failing_cases(tmp_path)))
    lines = render_test_github(run).splitlines()
    errors = [line for line in lines if line.startswith("::error file=")]
    assert errors and all(",line=" in line for line in errors)
    assert lines[-1].startswith("::notice title=kvrules rules test::")
