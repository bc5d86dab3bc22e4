"""``kvrules verify`` end to end on a real published table, intact and tampered with."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from consumer_helpers import LLAMA, RECORD, edit, policy_copy, published, record, write_record
from helpers import DENSE, EXAMPLES
from typer.testing import CliRunner

from kvrules.cli.app import app


@pytest.fixture
def root(tmp_path: Path) -> Path:
    target = tmp_path / "published"
    published(target, [EXAMPLES / DENSE])
    return target


def test_an_intact_table_exits_0(runner: CliRunner, root: Path) -> None:
    result = runner.invoke(app, ["verify", str(root)])
    assert (result.exit_code, result.stdout) == (
        0, f"h200_sxm/vllm/0.11.2: ok (2 rows; dense cells: {LLAMA})\n")


def test_a_tampered_table_exits_1_naming_file_and_pointer(runner: CliRunner, root: Path) -> None:
    write_record(root, {**record(root), "schema_version": 6})
    result = runner.invoke(app, ["verify", str(root)])
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [
        "h200_sxm/vllm/0.11.2: FAILED",
        f"{root}/{RECORD.as_posix()}#/schema_version: table_schema_historical: schema_version "
        "6 is historical and cannot be finalized: use a fresh output directory"]


def test_rules_make_another_policy_known(runner: CliRunner, root: Path, tmp_path: Path) -> None:
    write_record(root, {**record(root), "kv_seed_classification": {"policy": "custom_v2",
                                                                  "cells": [LLAMA]}})
    rules = policy_copy(tmp_path)
    edit(rules / "policy.yaml", "version: dense_full_attention_v1", "version: custom_v2")
    unknown = runner.invoke(app, ["verify", str(root), "-f", "json"])
    known = runner.invoke(app, ["verify", str(root), "--rules", str(rules)])
    assert (unknown.exit_code, known.exit_code) == (1, 0)
    (problem,) = json.loads(unknown.stdout)["tables"][0]["problems"]
    assert problem["code"] == "marker_unknown_policy"


def test_a_folder_without_table_is_a_usage_error(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(app, ["verify", str(tmp_path)])
    assert result.exit_code == 2
    assert "no published table" in result.stderr and "Traceback" not in result.stderr
