"""``mypy --strict`` passes on the package (configured by ``[tool.mypy]`` in pyproject.toml).

CI installs mypy and the stub packages through the ``test`` extra; the test runs mypy as a
separate process from the repository root, exactly as a developer would.
"""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(importlib.util.find_spec("mypy") is None,
                    reason="mypy is not installed (pip install '.[test]' installs it)")
def test_mypy_strict_passes_on_the_package(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
