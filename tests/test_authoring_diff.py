"""``kvrules diff`` on the bundled examples: every changed point, grouped by (old -> new),
with counts and the rules that decided each side."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from kvrules import api
from kvrules.authoring.diff import (ChangeGroup, Outcome, PointChange, diff_corpus,
                                   parse_params, render_diff_text)
from kvrules.cli.app import app
from kvrules.diagnostics import KvrulesUsageError

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = sorted(str(p) for p in (REPO / "examples").iterdir() if p.is_dir())
CELL = "fpm-llama31-8b-decode-tp1"
DENSE = Outcome("ok", "skip:dense_model_content_insensitive", True)
FAKE = Outcome("ok", "fake_fallback", False)


def _example(name: str) -> str:
    return str(REPO / "examples" / name)


def test_turning_dense_synthetic_kv_off_changes_exactly_the_dense_points() -> None:
    base = api.load_policy()
    head = api.load_policy(parameters={"dense_synthetic_kv": False})
    d = diff_corpus(EXAMPLES, base, head)
    stamp, native = _example("dense-legacy-stamp-format"), _example("dense-native-skip-format")

    def change(campaign: str, bid: int, old_by: str, new_by: str) -> PointChange:
        return PointChange(campaign, CELL, bid, DENSE, FAKE, old_by, new_by)
    assert (d.cells, d.points, d.changed) == (9, 18, 4)
    assert d.groups == (ChangeGroup(
        DENSE.label, FAKE.label, 4,
        (("regime.step5_dense_native_format", "regime.step7_unapproved_skip", 2),
         ("regime.step5_dense_stamp_format", "regime.step6_fake_stamp", 2)),
        (change(stamp, 1, "regime.step5_dense_stamp_format", "regime.step6_fake_stamp"),
         change(stamp, 2, "regime.step5_dense_stamp_format", "regime.step6_fake_stamp"),
         change(native, 1, "regime.step5_dense_native_format", "regime.step7_unapproved_skip"),
         change(native, 2, "regime.step5_dense_native_format",
                "regime.step7_unapproved_skip"))),)
    assert (d.exit_code(True), d.exit_code(False)) == (1, 0)
    text = render_diff_text(d).splitlines()
    assert text[2:] == [
        "9 cells, 18 points compared: 4 changed", "",
        "skip:dense_model_content_insensitive (eligible) -> fake_fallback (not eligible): "
        "4 points",
        "  rules: regime.step5_dense_native_format -> regime.step7_unapproved_skip (2)",
        "  rules: regime.step5_dense_stamp_format -> regime.step6_fake_stamp (2)",
        f"  {stamp} {CELL}: points 1, 2", f"  {native} {CELL}: points 1, 2"]


def test_the_same_policy_changes_nothing(runner: CliRunner) -> None:
    d = diff_corpus(EXAMPLES, api.load_policy(), api.load_policy())
    assert (d.changed, d.groups, d.exit_code(True)) == (0, (), 0)
    result = runner.invoke(app, ["diff", "--fail-on-change", *EXAMPLES])
    assert result.exit_code == 0
    assert result.stdout.endswith("9 cells, 18 points compared: 0 changed\n")


def test_a_rule_edit_shows_up_with_the_rule_that_now_decides(tmp_path: Path,
                                                              runner: CliRunner) -> None:
    head = tmp_path / "head"
    shutil.copytree(REPO / "rules", head, ignore=shutil.ignore_patterns("tests", "__*"))
    regime = head / "regime.yaml"
    data = yaml.safe_load(regime.read_text(encoding="utf-8"))
    steps = data["decisions"][0]["steps"]  # move step 3 after step 7 of the ordered decision
    moved = next(s for s in steps if s["id"] == "regime.step3_moe_tp_skip")
    steps.remove(moved)
    steps.insert(1 + next(i for i, s in enumerate(steps)
                          if s["id"] == "regime.step7_unapproved_skip"), moved)
    regime.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    result = runner.invoke(app, ["diff", "--head", str(head), "--fail-on-change", "-f", "json",
                                 *EXAMPLES])
    doc = json.loads(result.stdout)
    assert result.exit_code == 1
    assert (doc["base"]["source"], doc["head"]["source"]) == ("rules", str(head))
    assert [(g["old"], g["new"], g["count"], g["rules"]) for g in doc["groups"]] == [
        ("skip:moe_tp_balanced_by_construction (eligible)", "fake_fallback (not eligible)", 2,
         [{"old": "regime.step3_moe_tp_skip", "new": "regime.step6_fake_stamp", "count": 2}])]


def test_error_points_name_their_codes_and_parameters_are_parsed() -> None:
    assert Outcome("error", None, False, ("kvwarm_malformed",)).label == \
        "error (kvwarm_malformed)"
    assert parse_params(["dense_synthetic_kv=False", "x=true"]) == {
        "dense_synthetic_kv": False, "x": True}
    for bad in ("dense_synthetic_kv", "=true", "k=1"):
        with pytest.raises(KvrulesUsageError):
            parse_params([bad])


def test_cli_params_and_usage_errors(runner: CliRunner) -> None:
    result = runner.invoke(app, ["diff", "--base-param", "dense_synthetic_kv=true",
                                 "--head-param", "dense_synthetic_kv=false",
                                 _example("dense-native-skip-format")])
    assert result.exit_code == 0
    assert result.stdout.splitlines()[1].endswith("dense_synthetic_kv=false")
    bad = runner.invoke(app, ["diff", "--head-param", "nope=true", *EXAMPLES])
    assert bad.exit_code == 2 and "unknown policy parameter 'nope'" in bad.stderr
