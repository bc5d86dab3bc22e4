"""Cache files: a root directory, signed entries, atomic writes.

An entry is ``MAGIC + HMAC-SHA256(key, payload) + payload``. The key is a secret kept outside
the cache folder (:func:`cache_key`), so whoever can write the folder but does not hold the
key cannot forge an entry: an entry that is missing, truncated, altered, written under
another key or crafted reads as None, and the caller recomputes and rewrites it. Entries are
also only ever decoded as typed data (see :mod:`kvrules.cache`), so not even a signed entry
can run code. Writing goes through a temporary file renamed into place, so a concurrent
reader sees the old entry or the new one, never half of one. A cache that cannot be written
(read-only home, full disk) only costs the speed-up: errors are swallowed here and never
reach the user.

Location: ``$KVRULES_CACHE_DIR``, else ``$XDG_CACHE_HOME/kvrules``, else
``~/.cache/kvrules``. ``KVRULES_NO_CACHE=1`` turns every cache off.
"""
from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import tempfile
from functools import lru_cache
from pathlib import Path

MAGIC = b"kvrules-cache-3\n"
"""Starts every entry; entries of another format (earlier ones held pickles, or were only
checksummed) are misses."""
_DIGEST = hashlib.sha256().digest_size

KEY_VARIABLE = "KVRULES_CACHE_KEY"
"""A secret shared by the people who share a cache folder (any text); without it each user
signs with a key of their own (:func:`key_file`)."""


def key_file() -> Path:
    """The per-user signing key: ``$XDG_CONFIG_HOME/kvrules/cache.key`` (else
    ``~/.config/kvrules/cache.key``), created on first use, readable by its owner only."""
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "kvrules" / "cache.key"


@lru_cache(maxsize=1)
def cache_key() -> bytes:
    """The key entries are signed with: ``$KVRULES_CACHE_KEY``, else the per-user key file.
    Where that file can be neither read nor made, a key of this process alone: its entries
    are read by nobody else, so the cache costs nothing but its speed-up."""
    shared = os.environ.get(KEY_VARIABLE)
    if shared:
        return hashlib.sha256(shared.encode("utf-8", "surrogatepass")).digest()
    path = key_file()
    try:
        return _read_key(path)
    except OSError:
        pass
    try:
        return _make_key(path)
    except OSError:
        return secrets.token_bytes(32)


def _read_key(path: Path) -> bytes:
    key = path.read_bytes()
    if len(key) < 32:
        raise OSError(f"{path}: too short to be a key")
    return key


def _make_key(path: Path) -> bytes:
    """A new random key at ``path`` (0600), or the one another process made first."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(secrets.token_bytes(32))
    return _read_key(path)


def _signature(payload: bytes) -> bytes:
    return hmac.new(cache_key(), payload, hashlib.sha256).digest()


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
    """The payload of the entry at ``path``; None when absent, unreadable, altered or not
    signed with this user's key."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    head = len(MAGIC) + _DIGEST
    if len(data) < head or not data.startswith(MAGIC):
        return None
    payload = data[head:]
    if not hmac.compare_digest(_signature(payload), data[len(MAGIC):head]):
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
            fh.write(MAGIC + _signature(payload) + payload)
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
