"""``kvrules classify`` as a whole process gives the report, messages and exit status of the
command run in-process."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from helpers import cli_runner

from kvrules.cli.app import app

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
EXAMPLE = EXAMPLES / "dense-legacy-stamp-format"
ENV = {**os.environ, "COLUMNS": "100", "TERM": "dumb", "NO_COLOR": "1"}


def whole_process(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kvrules", "classify", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120, env=ENV)


def in_process(args: list[str]) -> tuple[int, str]:
    runner = cli_runner()
    result = runner.invoke(app, ["classify", *args])
    return result.exit_code, result.stdout


@pytest.mark.parametrize("args", [
    [str(EXAMPLE), "--format", "jsonl"],
    [str(EXAMPLES), "--format", "json", "--no-dense-synthetic-kv"],
    [str(EXAMPLE), "--format", "github"],
    [str(EXAMPLE / "cells"), "--format", "jsonl"],  # not a campaign: an evidence error, 1
])
def test_reports_and_exit_status_are_the_in_process_ones(args: list[str], tmp_path: Path
                                                         ) -> None:
    done = whole_process([*args, "--no-cache"], tmp_path)
    assert (done.returncode, done.stdout) == in_process([*args, "--no-cache"]), done.stderr


@pytest.mark.parametrize("args, status, message", [
    (["--bogus"], 2, "No such option"),
    ([str(EXAMPLE), "--jobs", "0"], 2, "--jobs"),
    (["/no/such/campaign"], 2, "kvrules: error: /no/such/campaign"),
    ([str(EXAMPLE), "--format", "parquet"], 2, "--format parquet writes a folder"),
])
def test_usage_errors_of_either_process_exit_2_with_their_message(
        args: list[str], status: int, message: str, tmp_path: Path) -> None:
    done = whole_process(args, tmp_path)
    assert (done.returncode, done.stdout) == (status, ""), done.stderr
    assert message in done.stderr
    assert "Traceback" not in done.stderr


def test_thousands_of_paths_are_all_checked(tmp_path: Path) -> None:
    """4,000 paths (a shell glob over an archive): every one is read, the last one checked."""
    paths = [f"{EXAMPLE}/../{EXAMPLE.name}" for _ in range(4000)] + ["/no/such/last"]
    done = whole_process(paths, tmp_path)
    assert (done.returncode, done.stderr) == (2, "kvrules: error: /no/such/last: no such file "
                                                 "or directory\n")


def test_help_is_printed_once_and_nothing_runs(tmp_path: Path) -> None:
    done = whole_process(["--help"], tmp_path)
