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
import warnings
from collections import deque
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Protocol

from kvrules.artifacts.discover import CellRef, Paths, discover, iter_discover
from kvrules.artifacts.validate import prepare_validators
from kvrules.diagnostics import ENGINE_FAILURE
from kvrules.facts.model import CellFacts
from kvrules.policy.compiled import CompiledPolicy
from kvrules.policy.model import PolicyIdentity
from kvrules.pipeline import compile_policy
from kvrules.pipeline import Classifier, prepare
from kvrules.backend.events import Evaluation
from kvrules.verdicts.build import build_cell
from kvrules.cache.policies import cached_compile
from kvrules.cache.verdicts import VerdictCache
from kvrules.workers import ExtractionWorkers, extract_ref
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

    def close(self, wait: bool = True) -> None:
        """Stop this policy's engine worker now (the next cell starts a new one): for a
        caller done classifying, so the worker ends while the caller finishes its output.
        ``wait``: until it is gone (otherwise it is reaped later)."""
        self.classifier.close(wait)

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
        yield extract_ref(ref)


def classify_facts(cells: Iterable[CellFacts], policy: Policy | None = None) -> Report:
    """Classify already extracted (or hand-built, or edited) cell facts."""
    policy = policy or load_policy()
    verdicts = tuple(policy.classifier.classify_facts(cell) for cell in cells)
    return Report(policy=policy.identity, cells=verdicts)


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


class Executor(Protocol):
    """Where the cells the verdict cache does not hold are classified.

    The default runs them here (``--jobs`` extraction processes, one supervised engine);
    :mod:`kvrules.executors` adds Dask clusters. Batches come and go in input order.
    """

    batch_cells: int
    """Cells per batch (looked up in the cache together, then sent as one unit of work)."""

    def classify_batches(self, policy: "Policy",
                         batches: Iterator[list[CellRef]]) -> Iterator[list[CellVerdict]]:
        """The verdicts of each batch (a list per batch, batches in order)."""
        ...  # pragma: no cover - a protocol


_RUNNING: ContextVar[tuple["Executor | None", VerdictCache | None]] = ContextVar(
    "kvrules_running", default=(None, None))


@contextmanager
def running_on(executor: Executor | None = None,
               cache: VerdictCache | None = None) -> Iterator[None]:
    """Classifications inside use ``executor`` and ``cache`` unless given their own: how a
    command reaches a cluster through library functions that take neither (diff, readiness,
    aggregate)."""
    token = _RUNNING.set((executor, cache))
    try:
        yield
    finally:
        _RUNNING.reset(token)


BATCH_CELLS = 64
"""Cells per batch of the local executor: what a cached run holds at a time."""


def iter_classify(paths: Paths, policy: Policy | None = None, plan: str | None = None,
                  jobs: int = 1, progress: ProgressFn | None = None,
                  cache: VerdictCache | None = None,
                  executor: Executor | None = None) -> Iterator[CellVerdict]:
    """Yield cell verdicts in input order, holding one cell's evidence at a time per worker.

    With a ``cache``, a cell whose files, policy and kvrules are unchanged since a verdict
    was stored is not evaluated again (see :mod:`kvrules.cache.verdicts`). With an
    ``executor``, the other cells are classified there in batches. Either way the cells
    are discovered lazily (with ``progress``, a first pass only counts them).
    """
    policy = policy or load_policy()
    ambient_executor, ambient_cache = _RUNNING.get()
    executor = executor if executor is not None else ambient_executor
    cache = cache if cache is not None else ambient_cache
    if cache is None and executor is None:
        refs = discover(paths, plan)
        with _batch_gc():
            yield from _classify_refs(refs, policy, jobs, progress)
        return
    cells = iter_discover(paths, plan)  # lazily: an archive's cells are never all held
    total = _count(paths, plan) if progress is not None else 0
    runner = executor if executor is not None else LocalExecutor(jobs)
    with _batch_gc():
        yield from _counted(_batched(cells, policy, runner, cache), total, progress)


