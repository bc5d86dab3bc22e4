"""The command line as a whole: what ``--version`` says and which commands it offers."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path


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


def test_the_whole_command_line_lists_every_command() -> None:
    from typer.main import get_command
    from kvrules.cli import app as cli
    group = get_command(cli.app)
    assert list(group.commands) == [*cli.COMMANDS, *cli.GROUPS]  # type: ignore[attr-defined]
