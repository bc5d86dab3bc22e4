"""The README's table example is the real output of its command (docs stay honest)."""
from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_readme_table_example_is_the_real_output():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- table-example -->\n```\n\$ (.*?)\n(.*?)```\n", text, re.S)
    assert block is not None
    command, expected = block.group(1), block.group(2)
    args = shlex.split(command)
    assert args[0] == "kvrules"
    result = subprocess.run([sys.executable, "-m", "kvrules", *args[1:]], cwd=ROOT,
                            capture_output=True, text=True, env={"COLUMNS": "200", "PATH": ""})
    digest = re.compile(r"sha256:[0-9a-f]+")  # changes with every policy edit; not the point
    assert (result.returncode, digest.sub("sha256:…", result.stdout)) == (
        0, digest.sub("sha256:…", expected))
