"""The compiled-policy cache: a second run loads instead of compiling; a corrupt, stale or
foreign entry is recompiled; a cache that cannot be written changes nothing but speed."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kvrules import api
from kvrules.cache import policies, store
from kvrules.diagnostics import KvrulesUsageError
from kvrules.resources import rules_dir

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "dense-legacy-stamp-format"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv("KVRULES_CACHE_DIR", str(root))
    return root


@pytest.fixture
def compiles(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every call of the real compiler made through ``api.load_policy``."""
    calls: list[object] = []
    real = api.compile_policy

    def counting(source: object = None, parameters: object = None) -> object:
        calls.append(source)
        return real(source, parameters)  # type: ignore[arg-type]
    counting.__module__, counting.__qualname__ = real.__module__, real.__qualname__
    monkeypatch.setattr(api, "compile_policy", counting)
    return calls


def entries(root: Path) -> list[Path]:
    return sorted((root / "policies").glob(f"*{policies.SUFFIX}"))


def own_policy(tmp_path: Path) -> Path:
    folder = tmp_path / "policy"
    shutil.copytree(str(rules_dir()), folder, ignore=shutil.ignore_patterns("tests"))
    return folder


def test_second_load_does_not_compile(cache: Path, compiles: list[object]) -> None:
    first = api.load_policy()
    second = api.load_policy()
    assert len(compiles) == 1 and len(entries(cache)) == 1
    assert second.identity == first.identity
    a = api.classify([str(EXAMPLE)], first)
    b = api.classify([str(EXAMPLE)], second)
    assert a.to_dict() == b.to_dict()


def test_parameters_and_sources_are_part_of_the_key(cache: Path, compiles: list[object],
                                                    tmp_path: Path) -> None:
    api.load_policy()
    off = api.load_policy(parameters={"dense_synthetic_kv": False})
    assert off.identity.parameters["dense_synthetic_kv"] is False
    folder = own_policy(tmp_path)
    api.load_policy(folder)
    assert len(compiles) == 3 and len(entries(cache)) == 3
    api.load_policy(folder)
    assert len(compiles) == 3


def test_an_edited_rule_file_is_recompiled(cache: Path, compiles: list[object],
                                           tmp_path: Path) -> None:
    folder = own_policy(tmp_path)
    before = api.load_policy(folder)
    target = folder / "regime.yaml"
    target.write_text(target.read_text(encoding="utf-8") + "\n# edited\n", encoding="utf-8")
    after = api.load_policy(folder)
    assert len(compiles) == 2
    assert after.identity.digest != before.identity.digest


def test_an_edited_shipped_rule_file_is_recompiled(cache: Path, compiles: list[object],
                                                   tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The shipped policy is keyed by its files' names, sizes and modification times (as
    the code is), not by reading them: a file edited in place is still seen."""
    from kvrules.policy import compiler
    shipped = tmp_path / "shipped"
    shutil.copytree(Path(str(rules_dir())), shipped)
    monkeypatch.setattr(policies, "rules_dir", lambda: shipped)
    monkeypatch.setattr(compiler, "rules_dir", lambda: shipped)
    before = api.load_policy()
    assert api.load_policy().identity == before.identity and len(compiles) == 1
    target = shipped / "regime.yaml"
    target.write_text(target.read_text(encoding="utf-8") + "\n# edited\n", encoding="utf-8")
    after = api.load_policy()
    assert len(compiles) == 2 and after.identity.digest != before.identity.digest
    stamp = target.stat()
    os.utime(target, ns=(stamp.st_atime_ns, stamp.st_mtime_ns + 1_000_000_000))
    assert api.load_policy().identity == after.identity and len(compiles) == 3


@pytest.mark.parametrize("damage", ["truncated", "flipped byte", "garbage payload",
                                    "foreign key", "not a policy", "ill-typed policy",
                                    "a pickle"])
def test_a_corrupt_entry_is_recompiled_and_rewritten(cache: Path, compiles: list[object],
                                                      damage: str, tmp_path: Path) -> None:
    import msgspec
    import pickle

    good = api.load_policy()
    [entry] = entries(cache)
    data = entry.read_bytes()
    if damage == "truncated":
        entry.write_bytes(data[: len(data) // 2])
    elif damage == "flipped byte":
        entry.write_bytes(data[:-10] + bytes([data[-10] ^ 0xFF]) + data[-9:])
    elif damage == "garbage payload":  # a valid checksum over bytes that are no msgpack
        store.write_entry(entry, b"\xc1not msgpack")
    elif damage == "foreign key":  # a well-formed entry written for another key
        store.write_entry(entry, policies._encode("0" * 64, good.compiled))
    elif damage == "not a policy":  # well-formed msgpack of another shape
        store.write_entry(entry, msgspec.msgpack.encode([entry.stem, {"rules": []}]))
    elif damage == "ill-typed policy":  # the right shape with a field of the wrong type
        tree = msgspec.msgpack.decode(store.read_entry(entry))
        tree[1]["strata"] = {"rule": "not a number"}
        store.write_entry(entry, msgspec.msgpack.encode(tree))
    else:  # code: never loaded, so never run
        marker = tmp_path / "ran"
        store.write_entry(entry, pickle.dumps(Planted(str(marker))))
    again = api.load_policy()
    assert not (tmp_path / "ran").exists()
    assert len(compiles) == 2
    assert again.identity == good.identity
    assert entries(cache) == [entry] and policies._load(entry, entry.stem) is not None


class Planted:
    """Unpickling this creates the file ``marker`` (what a planted pickle could do)."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, ...]:
        return (open, (self.marker, "w"))


