"""Cell verdicts cached on disk: re-classifying an unchanged archive evaluates nothing.

A cell's key is a sha256 over everything its verdict depends on: the installed kvrules (its
version and module fingerprint, as for compiled policies, so an edited checkout never reuses
a verdict it did not compute), the policy digest and parameters, where the cell is (campaign,
root, cell id, folders, plan path: they appear in the report) and the bytes of every file
loading the cell reads (the plan, generator overrides and request, ``run.sh`` and the whole
``raw/`` tree with its names). Contents are hashed, never mtimes, so a copy of an archive
hits and a touched file does not miss. A cell whose files cannot all be read plainly (a
symbolic link, an unreadable folder, an odd file name) gets no key: it is always evaluated,
since its verdict may depend on more than its bytes. An entry is data, never code: msgpack
decoded by msgspec into typed structures (:class:`_Entry`), each field type-checked. One
that fails its checksum, does not decode as a verdict or was stored under another key is a
miss, then rewritten.

Reading a whole archive to hash it costs more than the rest of a warm run, so the digest
of a cell's files is also memoized under the status of those files (names, sizes, modify
and change times, inodes, devices), as git's index does: an unchanged archive is listed,
not read. Any change to a file changes its change time, which the owner cannot set back;
files changed within ``RACY_NS`` of being hashed are not memoized (a change in the same
clock tick would go unseen). The memo is independent of policy and kvrules, so the first
run after a policy change does not read the archive's bytes again either.
"""
from __future__ import annotations

import gc
import hashlib
import json
import os
import stat
import time
from dataclasses import dataclass, fields
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence, get_type_hints

import msgspec

from kvrules.artifacts.discover import RAW_DIR, CellRef
from kvrules.artifacts.load import OVERRIDES_NAME
from kvrules.cache.policies import code_fingerprint
from kvrules.cache.store import cache_root, read_entry, touch, write_entry
from kvrules.diagnostics import Diagnostic, Severity
from kvrules.verdicts.model import (POINT_FIELDS, CellVerdict, FailedCondition, PointVerdict,
                                    PointVerdicts, Qualification)

SUFFIX = ".verdict"
MEMO_SUFFIX = ".files"


class _Uncacheable(Exception):
    """The cell's inputs are not plain files and folders: do not cache its verdict."""


def default_root() -> Path | None:
    """The verdict cache below the user cache directory (None when caching is off)."""
    root = cache_root()
    return root / "verdicts" if root is not None else None


RACY_NS = 2_000_000_000
"""A file changed less than this long before it was hashed is hashed again next run: a
change in the same timestamp tick would leave its status unchanged (git's "racy" case;
2 s also covers coarse file system clocks)."""

_Listing = list[tuple[bytes, "str | None", "os.stat_result | None"]]
"""What a cell reads: a label per folder and file, with the file's path and status (None:
absent); folders have neither, their names are the listing."""

_MEMO_SCHEME = b"kvrules-files-1\0"
"""Starts every status digest: a memo written under another digest scheme never matches."""


def _list_file(out: _Listing, path: Path | str) -> None:
    label = f"\0file\0{path}\0".encode("utf-8", "surrogateescape")
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        out.append((label, str(path), None))
        return
    except (OSError, ValueError) as exc:
        raise _Uncacheable() from exc
    if not stat.S_ISREG(st.st_mode):
        raise _Uncacheable()
    out.append((label, str(path), st))


def _list_tree(out: _Listing, raw: Path) -> None:
    """Every folder and file name below ``raw/`` (sorted), with the files' status."""
    def refuse(exc: OSError) -> None:
        if not (isinstance(exc, FileNotFoundError) and Path(exc.filename) == raw):
            raise _Uncacheable() from exc

    for dirpath, dirnames, filenames in os.walk(raw, onerror=refuse):
        dirnames.sort()
        for name in dirnames:
            if os.path.islink(os.path.join(dirpath, name)):
                raise _Uncacheable()
            label = f"\0dir\0{dirpath}/{name}\0".encode("utf-8", "surrogateescape")
            out.append((label, None, None))
        for name in sorted(filenames):
            _list_file(out, os.path.join(dirpath, name))


