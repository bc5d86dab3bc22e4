"""``extends``: a user policy directory on the shipped one (or on another directory).

The documented team policy is run as written; the other cases build small policies inline.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import doc_pages
import pytest
from helpers import copy_example, pod_dir, set_at
from policy_cases import classify, failed
from typer.testing import CliRunner

from kvrules import api
from kvrules.authoring.check import check_policy
from kvrules.cli.app import app
from kvrules.diagnostics import Diagnostic, KvrulesUsageError
from kvrules.pipeline import compile_policy
from kvrules.policy import codes
from kvrules.policy.compiler import read_policy_sources, run_passes
from kvrules.policy.extends import merge_headers

ROOT = Path(__file__).resolve().parents[1]
STRICT = ROOT / "tests" / "files" / "extends" / "strict-dense"
HEADER = 'policy:\n  name: team\n  version: "1"\n  extends: {base}\n'


def _block(name: str) -> str:
    """The fenced code block between ``<!-- name -->`` and ``<!-- /name -->``."""
    return doc_pages.block(name)


def write(folder: Path, files: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def diagnostics(folder: Path) -> list[tuple[str, int, str, str]]:
    return [(Path(d.file).name, d.line or 0, d.code, d.message)
            for d in run_passes(str(folder)).diagnostics]


RULE = """rules:
  - id: {rid}
    description: A test rule.
    when:
      - fact: rank
        where: {{tensor_parallel_size: {{ne: 1}}}}
    then: {{fail: {{group: dense_synthetic_kv, condition: D7, reason: "tp is not 1"}}}}
    reason: "D7 failed: tp is not 1"
