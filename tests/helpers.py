"""Fixture builders: copy a bundled example campaign into tmp_path and mutate it by pointer.

Tests work on real files built from ``examples/`` so they exercise the same reading code as
the CLI; the examples themselves are never modified.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from typer.testing import CliRunner

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
DENSE = "dense-legacy-stamp-format"
DP2 = "dp2-peer-ineligible"
_DELETE = object()


def copy_example(tmp_path: Path, name: str = DENSE, dest: str | None = None) -> Path:
    """Copy ``examples/<name>`` to ``tmp_path/<dest or name>`` and return the copy."""
    target = tmp_path / (dest or name)
    shutil.copytree(EXAMPLES / name, target)
    return target


def only_cell(campaign: Path) -> Path:
    """The single cell folder of an example campaign."""
    (cell,) = sorted((campaign / "cells").iterdir())
    return cell


def pod_dir(campaign: Path) -> Path:
    """The single pod folder (``raw/<pod>``) of an example campaign's cell."""
    (pod,) = sorted((only_cell(campaign) / "raw").iterdir())
    return pod


def load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def dump(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1), encoding="utf-8")


def _split(pointer: str) -> list[str]:
    return [p.replace("~1", "/").replace("~0", "~") for p in pointer.split("/")[1:]]


def _step(node: Any, key: str) -> Any:
    return node[int(key)] if isinstance(node, list) else node[key]


def set_at(path: Path, pointer: str, value: Any = _DELETE) -> None:
    """Set (or, without ``value``, delete) the value at a JSON pointer in a file."""
    data = load(path)
    *parents, last = _split(pointer)
    node = data
    for key in parents:
        node = _step(node, key)
    index: Any = int(last) if isinstance(node, list) else last
    if value is _DELETE:
        del node[index]
    else:
        node[index] = value
    dump(path, data)


def replace_text(path: Path, old: str, new: str, count: int = 1) -> None:
    """Edit raw text (for things json.dumps cannot write, such as a bare NaN token)."""
    text = path.read_text(encoding="utf-8")
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, count), encoding="utf-8")


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file's bytes below ``root``, to prove that loading never modifies evidence."""
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file()}


def big_rank(template: dict[str, Any], n: int, rank: int = 0, size: int = 1) -> dict[str, Any]:
    """A rank artifact with ``n`` results cloned from the template's first result."""
    data = json.loads(json.dumps(template))
    first = data["results"][0]
    results = []
    for i in range(n):
        result = json.loads(json.dumps(first))
        result["point"]["benchmark_id"] = i + 1
        result["point"]["total_kv_read_tokens"] = 128 * (i + 1)
        result["fpms"][0]["wall_time"] = 0.01 + i * 1e-5
        results.append(result)
    data["results"] = results
    data["dp"] = {"rank": rank, "size": size}
    return data


def digests(root: Path) -> dict[str, str]:
    """sha256 of every file below ``root`` (and every folder, as ``dir``), by relative path:
    equal before and after a command means no input byte changed and nothing was added."""
    out: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            out[rel] = "link:" + os.readlink(path)
        elif path.is_dir():
            out[rel] = "dir"
        else:
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def kvrules_process(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``kvrules ARGS`` as a whole process (exit status, stderr), run in ``cwd``."""
    return subprocess.run([sys.executable, "-m", "kvrules", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=300)


def cli_runner() -> "CliRunner":
    """typer's test runner with stderr kept apart from stdout (click < 8.2 mixes them
    unless told otherwise; 8.2 and later keep them apart by themselves)."""
    from typer.testing import CliRunner
    try:
        return CliRunner(mix_stderr=False)  # type: ignore[call-arg]
    except TypeError:
        return CliRunner()
