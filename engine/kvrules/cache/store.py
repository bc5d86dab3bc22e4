"""Cache files: a root directory, checksummed entries, atomic writes.

An entry is ``MAGIC + sha256(payload) + payload``. Reading a missing, truncated or altered
entry returns None (the caller recomputes and rewrites it); writing goes through a
temporary file renamed into place, so a concurrent reader sees the old entry or the new
one, never half of one. A cache that cannot be written (read-only home, full disk) only
costs the speed-up: errors are swallowed here and never reach the user. The checksum
detects corruption, not tampering: whoever can write the folder can forge a valid entry,
which is why entries are only ever decoded as typed data (see :mod:`kvrules.cache`).

Location: ``$KVRULES_CACHE_DIR``, else ``$XDG_CACHE_HOME/kvrules``, else
``~/.cache/kvrules``. ``KVRULES_NO_CACHE=1`` turns every cache off.
"""
from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

MAGIC = b"kvrules-cache-2\n"
"""Starts every entry; entries of another format (version 1 held pickles) are misses."""
_DIGEST = hashlib.sha256().digest_size


def cache_root() -> Path | None:
    """The cache directory, or None when caching is turned off."""
    if os.environ.get("KVRULES_NO_CACHE", "") not in ("", "0"):
        return None
    explicit = os.environ.get("KVRULES_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "kvrules"


def read_entry(path: Path) -> bytes | None:
    """The payload of the entry at ``path``; None when absent, unreadable or corrupt."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    head = len(MAGIC) + _DIGEST
    if len(data) < head or not data.startswith(MAGIC):
        return None
    payload = data[head:]
    if hashlib.sha256(payload).digest() != data[len(MAGIC):head]:
        return None
    return payload


def write_entry(path: Path, payload: bytes) -> bool:
    """Write ``payload`` to ``path`` atomically; False when the cache cannot be written."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError:
        return False
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(MAGIC + hashlib.sha256(payload).digest() + payload)
        os.replace(tmp, path)
        return True
    except OSError:
        return False
    finally:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def touch(path: Path) -> None:
    """Mark an entry as just used (its mtime orders :func:`prune`)."""
    try:
        os.utime(path)
    except OSError:
        pass


def prune(folder: Path, keep: int, suffix: str) -> None:
    """Delete all but the ``keep`` most recently used ``*suffix`` entries of ``folder``."""
    try:
        entries = [(e.stat().st_mtime_ns, e.name) for e in os.scandir(folder)
                   if e.name.endswith(suffix) and e.is_file()]
    except OSError:
        return
    for _, name in sorted(entries, reverse=True)[keep:]:
        try:
            os.unlink(folder / name)
        except OSError:
            pass
