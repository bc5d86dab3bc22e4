"""A cache folder holds data, never code: whatever its entries hold, a run never executes
it, and a corrupt, foreign or crafted entry costs only a recompute (the same report bytes).

The entries are planted with a valid checksum (the format of :mod:`kvrules.cache.store`),
so they pass the integrity check and reach the decoder: the checksum detects corruption,
not tampering."""
from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Callable

import msgspec
import pytest

from kvrules.cache import store

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


class Planted:
    """Unpickling this creates the file ``marker``: what any loaded pickle could do."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, ...]:
        return (open, (self.marker, "w"))


def classify(cache: Path | None, out: Path) -> bytes:
    """``kvrules classify`` of the bundled examples as a whole process: the report's bytes."""
    env = {**os.environ, "KVRULES_CACHE_DIR": str(cache)} if cache else {
        **os.environ, "KVRULES_NO_CACHE": "1"}
    if cache:
        env.pop("KVRULES_NO_CACHE", None)
    done = subprocess.run([sys.executable, "-m", "kvrules", "classify", str(EXAMPLES),
                           "--format", "jsonl", "--output", str(out)],
                          env=env, capture_output=True, timeout=300, cwd=out.parent)
    assert done.returncode in (0, 1), done.stderr.decode()
    assert b"Traceback" not in done.stderr
    return out.read_bytes()


def cache_entries(cache: Path) -> list[Path]:
    """Every entry file of the cache (policies, verdicts, file-digest memos)."""
    return sorted(p for p in cache.rglob("*") if p.is_file())


@pytest.fixture(scope="module")
def uncached(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    return classify(None, tmp_path_factory.mktemp("uncached") / "report.jsonl")


@pytest.fixture
def warm(tmp_path: Path) -> Path:
    """A cache folder filled by one run: a policy, verdicts and memos."""
    cache = tmp_path / "cache"
    classify(cache, tmp_path / "fill.jsonl")
    kinds = {p.suffix for p in cache_entries(cache)}
    assert {".policy", ".verdict", ".files"} <= kinds
    return cache


def test_planted_pickles_never_run(warm: Path, tmp_path: Path, uncached: bytes) -> None:
    marker = tmp_path / "code-ran"
    payload = pickle.dumps(Planted(str(marker)))
    assert pickle.loads(payload) is not None and marker.exists()  # the payload does run...
    marker.unlink()
    planted = cache_entries(warm)
    for path in planted:  # ...when loaded; every entry now holds it, with a valid checksum
        store.write_entry(path, payload)
    for old in ("policies/x.pickle", "validators/x.marshal"):  # names earlier versions read
        store.write_entry(warm / old, payload)
    assert all(store.read_entry(p) == payload for p in planted)
    assert classify(warm, tmp_path / "tampered.jsonl") == uncached
    assert not marker.exists()


def _random(path: Path, data: bytes) -> bytes:
    return os.urandom(len(data) or 64)


def _truncated(path: Path, data: bytes) -> bytes:
    return data[: len(data) // 2]


def _garbage_payload(path: Path, data: bytes) -> None:
    store.write_entry(path, os.urandom(200))


def _other_shape(path: Path, data: bytes) -> None:
    """Well-formed msgpack under the right key, of the wrong type."""
    store.write_entry(path, msgspec.msgpack.encode([path.stem, {"status": "ok"}, 1, 2]))


def _ill_typed(path: Path, data: bytes) -> None:
    """The entry's own structure with one value changed to another type."""
    payload = store.read_entry(path) or b""
    if path.suffix == ".files":  # a file-digest memo: raw digest bytes, here half of one
        store.write_entry(path, payload[:16])
        return
    tree = msgspec.msgpack.decode(payload)
    if isinstance(tree, list) and len(tree) > 4:
        tree[4] = 7  # a verdict's status
    elif isinstance(tree, list) and len(tree) == 2 and isinstance(tree[1], dict):
        tree[1]["strata"] = ["not", "a", "mapping"]  # a policy's strata
    else:
        tree = [7]
    store.write_entry(path, msgspec.msgpack.encode(tree))


Damage = Callable[[Path, bytes], "bytes | None"]


@pytest.mark.parametrize("damage", [_random, _truncated, _garbage_payload, _other_shape,
                                    _ill_typed], ids=lambda f: f.__name__.strip("_"))
def test_damaged_entries_cost_only_a_recompute(warm: Path, tmp_path: Path, uncached: bytes,
                                               damage: Damage) -> None:
    for path in cache_entries(warm):
        data = path.read_bytes()
        new = damage(path, data)
        if new is not None:
            path.write_bytes(new)
    assert classify(warm, tmp_path / "damaged.jsonl") == uncached
    assert classify(warm, tmp_path / "rewritten.jsonl") == uncached  # and rewritten entries


def test_a_warm_cache_reports_the_same_bytes(warm: Path, tmp_path: Path,
                                             uncached: bytes) -> None:
    """The control: the cache is read (its entries survive a run untouched) and agrees."""
    before = {p: p.stat().st_ino for p in cache_entries(warm)}
    assert classify(warm, tmp_path / "warm.jsonl") == uncached
    assert {p: p.stat().st_ino for p in cache_entries(warm)} == before