def _listing(ref: CellRef) -> _Listing:
    """The files loading ``ref`` reads, in a fixed order (raises _Uncacheable)."""
    out: _Listing = []
    campaign_dir = ref.plan_path.parent if ref.plan_path is not None else (
        ref.root if ref.cell_dir != ref.root else None)
    if ref.plan_path is not None:
        _list_file(out, ref.plan_path)
    if campaign_dir is not None:
        _list_file(out, campaign_dir / OVERRIDES_NAME)
    _list_file(out, ref.cell_dir / "generator-request.json")
    _list_file(out, ref.cell_dir / "run.sh")
    _list_tree(out, ref.cell_dir / RAW_DIR)
    return out


def _status(st: os.stat_result) -> bytes:
    """What changes when a file's bytes may have (the access time does not count)."""
    return b"%d,%d,%d,%d,%d" % (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino,
                                st.st_dev)


def _status_digest(listing: _Listing) -> str:
    """Names and file status: equal means unchanged files."""
    h = hashlib.sha256(_MEMO_SCHEME)
    for label, _, st in listing:
        h.update(label)
        if st is not None:
            h.update(_status(st))
    return h.hexdigest()


def _content_digest(listing: _Listing) -> tuple[bytes, bool]:
    """Names and file bytes; and whether every file was old enough to memoize by status.

    A file whose status changed while it was read raises _Uncacheable (the verdict would
    be of other bytes than the key)."""
    h = hashlib.sha256()
    settled = time.time_ns() - RACY_NS
    steady = True
    for label, path, st in listing:
        h.update(label)
        if path is None:  # a folder
            continue
        if st is None:
            h.update(b"absent")
            continue
        with open(path, "rb") as fh:
            h.update(hashlib.sha256(fh.read()).digest())
        if _status(os.lstat(path)) != _status(st):
            raise _Uncacheable()
        steady = steady and st.st_mtime_ns < settled and st.st_ctime_ns < settled
    return h.digest(), steady


def _files_digest(listing: _Listing, memo: Path | None) -> bytes:
    """The digest of what the cell reads: from the memo when no file's status changed
    since it was last hashed, else by reading every file (then memoized if settled)."""
    if memo is None:
        return _content_digest(listing)[0]
    status = _status_digest(listing)
    entry = memo / status[:2] / f"{status}{MEMO_SUFFIX}"
    known = read_entry(entry)
    if known is not None and len(known) == hashlib.sha256().digest_size:
        touch(entry)
        return known
    digest, steady = _content_digest(listing)
    if steady:
        write_entry(entry, digest)
    return digest


@lru_cache(maxsize=1024)
def _resolves_to_itself(folder: str) -> bool:
    """No symbolic link on the way to ``folder`` (remembered for one lookup: a batch's
    cells share their campaign folders, and resolving each costs a status per level)."""
    folder = os.path.abspath(folder)
    parent = os.path.dirname(folder)
    if parent != folder and not _resolves_to_itself(parent):
        return False
    return not os.path.islink(folder)


def cell_key(ref: CellRef, policy_digest: str, parameters: dict[str, Any],
             memo: Path | None = None) -> str | None:
    """The cache key of one cell under one policy, or None when it must not be cached.

    With ``memo`` (a cache folder), the digest of the cell's files is looked up by their
    status first, so an unchanged archive is listed, not read."""
    if not (_resolves_to_itself(str(ref.root)) and _resolves_to_itself(str(ref.cell_dir))):
        return None  # the file checks compare real locations: more than bytes matter
    header = json.dumps(
        [code_fingerprint(), policy_digest, parameters, ref.campaign, str(ref.root), ref.cell_id,
         str(ref.cell_dir), None if ref.plan_path is None else str(ref.plan_path)],
        sort_keys=True, default=str).encode("utf-8", "surrogateescape")
    try:
        files = _files_digest(_listing(ref), memo)
    except (_Uncacheable, OSError, ValueError, RecursionError):
        return None
    return hashlib.sha256(header + files).hexdigest()


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
        verdict = _decode(payload, key) if payload is not None else None
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
        holds the GIL and contends with decoding).
        """
        out = []
        _resolves_to_itself.cache_clear()
        for ref in refs:
            key = cell_key(ref, policy_digest, parameters, self.root)
            out.append((key, self.get(key)))
        return out

    def put(self, key: str, verdict: CellVerdict) -> None:
        """Store a freshly computed verdict (a cache that cannot be written is skipped)."""
        try:
            payload = _encode(key, verdict)
        except (UnicodeEncodeError, OverflowError, TypeError, msgspec.EncodeError):
            return  # not data msgpack holds (a lone surrogate in a name): evaluated each run
        write_entry(self._path(key), payload)


_Error = tuple[str, "int | None", "int | None", str, str, str, "str | None", Severity]
"""A diagnostic's fields, in constructor order."""