"""


def test_the_readme_team_policy_is_the_fixture_and_checks_clean(tmp_path: Path) -> None:
    assert _block("extends-policy") == (STRICT / "policy.yaml").read_text(encoding="utf-8")
    assert _block("extends-rules") == (STRICT / "rules.yaml").read_text(encoding="utf-8")
    team = write(tmp_path / "team", {"policy.yaml": _block("extends-policy"),
                                     "rules.yaml": _block("extends-rules")})
    result = check_policy(str(team))
    shipped = check_policy(None)  # counts written rules and steps, not generated ones
    assert (result.diagnostics, result.rules) == ((), shipped.rules - 1)


def test_the_team_policy_counts_dense_only_on_a_validated_vllm(tmp_path: Path) -> None:
    team = api.load_policy(str(STRICT))
    campaign = copy_example(tmp_path)
    assert failed(classify(campaign, pol=team)) == []
    set_at(pod_dir(campaign) / "collector-provenance.json", "/runtime/backend_version",
           "0.11.3")
    set_at(pod_dir(campaign) / "benchmark.json", "/engine/versions/vllm", "0.11.3")
    assert failed(classify(campaign)) == []
    assert failed(classify(campaign, pol=team)) == ["D8"]


def test_a_disabled_rule_no_longer_fires(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path)
    off = {"dense_synthetic_kv": False}
    assert failed(classify(campaign, pol=api.load_policy(None, off))) == ["D1"]
    assert failed(classify(campaign, pol=api.load_policy(str(STRICT), off))) == []


def test_the_resolved_header_merges_base_and_user() -> None:
    cp = compile_policy(str(STRICT))
    shipped = compile_policy()
    assert (cp.policy.name, cp.policy.version) == ("kv_seed_strict_dense", "strict_dense_v1")
    assert cp.policy.parameters == shipped.policy.parameters
    assert cp.policy.regimes == shipped.policy.regimes
    assert cp.policy.error_codes == shipped.policy.error_codes
    ids = [r.id for r in cp.policy.rules]
    assert "dense.d1_mode_off" not in ids and ids.count("version.d8_mismatch") == 1
    (d8,) = [r for r in cp.policy.rules if r.id == "version.d8_mismatch"]
    assert d8.loc[0] == f"{STRICT}/rules.yaml"


def test_merge_headers_field_by_field() -> None:
    base = {"name": "a", "version": "1", "description": "base", "regimes": ["x", "y"],
            "error_codes": ["e1"], "parameters": {"p": {"type": "boolean", "default": True}},
            "qualifications": {"q": {"description": "Q", "conditions": {"C1": "one"}}},
            "derived": {"d": {"fields": {}}}}
    over = {"name": "b", "version": "2", "extends": "default", "disable": ["r"],
            "regimes": ["y", "z"], "error_codes": ["e2"],
            "parameters": {"p2": {"type": "boolean", "default": False}},
            "qualifications": {"q": {"conditions": {"C2": "two"}}}}
    assert merge_headers(base, over) == {
        "name": "b", "version": "2", "description": "base", "regimes": ["x", "y", "z"],
        "error_codes": ["e1", "e2"],
        "parameters": {"p": {"type": "boolean", "default": True},
                       "p2": {"type": "boolean", "default": False}},
        "qualifications": {"q": {"description": "Q", "conditions": {"C1": "one", "C2": "two"}}},
        "derived": {"d": {"fields": {}}}}


def test_an_added_rule_fires_next_to_the_base_rules(tmp_path: Path) -> None:
    team = write(tmp_path / "team", {"policy.yaml": HEADER.format(base="default"),
                                     "rules.yaml": RULE.format(rid="team.d7_one_gpu")})
    cp = compile_policy(str(team))
    assert len(cp.policy.rules) == len(compile_policy().policy.rules) + 1
    assert diagnostics(team) == []


def test_a_same_id_rule_without_override_is_a_duplicate(tmp_path: Path) -> None:
    team = write(tmp_path / "team", {"policy.yaml": HEADER.format(base="default"),
                                     "rules.yaml": RULE.format(rid="topology.d7_sizes")})
    shipped = (Path(__file__).resolve().parents[1] / "rules" / "topology.yaml").read_text(
        encoding="utf-8")
    line = shipped[:shipped.index("id: topology.d7_sizes")].count("\n") + 1
    assert diagnostics(team) == [
        ("rules.yaml", 2, codes.RULE_DUPLICATE_ID, "rule id 'topology.d7_sizes' is already "
         f"used by the base policy at rules/topology.yaml:{line}; list it under "
         "policy.override to replace that rule")]


def test_an_override_replaces_the_base_rule(tmp_path: Path) -> None:
    header = HEADER.format(base="default") + "  override: [topology.d7_sizes]\n"
    team = write(tmp_path / "team", {"policy.yaml": header,
                                     "rules.yaml": RULE.format(rid="topology.d7_sizes")})
    assert diagnostics(team) == []
    (rule,) = [r for r in compile_policy(str(team)).policy.rules if r.id == "topology.d7_sizes"]
    assert rule.loc[:2] == (f"{team}/rules.yaml", 2)


def test_unknown_ids_in_disable_and_override_are_errors_at_their_line(tmp_path: Path) -> None:
    header = HEADER.format(base="default") + ("  disable: [dense.d1_mode_off, nope.rule]\n"
                                              "  override: [topology.d7_sizes]\n")
    team = write(tmp_path / "team", {"policy.yaml": header})
    assert diagnostics(team) == [
        ("policy.yaml", 5, codes.RULE_EXTENDS_ERROR,
         "disable 'nope.rule': the base policy has no rule with that id"),
        ("policy.yaml", 6, codes.RULE_EXTENDS_ERROR,
         "override 'topology.d7_sizes': this policy defines no rule with that id")]


def test_disable_without_extends_is_an_error(tmp_path: Path) -> None:
    team = write(tmp_path / "team", {"policy.yaml": 'policy:\n  name: t\n  version: "1"\n'
                                                    '  disable: [a.b]\n'})
    assert diagnostics(team) == [("policy.yaml", 4, codes.RULE_EXTENDS_ERROR,
                                  "'disable' needs 'extends' (there is no base policy to "
                                  "take rules from)")]


def test_a_missing_base_and_a_cycle_are_errors_not_tracebacks(tmp_path: Path) -> None:
    lost = write(tmp_path / "lost", {"policy.yaml": HEADER.format(base="../nowhere")})
    assert diagnostics(lost) == [("policy.yaml", 4, codes.RULE_EXTENDS_ERROR,
                                  "extends '../nowhere': no such policy directory")]
    write(tmp_path / "a", {"policy.yaml": HEADER.format(base="../b")})
    write(tmp_path / "b", {"policy.yaml": HEADER.format(base="../a")})
    assert diagnostics(tmp_path / "a") == [
        ("policy.yaml", 4, codes.RULE_EXTENDS_ERROR,
         f"extends '../a' forms a cycle: {tmp_path}/a -> {tmp_path}/b -> {tmp_path}/a")]
    with pytest.raises(KvrulesUsageError) as err:
        compile_policy(str(tmp_path / "a"))
    assert [d.code for d in err.value.diagnostics] == [codes.RULE_EXTENDS_ERROR]


def test_a_chain_of_two_user_policies(tmp_path: Path) -> None:
    write(tmp_path / "base", {"policy.yaml": HEADER.format(base="default"),
                              "rules.yaml": RULE.format(rid="team.d7_one_gpu")})
    header = HEADER.format(base="../base") + "  disable: [team.d7_one_gpu, dense.d1_mode_off]\n"
    top = write(tmp_path / "top", {"policy.yaml": header})
    ids = {r.id for r in compile_policy(str(top)).policy.rules}
    assert diagnostics(top) == []
    assert "team.d7_one_gpu" not in ids and "dense.d1_mode_off" not in ids
    assert "topology.d7_sizes" in ids


def test_the_digest_covers_the_resolved_policy(tmp_path: Path) -> None:
    _, files, _ = read_policy_sources(str(STRICT))
    assert sorted(n for n in files if n.startswith("rules/")) == [
        f"rules/{p.name}" for p in sorted((ROOT / "rules").glob("*.yaml"))]
    shipped = tmp_path / "shipped"
    shutil.copytree(ROOT / "rules", shipped)
    team = write(tmp_path / "team", {"policy.yaml": HEADER.format(base="../shipped")})
    before = compile_policy(str(team)).identity.digest
    with (shipped / "dense.yaml").open("a", encoding="utf-8") as fh:
        fh.write("# a comment changes the base policy\n")
    assert compile_policy(str(team)).identity.digest != before
    moved = tmp_path / "elsewhere" / "team"
    shutil.copytree(team, moved)
    shutil.copytree(shipped, tmp_path / "elsewhere" / "shipped")
    assert compile_policy(str(moved)).identity.digest == compile_policy(str(team)).identity.digest


def test_rules_check_test_and_classify_work_on_an_extending_policy(tmp_path: Path) -> None:
    runner = CliRunner()
    assert runner.invoke(app, ["rules", "check", str(STRICT)]).exit_code == 0
    tests = write(tmp_path / "cases", {"t.yaml": (
        "campaign: dense-legacy-stamp-format\n"
        f"campaigns: {ROOT / 'examples'}\n"
        "cases:\n  - note: dense qualifies on the validated version\n"
        "    want: {dense_synthetic_kv: {eligible: true}}\n"
        "  - note: D1 cannot be switched off\n    params: {dense_synthetic_kv: false}\n"
        "    want: {dense_synthetic_kv: {eligible: true}}\n")})
    ran = runner.invoke(app, ["rules", "test", str(STRICT), "--tests", str(tests)])
    assert ran.exit_code == 0, ran.output
    assert ran.output.startswith("2 cases: 2 passed")
    done = runner.invoke(app, ["classify", str(ROOT / "examples" / "dense-legacy-stamp-format"),
                               "--rules", str(STRICT), "--format", "json"])
    assert done.exit_code == 0 and '"kv_seed_strict_dense"' in done.output


def test_classify_refuses_a_broken_extends_with_exit_2(tmp_path: Path) -> None:
    lost = write(tmp_path / "lost", {"policy.yaml": HEADER.format(base="../nowhere")})
    example = str(ROOT / "examples" / "dense-legacy-stamp-format")
    done = CliRunner().invoke(app, ["classify", example, "--rules", str(lost)])
    assert done.exit_code == 2


def test_diagnostic_shape_of_an_extends_error(tmp_path: Path) -> None:
    lost = write(tmp_path / "lost", {"policy.yaml": HEADER.format(base="../nowhere")})
    assert run_passes(str(lost)).diagnostics == [Diagnostic(
        file=f"{lost}/policy.yaml", line=4, column=12, code=codes.RULE_EXTENDS_ERROR,
        message="extends '../nowhere': no such policy directory", pointer="/policy/extends")]


@pytest.mark.parametrize("key", ['"\\x65xtends"', '"ext\\u0065nds"', "extends"])
def test_extends_is_found_however_the_key_is_spelled(tmp_path: Path, key: str) -> None:
    """Reading skips YAML for files that cannot name a base; an escaped key still can."""
    header = f'policy:\n  name: team\n  version: "1"\n  {key}: default\n'
    folder = write(tmp_path / "team", {"policy.yaml": header,
                                       "extra.yaml": RULE.format(rid="team.extra")})
    label, files, errors = read_policy_sources(str(folder))
    assert not errors and any(name.startswith("rules/") for name in files)
    assert "team.extra" in {r.id for r in compile_policy(str(folder)).policy.rules}


def test_a_policy_without_a_base_is_read_without_parsing_yaml(tmp_path: Path) -> None:
    probe = ("import sys\nfrom kvrules.policy.compiler import read_policy_sources\n"
             "label, files, errors = read_policy_sources(None)\n"
             "print(len(files), 'yaml' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=60, cwd=tmp_path)
    count, parsed = done.stdout.split()
    assert int(count) >= 2 and parsed == "False", done.stderr
