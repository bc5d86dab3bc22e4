"""Cell verdicts cached on disk: re-classifying an unchanged archive evaluates nothing.

A cell's key is a sha256 over everything its verdict depends on: the installed kvrules (its
version and module fingerprint, as for compiled policies, so an edited checkout never reuses
a verdict it did not compute), the policy digest and parameters, where the cell is (campaign, root, cell id, folders, plan path:
they appear in the report) and the bytes of every file loading the cell reads (the plan,
generator overrides and request, ``run.sh`` and the whole ``raw/`` tree with its names).
Contents are hashed, never mtimes, so a copy of an archive hits and a touched file does not
miss. A cell whose files cannot all be read plainly (a symbolic link, an unreadable folder,
an odd file name) gets no key: it is always evaluated, since its verdict may depend on more
than its bytes. An entry that fails its checksum or does not unpickle is a miss, then
rewritten.
"""
from __future__ import annotations

import hashlib
import copyreg
import gc
import io
import json
import os
import pickle
import stat
import time
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Sequence

from kvrules.artifacts.discover import RAW_DIR, CellRef
from kvrules.artifacts.load import OVERRIDES_NAME
from kvrules.cache.policies import code_fingerprint
from kvrules.cache.store import cache_root, read_entry, touch, write_entry
from kvrules.verdicts.model import CellVerdict, PointVerdict

SUFFIX = ".verdict"


class _Uncacheable(Exception):
    """The cell's inputs are not plain files and folders: do not cache its verdict."""


def default_root() -> Path | None:
    """The verdict cache below the user cache directory (None when caching is off)."""
    root = cache_root()
    return root / "verdicts" if root is not None else None


def _hash_file(h: Any, path: Path) -> None:
    """Name, then bytes (or an absence marker) of one file a cell may read."""
    h.update(f"\0file\0{path}\0".encode("utf-8", "surrogateescape"))
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        h.update(b"absent")
        return
    except (OSError, ValueError) as exc:
        raise _Uncacheable() from exc
    if not stat.S_ISREG(st.st_mode):
        raise _Uncacheable()
    with open(path, "rb") as fh:
        h.update(hashlib.sha256(fh.read()).digest())


def _hash_tree(h: Any, raw: Path) -> None:
    """Every folder and file name below ``raw/`` (sorted) and every file's bytes."""
    def refuse(exc: OSError) -> None:
        if not (isinstance(exc, FileNotFoundError) and Path(exc.filename) == raw):
            raise _Uncacheable() from exc

    for dirpath, dirnames, filenames in os.walk(raw, onerror=refuse):
        dirnames.sort()
        for name in dirnames:
            if os.path.islink(os.path.join(dirpath, name)):
                raise _Uncacheable()
            h.update(f"\0dir\0{dirpath}/{name}\0".encode("utf-8", "surrogateescape"))
        for name in sorted(filenames):
            _hash_file(h, Path(dirpath, name))


def cell_key(ref: CellRef, policy_digest: str, parameters: dict[str, Any]) -> str | None:
    """The cache key of one cell under one policy, or None when it must not be cached."""
    for folder in (ref.root, ref.cell_dir):
        if os.path.realpath(folder) != os.path.abspath(folder):
            return None  # the file checks compare real locations: more than bytes matter
    h = hashlib.sha256(json.dumps(
        [code_fingerprint(), policy_digest, parameters, ref.campaign, str(ref.root), ref.cell_id,
         str(ref.cell_dir), None if ref.plan_path is None else str(ref.plan_path)],
        sort_keys=True, default=str).encode("utf-8", "surrogateescape"))
    campaign_dir = ref.plan_path.parent if ref.plan_path is not None else (
        ref.root if ref.cell_dir != ref.root else None)
    try:
        if ref.plan_path is not None:
            _hash_file(h, ref.plan_path)
        if campaign_dir is not None:
            _hash_file(h, campaign_dir / OVERRIDES_NAME)
        _hash_file(h, ref.cell_dir / "generator-request.json")
        _hash_file(h, ref.cell_dir / "run.sh")
        _hash_tree(h, ref.cell_dir / RAW_DIR)
    except (_Uncacheable, OSError, ValueError, RecursionError):
        return None
    return h.hexdigest()


