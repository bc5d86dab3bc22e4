"""The compiled schema validators cache: a second process loads the validators instead of
generating them; a corrupt or foreign entry is compiled again; the cached code decides
exactly as freshly generated code does."""
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
from kvrules.cache import store, validators
from kvrules.diagnostics import Diagnostic

ROOT = Path(__file__).resolve().parents[1]
RANK = next((ROOT / "examples" / "dense-native-skip-format").rglob("benchmark.json"))
PLAN = ROOT / "examples" / "dense-native-skip-format" / "collection-plan.json"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh cache folder, and a process that has compiled no validator yet."""
    root = tmp_path / "cache"
    monkeypatch.setenv("KVRULES_CACHE_DIR", str(root))
    monkeypatch.setattr(validators, "_PREPARED_FROM", set())
    monkeypatch.setattr(validate, "_PREPARED", {})
    validate._fast.cache_clear()
    yield root
    validate._fast.cache_clear()


@pytest.fixture
def generated(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The schemas whose validator code was generated (not read from the cache)."""
    calls: list[str] = []
    real = validate.fast_validator_code

    def counting(name: str) -> Any:
        calls.append(name)
        return real(name)
    monkeypatch.setattr(validators, "fast_validator_code", counting)
    monkeypatch.setattr(validate, "fast_validator_code", counting)
    return calls


def entries(root: Path) -> list[Path]:
    return sorted((root / "validators").glob("*.marshal"))


def new_process() -> None:
    """What a second run starts from: nothing compiled, nothing prepared."""
    validators._PREPARED_FROM.clear()
    validate._PREPARED.clear()
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


def test_second_process_loads_instead_of_generating(cache: Path, generated: list[str]) -> None:
    validators.prepare_validators()
    assert sorted(generated) == sorted(validate.FAST_SCHEMAS)
    assert len(entries(cache)) == len(validate.FAST_SCHEMAS)
    first = verdicts(documents())
    new_process()
    validators.prepare_validators()
    second = verdicts(documents())
    assert len(generated) == len(validate.FAST_SCHEMAS)  # nothing generated the second time
    assert second == first
    assert first[0] is None and first[3] is None
    assert all(d is not None for d in first[1:3] + first[4:])


def test_cached_code_decides_as_generated_code(cache: Path) -> None:
    fresh = verdicts(documents())  # no cache read: each validator generated on first use
    validators.prepare_validators()
    new_process()
    validators.prepare_validators()
    assert verdicts(documents()) == fresh


@pytest.mark.parametrize("damage", ["truncate", "garbage", "foreign"])
def test_corrupt_or_foreign_entry_is_compiled_again(cache: Path, generated: list[str],
                                                    damage: str) -> None:
    validators.prepare_validators()
    target = entries(cache)[0]
    if damage == "truncate":
        target.write_bytes(target.read_bytes()[:40])
    elif damage == "garbage":  # a valid cache entry whose payload is no code object
        store.write_entry(target, b"\x00not marshal data")
    else:  # a well-formed entry holding some other code
        store.write_entry(target, __import__("marshal").dumps(compile("x = 1", "f", "exec")))
    new_process()
    generated.clear()
    validators.prepare_validators()
    assert len(generated) == 1  # only the damaged entry
    assert verdicts(documents()) == verdicts(documents()) and verdicts(documents())[0] is None
    new_process()
    generated.clear()
    validators.prepare_validators()
    assert generated == []  # rewritten


def test_no_cache_means_no_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                 generated: list[str]) -> None:
    monkeypatch.setenv("KVRULES_NO_CACHE", "1")
    monkeypatch.setenv("KVRULES_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(validators, "_PREPARED_FROM", set())
    validators.prepare_validators()
    assert generated == [] and not (tmp_path / "cache").exists()


def test_unwritable_cache_still_validates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          cache: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("KVRULES_CACHE_DIR", str(blocker / "cache"))  # below a file
    validators.prepare_validators()
    assert verdicts(documents())[0] is None and verdicts(documents())[1] is not None


def test_classify_process_stores_then_reuses_validators(tmp_path: Path) -> None:
    """As users run it: the first run writes one entry per evidence schema, a second run
    (which reads them back) gives the same report bytes, and so does a run without cache."""
    example = ROOT / "examples" / "dense-native-skip-format"
    env = {**os.environ, "KVRULES_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("KVRULES_NO_CACHE", None)

    def run(name: str, extra: dict[str, str] | None = None) -> bytes:
        out = tmp_path / name
        subprocess.run([sys.executable, "-m", "kvrules", "classify", str(example), "--format",
                        "jsonl", "--output", str(out), "--no-cache", "--jobs", "2"],
                       env={**env, **(extra or {})}, check=True, cwd=tmp_path)
        return out.read_bytes()

    first = run("first.jsonl")
    stored = {p.name: p.read_bytes() for p in entries(tmp_path / "cache")}
    assert len(stored) == len(validate.FAST_SCHEMAS)
    assert run("second.jsonl") == first
    assert {p.name: p.read_bytes() for p in entries(tmp_path / "cache")} == stored
    assert run("none.jsonl", {"KVRULES_NO_CACHE": "1"}) == first
