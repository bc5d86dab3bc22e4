"""Test-session setup: kvrules' caches live in a fresh folder, never the user's.

Set at configure time (not in a fixture) so every kvrules process a test starts inherits it.
"""
from __future__ import annotations

import os
import shutil
import tempfile

_CACHE: list[str] = []


def pytest_configure(config: object) -> None:
    _CACHE.append(tempfile.mkdtemp(prefix="kvrules-test-cache-"))
    os.environ["KVRULES_CACHE_DIR"] = _CACHE[0]
    os.environ.pop("KVRULES_NO_CACHE", None)


def pytest_unconfigure(config: object) -> None:
    for path in _CACHE:
        shutil.rmtree(path, ignore_errors=True)