def _count(paths: Paths, plan: str | None) -> int:
    """How many cells a run will give (a listing pass; its warnings come with the cells)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return sum(1 for _ in iter_discover(paths, plan))


def _batches(refs: Iterable[CellRef], size: int) -> Iterator[list[CellRef]]:
    batch: list[CellRef] = []
    for ref in refs:
        batch.append(ref)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def _batched(refs: Iterable[CellRef], policy: Policy, executor: Executor,
             cache: VerdictCache | None) -> Iterator[CellVerdict]:
    """Cached verdicts where stored, the others from ``executor`` (then stored), in order.

    Only the batches the executor holds in flight are kept: memory does not grow with the
    number of cells.
    """
    identity = policy.identity
    looked: deque[list[tuple[str | None, CellVerdict | None]]] = deque()

    def misses() -> Iterator[list[CellRef]]:
        for batch in _batches(refs, executor.batch_cells):
            found: list[tuple[str | None, CellVerdict | None]] = (
                cache.lookup(batch, identity.digest, identity.parameters)
                if cache is not None else [(None, None)] * len(batch))
            looked.append(found)
            yield [ref for ref, (_, verdict) in zip(batch, found) if verdict is None]

    for fresh in executor.classify_batches(policy, misses()):
        computed = iter(fresh)
        for key, verdict in looked.popleft():
            if verdict is None:
                verdict = next(computed)
                if cache is not None and key is not None and not _engine_failed(verdict):
                    cache.put(key, verdict)
            yield verdict


class LocalExecutor:
    """Batches classified on this machine, as without a cache (``--executor local``)."""

    batch_cells = BATCH_CELLS

    def __init__(self, jobs: int = 1) -> None:
        self.jobs = jobs

    def classify_batches(self, policy: Policy,
                         batches: Iterator[list[CellRef]]) -> Iterator[list[CellVerdict]]:
        """Each batch through the parent's engine; with ``jobs`` > 1 one pool of extraction
        processes serves every batch (started only when a batch has cells)."""
        workers: ExtractionWorkers | None = None
        try:
            for batch in batches:
                if self.jobs <= 1 or len(batch) <= 1:
                    yield list(classify_refs(batch, policy))
                    continue
                if workers is None:
                    prepare_validators()  # before the workers fork: they inherit them
                    workers = ExtractionWorkers(self.jobs, policy.compiled)
                prepared = workers.in_order(batch)
                yield list(policy.classifier.classify_prepared(prepared))
        finally:
            if workers is not None:
                workers.close()


def _classify_refs(refs: list[CellRef], policy: Policy, jobs: int,
                   progress: ProgressFn | None) -> Iterator[CellVerdict]:
    total = len(refs)
    if total:
        policy.classifier.start()  # before the extraction workers fork: it holds no pipe of theirs
        prepare_validators()  # and the workers inherit the generated schema validators
    if jobs <= 1 or total <= 1:
        cells = (extract_ref(r) for r in refs)  # pulled one at a time by the stream
        yield from _counted(policy.classifier.classify_stream(cells), total, progress)
        return
    # Workers load and extract in parallel; every engine call stays on the parent's
    # supervised engine worker, so a crash costs one cell and the bytes do not depend on N.
    with ExtractionWorkers(min(jobs, total), policy.compiled) as workers:
        prepared = workers.in_order(refs, last=True)
        yield from _counted(policy.classifier.classify_prepared(prepared), total, progress)


def classify_refs(refs: Iterable[CellRef], policy: Policy) -> Iterator[CellVerdict]:
    """Verdicts of discovered cells in order, in this process (what an executor's worker
    runs on a batch)."""
    prepare_validators()
    with _batch_gc():
        cells = (extract_ref(r) for r in refs)
        yield from policy.classifier.classify_stream(cells)


def failed_verdict(ref: CellRef, policy: Policy, reason: str) -> CellVerdict:
    """The verdict of a cell whose evaluation was lost (a dead worker, a failed task): an
    ``engine_failure``, as for a crashed engine; a cell the engine would never see keeps
    its evidence errors."""
    prepared = prepare(policy.compiled, extract_ref(ref))
    ev = Evaluation(failures=[reason]) if prepared.to_engine else Evaluation()
    return build_cell(policy.compiled, prepared.cell, ev, prepared.class_of, prepared.classes)


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
             jobs: int = 1, progress: ProgressFn | None = None,
             cache: VerdictCache | None = None, executor: Executor | None = None) -> Report:
    """Classify every cell under ``paths`` and return the whole report."""
    policy = policy or load_policy()
    cells = tuple(iter_classify(paths, policy, plan, jobs, progress, cache, executor))
    return Report(policy=policy.identity, cells=cells)
