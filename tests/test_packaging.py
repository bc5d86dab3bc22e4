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


def test_shipped_rule_and_case_files_name_their_schema_for_editors() -> None:
    """``# yaml-language-server: $schema=...`` on line 1, a path that resolves both in the
    checkout and in the installed package (rules/ and schemas/ stay siblings)."""
    from kvrules.resources import rules_dir
    import re
    for root in (Path(__file__).resolve().parents[1] / "rules", Path(str(rules_dir()))):
        files = sorted(root.glob("*.yaml")) + sorted((root / "tests").glob("*.yaml"))
        assert len(files) >= 10
        for path in files:
            first = path.read_text(encoding="utf-8").splitlines()[0]
            found = re.fullmatch(r"# yaml-language-server: \$schema=(\S+)", first)
            assert found, f"{path}: {first}"
            schema = (path.parent / found.group(1)).resolve()
            want = "policy-tests" if path.parent.name == "tests" else "rules"
            assert schema.name == f"{want}.schema.json" and schema.is_file(), path
