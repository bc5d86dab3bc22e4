"""The embedding API: load a policy once, classify folders (or extracted facts), get reports.

The library never prints and never exits; the CLI is a thin layer over these functions.

    >>> from kvrules import api
    >>> policy = api.load_policy()                      # the shipped default policy
    >>> report = api.classify(["examples/dense-native-skip-format"], policy)
    >>> [p.eligible for p in report.cells[0].points]
    [True, True]
"""
from __future__ import annotations

import gc
import os
import signal
import multiprocessing
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from kvrules.artifacts.discover import CellRef, Paths, discover
from kvrules.artifacts.load import load_cell
from kvrules.diagnostics import ENGINE_FAILURE
from kvrules.facts.extract import extract_cell
from kvrules.facts.model import CellFacts
from kvrules.policy.compiled import CompiledPolicy
from kvrules.policy.model import PolicyIdentity
from kvrules.pipeline import compile_policy
from kvrules.pipeline import Classifier
from kvrules.cache.policies import cached_compile
from kvrules.cache.verdicts import VerdictCache, cell_key
from kvrules.backend.durable import child_signals, signals_deferred
from kvrules.verdicts.model import CellVerdict, Report

ProgressFn = Callable[[int, int], None]
"""Called as ``progress(done_cells, total_cells)`` after each cell."""


class Policy:
    """A compiled policy ready to classify (compile once, classify many)."""

    def __init__(self, compiled: CompiledPolicy, source: str | None) -> None:
        self.compiled = compiled
        self.source = source
        self.classifier = Classifier(compiled)

    @property
    def identity(self) -> PolicyIdentity:
        """Name, version, digest and parameters: what a report records as its policy."""
        return self.compiled.identity

    def with_parameters(self, **parameters: Any) -> "Policy":
        """The same rules with other parameter values (e.g. dense_synthetic_kv=False)."""
        merged = {**self.compiled.parameters, **parameters}
        return load_policy(self.source, merged)


def load_policy(rules: str | Path | None = None,
                parameters: dict[str, Any] | None = None) -> Policy:
    """Compile a policy directory (default: the shipped policy) into a ready classifier.

    Raises KvrulesUsageError (exit 2) with diagnostics when the rule files are invalid. A
    policy compiled before is loaded from the cache (see :mod:`kvrules.cache.policies`).
    """
    source = str(rules) if rules is not None else None
    return Policy(cached_compile(compile_policy, source, parameters), source)


def extract(paths: Paths, plan: str | None = None) -> Iterator[CellFacts]:
    """The facts of every cell under ``paths`` (what the rules see), one cell at a time."""
    for ref in discover(paths, plan):
        yield extract_cell(load_cell(ref))


def classify_facts(cells: Iterable[CellFacts], policy: Policy | None = None) -> Report:
    """Classify already extracted (or hand-built, or edited) cell facts."""
    policy = policy or load_policy()
    verdicts = tuple(policy.classifier.classify_facts(cell) for cell in cells)
    return Report(policy=policy.identity, cells=verdicts)


def _init_worker() -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not a handler inherited from the CLI:
    child_signals(signal.SIGINT)  # Pool.terminate() must just stop us; the parent owns ^C


def _extract_ref(ref: CellRef) -> CellFacts:
    return extract_cell(load_cell(ref))


@contextmanager
def _batch_gc(threshold: int = 10_000) -> Iterator[None]:
    """Collect young garbage less often while classifying (restored afterwards).

    A corpus allocates millions of short-lived acyclic dicts; with the default threshold
    the cyclic collector runs every 700 allocations and costs ~20% of classification time.
    """
    old = gc.get_threshold()
    gc.set_threshold(max(old[0], threshold), *old[1:])
    try:
        yield
    finally:
        gc.set_threshold(*old)


def iter_classify(paths: Paths, policy: Policy | None = None, plan: str | None = None,
                  jobs: int = 1, progress: ProgressFn | None = None,
                  cache: VerdictCache | None = None) -> Iterator[CellVerdict]:
    """Yield cell verdicts in input order, holding one cell's evidence at a time per worker.

    With a ``cache``, a cell whose files, policy and kvrules are unchanged since a verdict
    was stored is not evaluated again (see :mod:`kvrules.cache.verdicts`).
    """
    policy = policy or load_policy()
    refs = discover(paths, plan)
    with _batch_gc():
        if cache is None:
            yield from _classify_refs(refs, policy, jobs, progress)
        else:
            yield from _counted(_cached(refs, policy, jobs, cache), len(refs), progress)


def _cached(refs: list[CellRef], policy: Policy, jobs: int,
            cache: VerdictCache) -> Iterator[CellVerdict]:
    """Cached verdicts where stored, the others evaluated (and stored), in input order.

    The stored verdicts of one run are held until their turn comes; the evaluated cells
    stream through the engine as without a cache.
    """
    identity = policy.identity
    keys = [cell_key(ref, identity.digest, identity.parameters) for ref in refs]
    found = [cache.get(key) for key in keys]
    misses = [ref for ref, verdict in zip(refs, found) if verdict is None]
    fresh = _classify_refs(misses, policy, jobs, None)
    for key, verdict in zip(keys, found):
        if verdict is None:
            verdict = next(fresh)
            if key is not None and not _engine_failed(verdict):
                cache.put(key, verdict)
        yield verdict


def _classify_refs(refs: list[CellRef], policy: Policy, jobs: int,
                   progress: ProgressFn | None) -> Iterator[CellVerdict]:
    total = len(refs)
    if jobs <= 1 or total <= 1:
        cells = (_extract_ref(r) for r in refs)  # pulled one at a time by the stream
        yield from _counted(policy.classifier.classify_stream(cells), total, progress)
        return
    # Workers load and extract in parallel; every engine call stays on the parent's
    # supervised engine worker, so a crash costs one cell and the bytes do not depend on N.
    ctx = multiprocessing.get_context("fork" if hasattr(os, "fork") else "spawn")
    with signals_deferred():
        pool = ctx.Pool(jobs, _init_worker)
    with pool:
        extracted = pool.imap(_extract_ref, refs, chunksize=4)
        yield from _counted(policy.classifier.classify_stream(extracted), total, progress)


def _engine_failed(verdict: CellVerdict) -> bool:
    """A crashed or hung engine is transient: such a verdict is never cached."""
    return any(e.code == ENGINE_FAILURE for e in verdict.errors)


def _counted(results: Iterator[CellVerdict], total: int,
             progress: ProgressFn | None) -> Iterator[CellVerdict]:
    for done, verdict in enumerate(results, start=1):
        if progress is not None:
            progress(done, total)
        yield verdict


def classify(paths: Paths, policy: Policy | None = None, plan: str | None = None,
             jobs: int = 1, progress: ProgressFn | None = None) -> Report:
    """Classify every cell under ``paths`` and return the whole report."""
    policy = policy or load_policy()
    cells = tuple(iter_classify(paths, policy, plan, jobs, progress))
    return Report(policy=policy.identity, cells=cells)