if TYPE_CHECKING:
    _Columns = tuple[list[Any], ...]
else:
    _Columns = tuple.__class_getitem__(tuple(
        list[hint] for hint in (get_type_hints(PointVerdict)[name] for name in POINT_FIELDS)))
"""One list per point field, of that field's type (the points of a cell, as columns)."""


class _Entry(msgspec.Struct, array_like=True, forbid_unknown_fields=True):
    """A stored verdict: its key, then the cell verdict's fields; the points as columns
    (one list per :data:`~kvrules.verdicts.model.POINT_FIELDS` entry, in order)."""

    key: str
    campaign: str
    cell_id: str
    workload_kind: str | None
    status: str
    errors: list[_Error]
    qualifications: dict[str, tuple[bool, list[tuple[str, str]]]]
    columns: _Columns
    trace: tuple[str, ...]


_ENCODER = msgspec.msgpack.Encoder()
_DECODER = msgspec.msgpack.Decoder(_Entry)


def _columns(verdict: CellVerdict) -> list[list[Any]]:
    """The points of ``verdict`` as one list per field."""
    points = verdict.points
    if isinstance(points, PointVerdicts):
        return [list(c) for c in points.columns]
    return [[getattr(p, name) for p in points] for name in POINT_FIELDS]


def _encode(key: str, verdict: CellVerdict) -> bytes:
    errors = [(e.file, e.line, e.column, e.message, e.code, e.pointer, e.rule, e.severity)
              for e in verdict.errors]
    quals = {name: (q.eligible, [(f.id, f.reason) for f in q.failed])
             for name, q in verdict.qualifications.items()}
    return _ENCODER.encode(_Entry(key, verdict.campaign, verdict.cell_id,
                                  verdict.workload_kind, verdict.status, errors, quals,
                                  tuple(_columns(verdict)),
                                  verdict.trace))


def _decode(payload: bytes, key: str) -> CellVerdict | None:
    """The stored verdict, or None when the entry is not one stored under ``key``; the
    cyclic collector is paused meanwhile (a verdict is thousands of acyclic objects, and
    collecting while they are built doubled the warm read time)."""
    paused = gc.isenabled()
    gc.disable()
    try:
        entry = _DECODER.decode(payload)
        if entry.key != key or len({len(c) for c in entry.columns}) > 1:
            return None
        return CellVerdict(
            campaign=entry.campaign, cell_id=entry.cell_id, workload_kind=entry.workload_kind,
            status=entry.status, errors=tuple(Diagnostic(*e) for e in entry.errors),
            qualifications={name: Qualification(eligible, tuple(
                FailedCondition(*f) for f in failed))
                for name, (eligible, failed) in entry.qualifications.items()},
            points=PointVerdicts(entry.columns), trace=entry.trace)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None  # corrupt, foreign or not a verdict: a miss, then rewritten
    finally:
        if paused:
            gc.enable()


def _entries(root: Path) -> list[tuple[Path, os.stat_result]]:
    """Verdicts and file-digest memos below ``root``."""
    out = []
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            if name.endswith((SUFFIX, MEMO_SUFFIX)):
                path = Path(dirpath, name)
                try:
                    out.append((path, path.stat()))
                except OSError:
                    pass
    return out


def info(root: Path) -> tuple[int, int]:
    """Verdicts held by the cache at ``root``, and the bytes of all its entries."""
    entries = _entries(root)
    return (sum(1 for path, _ in entries if path.name.endswith(SUFFIX)),
            sum(st.st_size for _, st in entries))


def prune(root: Path, older_than_days: float | None = None) -> int:
    """Delete entries not used for ``older_than_days`` (all when None); how many verdicts
    went (file-digest memos go with them and are not counted)."""
    cutoff = None if older_than_days is None else time.time() - older_than_days * 86400
    removed = 0
    for path, st in _entries(root):
        if cutoff is None or st.st_mtime < cutoff:
            try:
                path.unlink()
                removed += path.name.endswith(SUFFIX)
            except OSError:
                pass
    return removed