def test_a_loaded_policy_classifies_as_the_compiled_one(cache: Path) -> None:
    """The stored form is data: every field of the policy comes back equal, with the same
    types (an operand's tuple stays a tuple, a reference a Ref)."""
    compiled = api.load_policy().compiled
    [entry] = entries(cache)
    loaded = policies._load(entry, entry.stem)
    assert loaded is not None and loaded is not compiled
    assert loaded == compiled and types_of(loaded) == types_of(compiled)
    assert all(loaded.rules[r.id] is r for r in loaded.policy.rules)
    report = api.classify([str(EXAMPLE)], api.Policy(loaded, None))
    assert report.to_dict() == api.classify([str(EXAMPLE)], api.Policy(compiled, None)).to_dict()


def types_of(value: object) -> object:
    """The type of ``value`` and of everything inside it, as a tree."""
    import dataclasses
    if dataclasses.is_dataclass(value):
        return type(value), [types_of(getattr(value, f.name))
                             for f in dataclasses.fields(value)]
    if isinstance(value, dict):
        return dict, [(types_of(k), types_of(v)) for k, v in value.items()]
    if isinstance(value, (list, tuple, frozenset)):
        return type(value), [types_of(v) for v in sorted(value, key=repr)]
    return type(value)


def test_another_kvrules_version_never_loads_the_entry(cache: Path, compiles: list[object],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    api.load_policy()
    monkeypatch.setattr(policies, "KVRULES_VERSION", "9.9.9")
    policies.code_fingerprint.cache_clear()
    try:
        api.load_policy()
    finally:
        policies.code_fingerprint.cache_clear()
    assert len(compiles) == 2 and len(entries(cache)) == 2


def test_an_unwritable_cache_changes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             compiles: list[object]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory", encoding="utf-8")
    monkeypatch.setenv("KVRULES_CACHE_DIR", str(blocker / "cache"))
    a, b = api.load_policy(), api.load_policy()
    assert a.identity == b.identity and len(compiles) == 2


def test_no_cache_writes_nothing(cache: Path, compiles: list[object],
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KVRULES_NO_CACHE", "1")
    api.load_policy()
    api.load_policy()
    assert len(compiles) == 2 and not cache.exists()


def test_an_invalid_policy_is_never_cached(cache: Path, tmp_path: Path) -> None:
    folder = own_policy(tmp_path)
    (folder / "broken.yaml").write_text("rules: [\n", encoding="utf-8")
    for _ in range(2):
        with pytest.raises(KvrulesUsageError) as info:
            api.load_policy(folder)
        assert "broken.yaml" in str(info.value)
    assert not entries(cache)


def run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "kvrules", *args], capture_output=True,
                          env=env, cwd=ROOT.parent, timeout=120)


def test_whole_process_runs_agree_with_and_without_a_cache_hit(tmp_path: Path) -> None:
    env = {**os.environ, "KVRULES_CACHE_DIR": str(tmp_path / "cache")}
    cold = run(["classify", str(EXAMPLE), "--format", "json"], env)
    [entry] = entries(tmp_path / "cache")
    written = entry.stat().st_ino
    warm = run(["classify", str(EXAMPLE), "--format", "json"], env)
    assert entry.stat().st_ino == written  # loaded, not rewritten (a write renames a new file)
    entry.write_bytes(store.MAGIC + b"\0" * 40)
    repaired = run(["classify", str(EXAMPLE), "--format", "json"], env)
    uncached = run(["classify", str(EXAMPLE), "--format", "json"],
                   {**env, "KVRULES_NO_CACHE": "1"})
    assert cold.returncode == warm.returncode == repaired.returncode == uncached.returncode == 0
    assert cold.stdout == warm.stdout == repaired.stdout == uncached.stdout
    assert not (cold.stderr or warm.stderr or repaired.stderr)
    assert policies._load(entry, entry.stem) is not None


def test_the_cache_keeps_only_the_most_recently_used_policies(
        cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(policies, "MAX_ENTRIES", 2)
    folder = own_policy(tmp_path)
    api.load_policy()
    shipped = entries(cache)
    target = folder / "regime.yaml"
    text = target.read_text(encoding="utf-8")
    later = shipped[0].stat().st_mtime_ns + 3600 * 10 ** 9  # used last (mtimes are coarse)
    for n in range(3):  # three edits of one policy, each its own entry
        os.utime(shipped[0], ns=(later, later))
        target.write_text(text + f"\n# edit {n}\n", encoding="utf-8")
        api.load_policy(folder)
    kept = entries(cache)
    assert len(kept) == 2 and shipped[0] in kept


def test_the_code_fingerprint_covers_every_code_package_and_no_data_package(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A module edited anywhere in the code (here two packages down) changes the
    fingerprint; files in the data packages (example campaigns, rules, schemas) are not
    walked (an installed kvrules holds ~50 folders of examples)."""
    package = tmp_path / "kvrules"
    shutil.copytree(policies._PACKAGE, package, ignore=shutil.ignore_patterns("__pycache__"))
    for data in ("examples", "rules", "schemas"):
        (package / data).mkdir(exist_ok=True)
    monkeypatch.setattr(policies, "_PACKAGE", package)

    def fingerprint() -> str:
        policies.code_fingerprint.cache_clear()
        try:
            return policies.code_fingerprint()
        finally:
            policies.code_fingerprint.cache_clear()

    first = fingerprint()
    for data in ("examples", "rules", "schemas"):
        (package / data / "deep").mkdir()
        (package / data / "deep" / "extra.py").write_text("# data\n", encoding="utf-8")
    assert fingerprint() == first
    module = package / "authoring" / "lint" / "base.py"
    module.write_text(module.read_text(encoding="utf-8") + "\n# edited\n", encoding="utf-8")
    assert fingerprint() != first
