"""``kvrules readiness`` end to end on copies of the bundled examples."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import DENSE, DP2, copy_example, snapshot
from typer.testing import CliRunner

from kvrules.cli.app import app
from kvrules.consumers.readiness import NOTE


def test_a_ready_campaign_exits_0_with_the_table(runner: CliRunner, tmp_path: Path) -> None:
    campaign = copy_example(tmp_path, DENSE)
    result = runner.invoke(app, ["readiness", str(campaign)])
    assert result.exit_code == 0, result.stderr
    assert "ready      2/2 eligible" in result.stdout
    assert "ready for full collection: yes" in result.stdout
    assert NOTE in result.stdout


def test_a_blocked_campaign_exits_1_and_json_is_one_document(runner: CliRunner,
                                                              tmp_path: Path) -> None:
    campaigns = [copy_example(tmp_path, name) for name in (DENSE, DP2)]
    out = tmp_path / "readiness.json"
    result = runner.invoke(app, ["readiness", *map(str, campaigns), "-f", "json", "-o", str(out)])
    assert (result.exit_code, result.stdout) == (1, "")
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["note"] == NOTE
    assert [(c["ready_for_full_collection"], [x["status"] for x in c["cells"]])
            for c in doc["campaigns"]] == [(True, ["ready"]), (False, ["blocked"])]
    assert doc["campaigns"][0]["cells"][0]["eligible"] == "2/2 eligible"


def test_an_output_inside_the_campaign_is_refused_and_nothing_is_written(
        runner: CliRunner, tmp_path: Path) -> None:
    campaign = copy_example(tmp_path, DENSE)
    before = snapshot(campaign)
    result = runner.invoke(app, ["readiness", str(campaign), "-o", str(campaign / "r.txt")])
    assert result.exit_code == 2
    assert "never writes over or inside what it reads" in result.stderr
    assert snapshot(campaign) == before


def test_the_command_line_never_writes_inside_the_campaign(runner: CliRunner,
                                                          tmp_path: Path) -> None:
    campaign = copy_example(tmp_path, DENSE)
    before = snapshot(campaign)
    for args in ([], ["-f", "json"], ["--no-dense-synthetic-kv"], ["-o", str(tmp_path / "x")]):
        assert runner.invoke(app, ["readiness", str(campaign), *args]).exit_code in (0, 1)
    assert snapshot(campaign) == before


def test_a_missing_campaign_is_a_usage_error_without_traceback(runner: CliRunner,
                                                               tmp_path: Path) -> None:
    result = runner.invoke(app, ["readiness", str(tmp_path / "nope")])
    assert result.exit_code == 2
    assert "no such file or directory" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout


def test_help_shows_a_worked_example(runner: CliRunner) -> None:
    result = runner.invoke(app, ["readiness", "--help"], terminal_width=200)
    assert "kvrules readiness examples/dense-legacy-stamp-format" in result.stdout
