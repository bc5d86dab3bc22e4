"""The README's consumer commands and embedding example, run as written on the examples."""
from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import EXAMPLES

README = Path(__file__).resolve().parents[1] / "README.md"
BIN = Path(sys.executable).parent


def _block(name: str) -> str:
    """The fenced code block between ``<!-- name -->`` and ``<!-- /name -->``."""
    text = README.read_text(encoding="utf-8")
    found = re.search(rf"<!-- {name} -->\n```[a-z]*\n(.*?)```\n<!-- /{name} -->", text, re.S)
    assert found, f"README.md has no {name} block"
    return found.group(1)


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    shutil.copytree(EXAMPLES, tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_readme_commands_run_in_order_and_print_what_it_shows(workdir: Path) -> None:
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


def test_the_readme_embedding_example_runs(workdir: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    code = compile(_block("consumers-embedding"), str(README), "exec")
    exec(code, {"__name__": "readme_example"})
    assert capsys.readouterr().out == ""  # no cell was left out
    assert (workdir / "published" / "h200_sxm" / "vllm" / "0.11.2" /
            "fpm_forward_perf.metadata.json").is_file()
