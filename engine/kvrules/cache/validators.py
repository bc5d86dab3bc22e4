"""Compiled schema validators cached on disk: a worker's first cell does not generate them.

fastjsonschema writes and compiles a validator module per shipped schema, ~13 ms per
process: on a small campaign that is most of each extraction worker's first cell. The code
objects are kept (``marshal``) under a key of everything they come from: the schema's
bytes, the kvrules code fingerprint (which covers the Python version) and the
fastjsonschema version. A missing, stale or corrupt entry is compiled again and rewritten;
a cache that cannot be written costs only the speed-up.
"""
from __future__ import annotations

import hashlib
import marshal
from pathlib import Path
from types import CodeType

import fastjsonschema

from kvrules.artifacts.validate import FAST_SCHEMAS, fast_validator_code, use_fast_validator
from kvrules.cache.policies import code_fingerprint
from kvrules.cache.store import cache_root, prune, read_entry, touch, write_entry
from kvrules.resources import schema_file

MAX_ENTRIES = 4 * len(FAST_SCHEMAS)
"""Validators kept (the most recently used): those of a few kvrules versions."""


def _generator_version() -> str:
    """fastjsonschema's version, from the module (package metadata costs a scan)."""
    return str(getattr(fastjsonschema, "VERSION", "unknown"))


def validator_key(name: str) -> str:
    """The cache key of a schema's compiled validator."""
    h = hashlib.sha256(f"{code_fingerprint()}\0{_generator_version()}\0{name}\0".encode())
    h.update(schema_file(name).read_bytes())
    return h.hexdigest()


def _load(payload: bytes | None) -> CodeType | None:
    if payload is None:
        return None
    try:
        code = marshal.loads(payload)
    except (EOFError, ValueError, TypeError):
        return None
    return code if isinstance(code, CodeType) else None


_PREPARED_FROM: set[Path] = set()
"""Cache folders this process took its validators from already."""


def prepare_validators() -> None:
    """Give this process (and the workers it forks next) every evidence schema's validator
    from the cache, compiling and storing those it lacks; once per process and cache folder.
    Without a cache: nothing (each process compiles what it validates)."""
    root = cache_root()
    if root is None or root in _PREPARED_FROM:
        return
    _PREPARED_FROM.add(root)
    for name in FAST_SCHEMAS:
        path = root / "validators" / f"{validator_key(name)}.marshal"
        code = _load(read_entry(path))
        if code is not None and use_fast_validator(name, code):
            touch(path)
            continue
        code = fast_validator_code(name)
        if use_fast_validator(name, code) and write_entry(path, marshal.dumps(code)):
            prune(path.parent, MAX_ENTRIES, ".marshal")