@dataclass
class VerdictCache:
    """One cache folder of verdicts, counting what a run found in it."""

    root: Path
    hits: int = 0
    misses: int = 0

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}{SUFFIX}"

    def get(self, key: str | None) -> CellVerdict | None:
        """The verdict stored under ``key``; None (a miss) when absent, corrupt or unkeyed."""
        if key is None:
            self.misses += 1
            return None
        path = self._path(key)
        payload = read_entry(path)
        verdict = _unpickle(payload, key) if payload is not None else None
        if verdict is None:
            self.misses += 1
            return None
        self.hits += 1
        touch(path)
        return verdict

    def lookup(self, refs: Sequence[CellRef], policy_digest: str,
               parameters: dict[str, Any]) -> list[tuple[str | None, CellVerdict | None]]:
        """Key and stored verdict (None: a miss) of each cell, in order.

        Sequential on purpose: hashing in threads measured slower (the key's Python part
        holds the GIL and contends with unpickling).
        """
        out = []
        for ref in refs:
            key = cell_key(ref, policy_digest, parameters)
            out.append((key, self.get(key)))
        return out

    def put(self, key: str, verdict: CellVerdict) -> None:
        """Store a freshly computed verdict (a cache that cannot be written is skipped)."""
        write_entry(self._path(key), _pickle((key, verdict)))


_POINT_FIELDS = tuple(f.name for f in fields(PointVerdict))


def _point_by_constructor(point: PointVerdict) -> tuple[type[PointVerdict], tuple[Any, ...]]:
    """A point as its constructor call: unpickles 2.4x faster than the default slot state
    (a verdict holds one point per benchmark id) and is a third smaller."""
    return PointVerdict, tuple(getattr(point, name) for name in _POINT_FIELDS)


def _pickle(entry: tuple[str, CellVerdict]) -> bytes:
    buffer = io.BytesIO()
    pickler = pickle.Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.dispatch_table = {**copyreg.dispatch_table, PointVerdict: _point_by_constructor}
    pickler.dump(entry)
    return buffer.getvalue()


def _unpickle(payload: bytes, key: str) -> CellVerdict | None:
    """The stored verdict; the cyclic collector is paused meanwhile (a verdict is thousands
    of acyclic objects, and collecting while they are built doubled the warm read time)."""
    paused = gc.isenabled()
    gc.disable()
    try:
        stored_key, verdict = pickle.loads(payload)
    except Exception:  # noqa: BLE001 - any undecodable entry is a miss, then rewritten
        return None
    finally:
        if paused:
            gc.enable()
    if stored_key != key or not isinstance(verdict, CellVerdict):
        return None
    return verdict


def _entries(root: Path) -> list[tuple[Path, os.stat_result]]:
    out = []
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            if name.endswith(SUFFIX):
                path = Path(dirpath, name)
                try:
                    out.append((path, path.stat()))
                except OSError:
                    pass
    return out


def info(root: Path) -> tuple[int, int]:
    """Entries and bytes held by the verdict cache at ``root``."""
    entries = _entries(root)
    return len(entries), sum(st.st_size for _, st in entries)


def prune(root: Path, older_than_days: float | None = None) -> int:
    """Delete entries not used for ``older_than_days`` (all when None); how many went."""
    cutoff = None if older_than_days is None else time.time() - older_than_days * 86400
    removed = 0
    for path, st in _entries(root):
        if cutoff is None or st.st_mtime < cutoff:
            try:
                path.unlink()
                removed += 1
            except OSError:
                pass
    return removed
