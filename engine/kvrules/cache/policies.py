"""Compiled policies cached on disk: a second run loads the policy instead of compiling it.

The key covers everything the compiled form depends on: the policy's files (names and
contents, base policies of ``extends`` included), the parameter overrides, the compiler (the
kvrules version plus a fingerprint of its installed modules, so an upgrade or an edited
checkout never loads an entry it did not write) and the Python version. A policy whose
files cannot be read, or that does not compile, is never cached: compiling it again raises
the same diagnostics as before.

An entry is data (:mod:`kvrules.cache.codec`: msgpack decoded into the policy's record
types, each field type-checked), never code: a corrupt, foreign or ill-typed entry is a
miss, compiled again and rewritten.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Union

from kvrules.diagnostics import KvrulesUsageError
from kvrules.policy.compiled import CompiledPolicy
from kvrules.policy.model import Ref
from kvrules.resources import RULE_FILE_SUFFIXES, rules_dir
from kvrules.verdicts.model import KVRULES_VERSION
from kvrules.cache import codec
from kvrules.cache.store import cache_root, prune, read_entry, touch, write_entry

if TYPE_CHECKING:
    from importlib.abc import Traversable

PolicySource = Union[str, Path, "Traversable", None]
Compile = Callable[[PolicySource, "dict[str, Any] | None"], CompiledPolicy]

_PACKAGE = Path(__file__).resolve().parents[1]
_DATA_PACKAGES = frozenset({"examples", "rules", "schemas"})
"""Top-level subpackages that hold data, not code (only an empty ``__init__.py`` each; the
shipped rules are stamped on their own): not walked. In an installed kvrules the example
campaigns alone are ~50 folders, most of the fingerprint's cost (~4 ms of every run)."""
SUFFIX = ".policy"
MAX_ENTRIES = 32
"""Compiled policies kept (the most recently used): a policy author's edits each write one."""


@lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """sha256 over the name, size and mtime of every module of the installed kvrules (its
    data packages aside)."""
    h = hashlib.sha256(f"{KVRULES_VERSION}\0{sys.version}\0".encode())
    _stamp_modules(h, str(_PACKAGE), "")
    return h.hexdigest()


def _stamp_modules(h: Any, folder: str, rel: str) -> None:
    """Feed ``h`` each ``*.py`` below ``folder`` as ``rel/name``, size and mtime, in name
    order, folders after the files beside them (the order ``os.walk`` gave)."""
    with os.scandir(folder) as found:
        entries = sorted(found, key=lambda e: e.name)
    for entry in entries:
        if entry.name.endswith(".py") and entry.is_file():
            st = entry.stat()
            h.update(f"{rel}{entry.name}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    for entry in entries:
        if entry.is_dir() and entry.name != "__pycache__" and not (
                rel == "" and entry.name in _DATA_PACKAGES):
            _stamp_modules(h, entry.path, f"{rel}{entry.name}{os.sep}")


def policy_key(source: PolicySource, parameters: dict[str, Any] | None,
               compiler: str) -> str | None:
    """The cache key of a policy, or None when its files cannot all be read cleanly.

    The shipped policy is part of the installed kvrules: like its modules, its files are
    known by name, size and modification time (:func:`_shipped_stamp`), not read. Any
    other policy is read, with the policies it extends, and known by its contents."""
    shipped = _shipped_stamp() if source is None else None
    if shipped is not None:
        h = hashlib.sha256(f"{code_fingerprint()}\0{compiler}\0shipped\0{shipped}".encode())
    else:
        from kvrules.policy.compiler import read_policy_layers  # (compiler: see compiled)
        try:
            sources = read_policy_layers(source)
        except (KvrulesUsageError, OSError):
            return None
        if sources.errors or sources.diagnostics:
            return None
        h = hashlib.sha256(f"{code_fingerprint()}\0{compiler}\0{sources.label}\0".encode())
        for name in sorted(sources.files):
            h.update(name.encode("utf-8", "surrogatepass") + b"\0")
            h.update(sources.files[name].encode("utf-8", "surrogatepass") + b"\0")
    h.update(json.dumps(parameters or {}, sort_keys=True).encode())
    return h.hexdigest()


def _shipped_stamp() -> str | None:
    """Name, size and modification time of each file the shipped policy is read from
    (:data:`~kvrules.resources.RULE_FILE_SUFFIXES` of its folder, as the compiler reads it); None when the folder is
    not plain files on disk (then the files themselves are read)."""
    folder = rules_dir()
    if not isinstance(folder, Path):
        return None
    try:
        with os.scandir(folder) as entries:
            stamps = sorted((e.name, e.stat()) for e in entries
                            if e.name.endswith(RULE_FILE_SUFFIXES) and e.is_file())
    except OSError:
        return None
    return "".join(f"{name}\0{st.st_size}\0{st.st_mtime_ns}\0" for name, st in stamps)


def _classes() -> tuple[type, ...]:
    """The records a stored policy may hold: those its annotations name, and ``Ref`` (an
    operand or action argument, in fields typed ``Any``)."""
    return codec.record_classes(CompiledPolicy) + (Ref,)


def _encode(key: str, compiled: CompiledPolicy) -> bytes:
    """The key, then the policy without ``rules`` (the same objects as ``policy.rules``,
    rebuilt from them on loading rather than stored twice)."""
    return codec.encode((key, replace(compiled, rules={})), tuple[str, CompiledPolicy],
                        _classes())


def _load(path: Path, key: str) -> CompiledPolicy | None:
    """The policy stored at ``path`` under ``key``; None when absent, corrupt or foreign."""
    payload = read_entry(path)
    if payload is None:
        return None
    try:
        stored_key, compiled = codec.decode(payload, tuple[str, CompiledPolicy], _classes())
    except codec.Refused:
        return None
    if stored_key != key or not isinstance(compiled, CompiledPolicy):
        return None
    compiled.rules = {rule.id: rule for rule in compiled.policy.rules}
    return compiled


def cached_compile(compile_policy: Compile, source: PolicySource = None,
                   parameters: dict[str, Any] | None = None) -> CompiledPolicy:
    """``compile_policy(source, parameters)``, loaded from the cache when it holds it."""
    root = cache_root()
    compiler = f"{compile_policy.__module__}.{compile_policy.__qualname__}"
    key = policy_key(source, parameters, compiler) if root is not None else None
    if root is None or key is None:
        return compile_policy(source, parameters)
    path = root / "policies" / f"{key}{SUFFIX}"
    compiled = _load(path, key)
    if compiled is not None:
        touch(path)
        return compiled
    compiled = compile_policy(source, parameters)
    try:
        payload = _encode(key, compiled)
    except codec.Refused:  # a backend's lowered form that is not data: not cached
        return compiled
    if write_entry(path, payload):
        prune(path.parent, MAX_ENTRIES, SUFFIX)
    return compiled
