"""The documented consumer commands and embedding example, run as written on the examples."""
from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from doc_pages import named_block
from helpers import EXAMPLES

BIN = Path(sys.executable).parent


def _block(name: str) -> str:
    """The fenced code block between ``<!-- name -->`` and ``<!-- /name -->`` (on any page)."""
    return named_block(name)[1]


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    shutil.copytree(EXAMPLES, tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_documented_commands_run_in_order_and_print_what_it_shows(workdir: Path) -> None:
    commands = [shlex.split(line) for line in _block("consumers-commands").splitlines()]
    assert [c[:2] for c in commands] == [["kvrules", "classify"], ["kvrules", "readiness"],
                                         ["kvrules", "aggregate"], ["kvrules", "publish"],
                                         ["kvrules", "verify"]]
    outputs = []
    for argv in commands:
        done = subprocess.run([str(BIN / argv[0]), *argv[1:]], cwd=workdir, text=True,
                              capture_output=True, check=False)
        assert done.returncode == 0, (argv, done.stdout, done.stderr)
        outputs.append(done.stdout)
    assert "".join(outputs[2:]) == _block("consumers-output")


def test_the_documented_embedding_example_runs(workdir: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    page, text = named_block("consumers-embedding")
    code = compile(text, str(page), "exec")
    exec(code, {"__name__": "readme_example"})
    assert capsys.readouterr().out == ""  # no cell was left out
    assert (workdir / "published" / "h200_sxm" / "vllm" / "0.11.2" /
            "fpm_forward_perf.metadata.json").is_file()
