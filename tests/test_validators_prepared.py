"""Schema validators are generated in the process that uses them, once, and never read
from a cache folder: a run with a cache writes no code to it and decides as a run without."""
from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

from kvrules.artifacts import validate
from kvrules.diagnostics import Diagnostic

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "dense-native-skip-format"
RANK = next(EXAMPLE.rglob("benchmark.json"))
PLAN = EXAMPLE / "collection-plan.json"


@pytest.fixture
def generated(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The schemas whose validator code was generated, in a process that has none yet."""
    calls: list[str] = []
    real = validate.fast_validator_code

    def counting(name: str) -> Any:
        calls.append(name)
        return real(name)
    monkeypatch.setattr(validate, "fast_validator_code", counting)
    validate._fast.cache_clear()
    yield calls
    validate._fast.cache_clear()


def verdicts(documents: list[tuple[Any, str]]) -> list[Diagnostic | None]:
    return [validate.validate(data, schema, "f.json", "artifact_invalid")
            for data, schema in documents]


def documents() -> list[tuple[Any, str]]:
    """Valid and invalid rank and plan documents (fast path and schema errors alike)."""
    rank = json.loads(RANK.read_text())
    plan = json.loads(PLAN.read_text())
    bad_status = copy.deepcopy(rank)
    bad_status["dp"]["size"] = 0
    bad_point = copy.deepcopy(rank)
    bad_point["results"][0]["point"]["batch_size"] = 1.0
    bad_plan = copy.deepcopy(plan)
    bad_plan["cells"] = "none"
    return [(rank, "rank.schema.json"), (bad_status, "rank.schema.json"),
            (bad_point, "rank.schema.json"), (plan, "plan.schema.json"),
            (bad_plan, "plan.schema.json"), ({}, "provenance.schema.json"),
            ([], "sidecar.schema.json")]


def test_prepare_generates_each_validator_once(generated: list[str]) -> None:
    validate.prepare_validators()
    validate.prepare_validators()
    assert sorted(generated) == sorted(validate.FAST_SCHEMAS)
    found = verdicts(documents())
    assert len(generated) == len(validate.FAST_SCHEMAS)  # validating generates nothing more
    assert found[0] is None and found[3] is None
    assert all(d is not None for d in found[1:3] + found[4:])


def test_prepared_validators_decide_as_lazily_generated_ones(generated: list[str]) -> None:
    lazy = verdicts(documents())
    validate._fast.cache_clear()
    validate.prepare_validators()
    assert verdicts(documents()) == lazy


def test_classify_process_stores_no_validator(tmp_path: Path) -> None:
    """As users run it: a run with a cache folder leaves nothing in it but data entries,
    and reports the same bytes as a run without a cache."""
    cache = tmp_path / "cache"
    env = {**os.environ, "KVRULES_CACHE_DIR": str(cache)}
    env.pop("KVRULES_NO_CACHE", None)

    def run(name: str, extra: dict[str, str] | None = None) -> bytes:
        out = tmp_path / name
        subprocess.run([sys.executable, "-m", "kvrules", "classify", str(EXAMPLE), "--format",
                        "jsonl", "--output", str(out), "--no-cache", "--jobs", "2"],
                       env={**env, **(extra or {})}, check=True, cwd=tmp_path)
        return out.read_bytes()

    first = run("first.jsonl")
    assert run("second.jsonl") == first
    assert run("none.jsonl", {"KVRULES_NO_CACHE": "1"}) == first
    stored = sorted(p.relative_to(cache).parts[0] for p in cache.rglob("*") if p.is_file())
    assert stored == ["policies"]
