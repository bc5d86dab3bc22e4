"""The wheel holds every package of the source tree (pyproject lists them explicitly).

A package missing from ``[tool.setuptools] packages`` works in an editable checkout and
fails only once installed, as CI and users install it.
"""
from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_source_package_is_listed_in_pyproject() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    listed = set(config["tool"]["setuptools"]["packages"])
    engine = ROOT / "engine"
    found = {".".join(p.parent.relative_to(engine).parts)
             for p in (engine / "kvrules").rglob("__init__.py") if "__pycache__" not in p.parts}
    assert found - listed == set()


def test_the_package_says_it_is_typed() -> None:
    """PEP 561: mypy and pyright read kvrules' annotations only when py.typed ships."""
    from importlib import resources
    assert resources.files("kvrules").joinpath("py.typed").is_file()
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "py.typed" in config["tool"]["setuptools"]["package-data"]["kvrules"]
