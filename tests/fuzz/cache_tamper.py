"""Cache mutants: tampered cache folders between two runs of the same classification.

A cache mutant is a copy of a cache folder that one run of ``kvrules classify examples``
filled (a compiled policy, verdicts, file-digest memos), with 1 to 3 tamperings of its
entries: random bytes, truncation, a valid-checksum payload of random bytes, of well-formed
msgpack of the wrong type, or of a pickle that creates a marker file when loaded. The
oracle (on top of :func:`oracle.check`): no code ran from the cache (the marker is absent)
and the report is byte for byte the one a run without a cache gives.
"""
from __future__ import annotations

import pickle
import random
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

import msgspec

from . import mutations as mut
from .oracle import Finding, check

CACHE_CLASSES = ("cache_code_ran", "cache_changed_report")
MARKER = "code-ran-from-cache"

Tamper = Callable[[random.Random, Path, Path], str]
"""(random, entry file, marker path) -> what it did."""


class Planted:
    """Unpickling this creates the file ``marker``."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (self.marker, "w"))


def _store() -> Any:
    from kvrules.cache import store  # the entry format of the kvrules under test
    return store


def t_random_bytes(rnd: random.Random, path: Path, marker: Path) -> str:
    path.write_bytes(rnd.randbytes(rnd.choice([0, 1, 17, 48, 300, 5000])))
    return "random bytes"


def t_truncate(rnd: random.Random, path: Path, marker: Path) -> str:
    data = path.read_bytes()
    path.write_bytes(data[: rnd.randrange(len(data) or 1)])
    return "truncated"


def t_garbage_payload(rnd: random.Random, path: Path, marker: Path) -> str:
    _store().write_entry(path, rnd.randbytes(rnd.choice([1, 32, 200])))
    return "valid checksum over random bytes"


def t_wrong_type(rnd: random.Random, path: Path, marker: Path) -> str:
    value = rnd.choice([[path.stem, {"status": "ok"}], {"rules": []}, [path.stem] * 9,
                        "eligible", 2 ** 63, [[[[]]]]])
    _store().write_entry(path, msgspec.msgpack.encode(value))
    return f"valid checksum over msgpack {type(value).__name__}"


def t_pickle(rnd: random.Random, path: Path, marker: Path) -> str:
    _store().write_entry(path, pickle.dumps(Planted(str(marker)), rnd.choice([2, 4, 5])))
    return "valid checksum over a pickle that creates a file"


def t_swap(rnd: random.Random, path: Path, marker: Path) -> str:
    """Another entry's bytes (a verdict stored under another cell's key)."""
    others = [p for p in entries(path.parents[2] if path.parent.name != "policies"
                                 else path.parents[1]) if p != path]
    if others:
        shutil.copyfile(rnd.choice(others), path)
    return "another entry's bytes"


TAMPERINGS: dict[str, Tamper] = {
    "random_bytes": t_random_bytes, "truncate": t_truncate,
    "garbage_payload": t_garbage_payload, "wrong_type": t_wrong_type, "pickle": t_pickle,
    "swap": t_swap,
}


def entries(cache: Path) -> list[Path]:
    return sorted(p for p in cache.rglob("*") if p.is_file())


def classify_args(report: Path) -> list[str]:
    return ["classify", str(mut.EXAMPLES), "--format", "jsonl", "--output", str(report)]


def run_with(cache: Path | None, report: Path, timeout: float, cwd: Path) -> Any:
    """One kvrules process with its cache folder (None: no cache); see :func:`run_kvrules`."""
    from .run import run_kvrules
    env = {"KVRULES_CACHE_DIR": str(cache), "KVRULES_NO_CACHE": "0"} if cache else {
        "KVRULES_NO_CACHE": "1"}
    return run_kvrules("classify (cache)", classify_args(report), timeout, cwd, False,
                       env=env)


def fuzz_cache_one(seed: int, index: int, template: Path, reference: bytes, workdir: Path,
                   timeout: float) -> Any:
    """Build mutant ``index`` of ``seed`` from the filled cache ``template``, run, judge."""
    from .run import MutantResult
    rnd = random.Random(f"kvrules-fuzz-cache:{seed}:{index}")
    folder = workdir / f"c{index:05d}"
    if folder.exists():
        shutil.rmtree(folder)
    shutil.copytree(template, folder / "cache")
    marker = folder / MARKER
    result = MutantResult(seed, index, "cache", [])
    files = entries(folder / "cache")
    for _ in range(rnd.randint(1, 3)):
        name = rnd.choice(sorted(TAMPERINGS))
        target = rnd.choice(files) if rnd.random() < 0.7 else None
        for path in [target] if target else files:
            did = TAMPERINGS[name](rnd, path, marker)
        where = target.relative_to(folder / "cache") if target else "every entry"
        result.descriptions.append(f"{name}: {did} ({where})")
    report = folder / "report.jsonl"
    run = run_with(folder / "cache", report, timeout, workdir)
    result.runs.append(run)
    result.findings.extend(check(run))
    result.findings.extend(judge(marker, report, reference))
    shutil.rmtree(folder)
    return result


def judge(marker: Path, report: Path, reference: bytes) -> list[Finding]:
    """The cache oracle: no code ran, and the report is the uncached run's."""
    out = []
    if marker.exists():
        out.append(Finding("cache_code_ran", "a cache entry's code ran (marker file created)"))
    got = report.read_bytes() if report.exists() else b""
    if got != reference:
        out.append(Finding("cache_changed_report",
                           f"report differs from the uncached run ({len(got)} vs "
                           f"{len(reference)} bytes)"))
    return out


def fuzz_cache(mutants: int, seed: int, jobs: int = 1, timeout: float = 20.0,
               only: list[int] | None = None) -> Any:
    """Cache mutants ``0..mutants-1`` of ``seed`` (a reference and a fill run first)."""
    from .run import FuzzResult
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kvrules-fuzz-cache-") as tmp:
        workdir = Path(tmp)
        reference_run = run_with(None, workdir / "reference.jsonl", timeout * 3, workdir)
        fill = run_with(workdir / "template", workdir / "fill.jsonl", timeout * 3, workdir)
        problems = check(reference_run) + check(fill)
        if problems:
            raise RuntimeError(f"the untampered runs failed: {problems}")
        reference = (workdir / "reference.jsonl").read_bytes()
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            results = list(pool.map(
                lambda i: fuzz_cache_one(seed, i, workdir / "template", reference, workdir,
                                         timeout), only or range(mutants)))
    return FuzzResult(seed, results, time.monotonic() - start)
