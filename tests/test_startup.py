"""Start-up cost: a command imports only what it uses.

``--help`` and ``--version`` import neither durable-rules nor pyarrow nor jsonschema;
``classify`` of valid evidence imports no pyarrow and no jsonschema, and durable-rules only in
its engine worker, nor pydantic (typer's per-option adapters since 0.29 cost ~0.2 s a run).
Checked in a fresh interpreter, as a user's process starts.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "dense-legacy-stamp-format"
HEAVY = ("durable", "durable_rules_engine", "pyarrow", "jsonschema", "numpy")
ON_EXIT = """
import os, sys
_PID, _EXIT = os.getpid(), os._exit


def _reported_exit(code):
    if os.getpid() == _PID:  # not a forked child (the parser, a worker) ending
        report(code)
    _EXIT(code)


os._exit = _reported_exit  # a finished ``kvrules classify`` ends here (cli.app._end)
"""
"""Prepended to a probe that defines ``report(code)``: it then also runs when the command
ends through ``os._exit``, skipping the interpreter's clean-up (and the probe's ``finally``)."""
PROBE = ON_EXIT + """
import json
from kvrules.cli.app import main


def report(code):
    loaded = sorted({m.split(".")[0] for m in sys.modules})
    sys.__stderr__.write("\\nLOADED " + json.dumps(loaded) + "\\n")
    sys.__stderr__.write("MODULES " + json.dumps(sorted(sys.modules)) + "\\n")
    sys.__stderr__.flush()


try:
    sys.argv = ["kvrules", *json.loads(sys.argv[1])]
    main()
except SystemExit:
    pass
finally:
    report(None)
"""


def loaded_by(args: list[str], tmp_path: Path, tag: str = "LOADED") -> set[str]:
    """The top-level packages a whole-process run imported (``tag`` MODULES: every module)."""
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(args)], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)
    marker = [line for line in done.stderr.splitlines() if line.startswith(tag + " ")]
    assert marker, done.stderr[-2000:]
    return set(json.loads(marker[-1][len(tag) + 1:]))


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["classify", "--help"],
                                  ["rules", "--help"]])
def test_help_and_version_import_no_engine_arrow_or_schema_library(
        args: list[str], tmp_path: Path) -> None:
    assert loaded_by(args, tmp_path) & set(HEAVY) == set()


def test_classify_of_valid_evidence_imports_no_arrow_and_no_schema_library(
        tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    args = ["classify", str(EXAMPLE), "--format", "json", "--output", str(out)]
    first = loaded_by(args, tmp_path)  # may compile the policy: jsonschema checks rule files
    assert first & {"pyarrow", "numpy", "durable", "durable_rules_engine"} == set()
    again = loaded_by(args, tmp_path)  # the compiled policy comes from the cache
    assert json.loads(out.read_text(encoding="utf-8"))["summary"]["cells"] == 1
    assert again & set(HEAVY) == set()  # durable-rules runs in the worker process only
    assert "pydantic" not in again  # typer before 0.29 (pyproject.toml): no adapters to build
    assert "yaml" not in again  # the rule files are hashed, not parsed, to find the cached policy
    compiling = {"kvrules.policy.compiler", "kvrules.policy.extends", "kvrules.policy.decisions"}
    modules = loaded_by(args, tmp_path, "MODULES")
    assert modules & compiling == set()  # nor compiled
    assert "importlib.resources" not in modules  # data folders come from the import spec


def test_version_names_kvrules_the_engine_and_the_shipped_policy_digest(tmp_path: Path) -> None:
    from kvrules import api
    from kvrules.verdicts.model import KVRULES_VERSION
    done = subprocess.run([sys.executable, "-m", "kvrules", "--version"], capture_output=True,
                          text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 0
    lines = done.stdout.splitlines()
    assert lines[0] == f"kvrules {KVRULES_VERSION}"
    assert lines[1].startswith("durable-rules 2.")
    assert lines[2] == f"shipped policy {api.load_policy().identity.digest}"


def test_the_lint_checks_load_only_for_rules_check(tmp_path: Path) -> None:
    """``rules check --help`` lists the check ids without importing the checks (~45 ms)."""
    probe = ("import sys\nfrom kvrules.cli.app import main\nsys.argv = ['kvrules', '--version']\n"
             "try:\n    main()\nexcept SystemExit:\n    pass\n"
             "print('kvrules.authoring.lint' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert done.stdout.splitlines()[-1] == "False", done.stderr


def test_a_run_naming_its_command_builds_no_other_command(tmp_path: Path) -> None:
    """typer inspects every registered command when it starts: a run builds its own only."""
    probe = ("import sys\nfrom kvrules.cli.app import build_app\nbuild_app('classify')\n"
             "print(sorted(m for m in sys.modules if m.startswith('kvrules.cli.')))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    commands = eval(done.stdout.splitlines()[-1])  # noqa: S307 - our own probe's list
    assert "kvrules.cli.classify" in commands, done.stderr
    assert not {"kvrules.cli.report", "kvrules.cli.rules", "kvrules.cli.diff",
                "kvrules.cli.explain", "kvrules.cli.publish"} & set(commands)


def test_the_process_that_classifies_never_imports_typer(tmp_path: Path) -> None:
    """``classify`` is parsed in a forked child (kvrules.cli.handoff): the process a user
    started imports the pipeline meanwhile, then classifies without the command line's
    library (typer and click are ~60 ms of imports)."""
    probe = ON_EXIT + (
        "from kvrules.cli.app import main\n"
        "def report(code):\n"
        "    print('exit', code)\n"
        "    print(sorted(m for m in sys.modules if m.startswith(('kvrules.cli.', 'typer'))))\n"
        "    sys.stdout.flush()\n"
        "sys.argv = ['kvrules', 'classify', sys.argv[1], '-o', sys.argv[2]]\n"
        "try:\n    main()\nexcept SystemExit as e:\n    report(e.code)\n")
    done = subprocess.run([sys.executable, "-c", probe, str(EXAMPLE), str(tmp_path / "r.txt")],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    *_, status, modules = done.stdout.splitlines()
    assert status == "exit 0", done.stderr
    loaded = eval(modules)  # noqa: S307 - our own probe's list
    assert "kvrules.cli.classify_run" in loaded
    assert not [m for m in loaded if m.startswith("typer") or m in (
        "kvrules.cli.classify", "kvrules.cli.root", "kvrules.cli.consumer_options")]
    assert "2/2 points eligible" in (tmp_path / "r.txt").read_text()


def test_the_whole_command_line_lists_every_command() -> None:
    from typer.main import get_command
    from kvrules.cli import app as cli
    group = get_command(cli.app)
    assert list(group.commands) == [*cli.COMMANDS, *cli.GROUPS]  # type: ignore[attr-defined]
