"""``kvrules classify`` as a whole process: parsed in a forked child while the process imports
the pipeline (kvrules.cli.handoff). The user sees one command: the same report, messages and
exit status as the command run in-process, and no process left behind however it ends."""
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

from kvrules.cli import handoff
from kvrules.cli.app import app

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
EXAMPLE = EXAMPLES / "dense-legacy-stamp-format"
ENV = {**os.environ, "COLUMNS": "100", "TERM": "dumb", "NO_COLOR": "1"}


def whole_process(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kvrules", "classify", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120, env=ENV)


def in_process(args: list[str]) -> tuple[int, str]:
    try:
        runner = CliRunner(mix_stderr=False)  # type: ignore[call-arg]
    except TypeError:  # click >= 8.2 keeps stderr apart by itself
        runner = CliRunner()
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


def test_a_job_larger_than_a_pipe_buffer_arrives_whole(tmp_path: Path) -> None:
    """4,000 paths (a shell glob over an archive) pickle to ~400 KB, more than a pipe holds:
    the parser waits until the process has imported the pipeline and reads it."""
    paths = [f"{EXAMPLE}/../{EXAMPLE.name}" for _ in range(4000)] + ["/no/such/last"]
    done = whole_process(paths, tmp_path)
    assert (done.returncode, done.stderr) == (2, "kvrules: error: /no/such/last: no such file "
                                                 "or directory\n")


def test_help_is_printed_once_and_nothing_runs(tmp_path: Path) -> None:
    done = whole_process(["--help"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("Usage: kvrules classify") == 1
    assert done.stderr == ""


PROBE = """
import json, os, sys, time
from kvrules.cli import classify_run, root
mode, example, report = sys.argv[1:4]
if mode == "slow-import":  # the parent is still importing when the signal comes
    def preload():
        me = os.getpid()
        kids = open(f"/proc/{me}/task/{me}/children").read().split()
        print(json.dumps(kids), flush=True)
        time.sleep(60)
    classify_run.preload = preload
elif mode == "parser-bug":
    def broken(only=None):
        raise RuntimeError("parser bug")
    root.build_app = broken
elif mode == "no-fork":  # a process limit reached: the first fork (the parser's) fails
    fork, calls = os.fork, []
    def failing():
        calls.append(1)
        if len(calls) == 1:
            raise BlockingIOError(11, "Resource temporarily unavailable")
        return fork()
    os.fork = failing
elif mode == "parser-killed":
    def killed(only=None):
        os.kill(os.getpid(), 9)
    root.build_app = killed
from kvrules.cli.app import main
sys.argv = ["kvrules", "classify", example, "--output", report]
main()
"""


def probe(mode: str, tmp_path: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", PROBE, mode, str(EXAMPLE),
                             str(tmp_path / "report.txt")], cwd=tmp_path, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads /proc (Linux)")
@pytest.mark.parametrize("signum, status, word", [(signal.SIGTERM, 143, "terminated"),
                                                   (signal.SIGINT, 130, "interrupted")])
def test_a_stop_before_the_job_arrives_ends_both_processes(
        signum: int, status: int, word: str, tmp_path: Path) -> None:
    proc = probe("slow-import", tmp_path)
    assert proc.stdout is not None
    children = [int(pid) for pid in json.loads(proc.stdout.readline())]
    assert len(children) == 1  # the parser
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert (proc.returncode, err) == (status, f"kvrules: {word}\n")
    deadline = time.monotonic() + 5
    while not gone(children[0]) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert gone(children[0])
    assert not (tmp_path / "report.txt").exists()


def test_a_parser_that_fails_is_reported_and_nothing_runs(tmp_path: Path) -> None:
    proc = probe("parser-bug", tmp_path)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1
    assert "RuntimeError: parser bug" in err and out == ""
    assert not (tmp_path / "report.txt").exists()


def test_a_parser_killed_by_a_signal_ends_the_run_with_its_status(tmp_path: Path) -> None:
    proc = probe("parser-killed", tmp_path)
    proc.communicate(timeout=60)
    assert proc.returncode == 128 + 9
    assert not (tmp_path / "report.txt").exists()


def test_without_a_process_to_spare_the_command_is_parsed_and_run_in_one(tmp_path: Path
                                                                        ) -> None:
    proc = probe("no-fork", tmp_path)
    out, err = proc.communicate(timeout=120)
    assert (proc.returncode, out, err) == (0, "", "")
    assert "2/2 points eligible" in (tmp_path / "report.txt").read_text()


def test_exit_statuses_read_as_a_shell_reports_them() -> None:
    assert [handoff._code_of(c) for c in (None, 0, 2, 256 + 3)] == [0, 0, 2, 3]
    pid = os.fork()
    if pid == 0:
        os.kill(os.getpid(), signal.SIGTERM)
    assert handoff._exit_status(os.waitpid(pid, 0)[1]) == 143
