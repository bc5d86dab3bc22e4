"""A cache folder holds data, never code: whatever its entries hold, a run never executes
it, and a corrupt, foreign or crafted entry costs only a recompute (the same report bytes).

Most entries here are planted signed with the test user's own key (the format of
:mod:`kvrules.cache.store`), so they pass the signature check and reach the decoder, which
must hold on its own; the last tests forge entries without the key."""
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
    for path in planted:  # ...when loaded; every entry now holds it, signed
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


def _forged(cache: Path, sign: Callable[[bytes], bytes]) -> int:
    """Every verdict entry rewritten to name its cell ``forged-cell`` (well-formed, typed
    data under the right key), signed by ``sign``; how many were forged."""
    from kvrules.cache import verdicts
    count = 0
    for path in cache_entries(cache):
        if path.suffix != verdicts.SUFFIX:
            continue
        entry = msgspec.msgpack.decode(store.read_entry(path) or b"", type=verdicts._Entry)
        payload = msgspec.msgpack.encode(msgspec.structs.replace(entry, cell_id="forged-cell"))
        path.write_bytes(store.MAGIC + sign(payload) + payload)
        count += 1
    return count


def test_entries_forged_without_the_key_are_never_read(warm: Path, tmp_path: Path,
                                                       uncached: bytes) -> None:
    """Whoever can write the folder but does not hold the key: a checksum they compute, or
    a key of their own, gives entries that are recomputed, never reported."""
    import hashlib
    import hmac
    assert _forged(warm, lambda p: hashlib.sha256(p).digest()) > 0
    assert classify(warm, tmp_path / "checksummed.jsonl") == uncached
    assert _forged(warm, lambda p: hmac.new(b"k" * 32, p, hashlib.sha256).digest()) > 0
    assert classify(warm, tmp_path / "other-key.jsonl") == uncached


def test_what_the_key_protects_a_signed_forgery_is_trusted(warm: Path, tmp_path: Path,
                                                           uncached: bytes) -> None:
    """The other side of the test above: an entry signed with the key is believed, which is
    why the key is kept outside the cache folder and shared only with trusted people."""
    assert _forged(warm, store._signature) > 0
    assert b"forged-cell" in classify(warm, tmp_path / "signed.jsonl")


def _run_as(user: Path, cache: Path, out: Path, key: str | None) -> str:
    """``kvrules classify --progress`` as another user (their own config folder): stderr."""
    env = {**os.environ, "KVRULES_CACHE_DIR": str(cache), "XDG_CONFIG_HOME": str(user)}
    env.pop("KVRULES_CACHE_KEY", None)
    if key is not None:
        env["KVRULES_CACHE_KEY"] = key
    done = subprocess.run([sys.executable, "-m", "kvrules", "classify", str(EXAMPLES),
                           "--format", "jsonl", "--output", str(out), "--progress"],
                          env=env, capture_output=True, text=True, timeout=300, cwd=out.parent)
    assert done.returncode in (0, 1), done.stderr
    return done.stderr


def test_a_folder_is_shared_through_a_shared_key_only(tmp_path: Path) -> None:
    cache = tmp_path / "shared"
    alice, bob = tmp_path / "alice", tmp_path / "bob"
    _run_as(alice, cache, tmp_path / "a1.jsonl", None)
    assert " 0 of 9 cells from the verdict cache" in _run_as(bob, cache, tmp_path / "b1.jsonl",
                                                              None)
    assert (alice / "kvrules" / "cache.key").stat().st_mode & 0o077 == 0  # private to alice
    _run_as(alice, cache, tmp_path / "a2.jsonl", "team secret")
    assert " 9 of 9 cells from the verdict cache" in _run_as(bob, cache, tmp_path / "b2.jsonl",
                                                              "team secret")
