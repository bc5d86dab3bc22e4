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
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from itertools import islice
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Protocol

from kvrules.artifacts.discover import CellRef, Paths, discover, iter_discover
from kvrules.artifacts.validate import prepare_validators
from kvrules.diagnostics import ENGINE_FAILURE
from kvrules.facts.model import CellFacts
from kvrules.policy.compiled import CompiledPolicy
from kvrules.policy.model import PolicyIdentity
from kvrules.pipeline import Classifier, compile_policy, prepare
from kvrules.backend.events import Evaluation
from kvrules.verdicts.build import build_cell
from kvrules.cache.policies import cached_compile
from kvrules.cache.verdicts import VerdictCache
from kvrules.workers import ExtractionWorkers, extract_ref
from kvrules.verdicts.model import CellVerdict, Report

ProgressFn = Callable[[int, "int | None"], None]
"""Called as ``progress(done_cells, total_cells)`` after each cell (``total_cells`` is None
while the cells of a run larger than :data:`READ_AHEAD` are still being discovered)."""


class Policy:
    """A compiled policy ready to classify (compile once, classify many)."""

    def __init__(self, compiled: CompiledPolicy, source: str | None, verify: bool = True) -> None:
        self.compiled = compiled
        self.source = source
        self.verify = verify
        self.classifier = Classifier(compiled, verify)

    @property
    def identity(self) -> PolicyIdentity:
        """Name, version, digest and parameters: what a report records as its policy (with
        ``verification: off`` among the parameters when the engine is not checked)."""
        identity = self.compiled.identity
        if self.verify:
            return identity
        return replace(identity, parameters={**identity.parameters, "verification": "off"})

    def close(self, wait: bool = True) -> None:
        """Stop this policy's engine worker now (the next cell starts a new one): for a
        caller done classifying, so the worker ends while the caller finishes its output.
        ``wait``: until it is gone (otherwise it is reaped later)."""
        self.classifier.close(wait)

    def with_parameters(self, **parameters: Any) -> "Policy":
        """The same rules with other parameter values (e.g. dense_synthetic_kv=False)."""
        merged = {**self.compiled.parameters, **parameters}
        return load_policy(self.source, merged, self.verify)


def load_policy(rules: str | Path | None = None,
                parameters: dict[str, Any] | None = None, verify: bool = True) -> Policy:
    """Compile a policy directory (default: the shipped policy) into a ready classifier.

    Every engine evaluation is checked against the reference evaluation of the policy unless
    ``verify`` is False (a difference fails the cell closed as ``engine_disagreement``).
    Raises KvrulesUsageError (exit 2) with diagnostics when the rule files are invalid. A
    policy compiled before is loaded from the cache (see :mod:`kvrules.cache.policies`).
    """
    source = str(rules) if rules is not None else None
    return Policy(cached_compile(compile_policy, source, parameters), source, verify)


def extract(paths: Paths, plan: str | None = None) -> Iterator[CellFacts]:
    """The facts of every cell under ``paths`` (what the rules see), one cell at a time."""
    for ref in discover(paths, plan):
        yield extract_ref(ref)


def classify_facts(cells: Iterable[CellFacts], policy: Policy | None = None) -> Report:
    """Classify already extracted (or hand-built, or edited) cell facts."""
    policy = policy or load_policy()
    verdicts = tuple(policy.classifier.classify_stream(cells))
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

    :class:`LocalExecutor` runs them here; :mod:`kvrules.executors` adds Dask clusters.
    Batches come and go in input order.
    """

    batch_cells: int
    """Cells per batch (looked up in the cache together, then sent as one unit of work)."""

    def classify_batches(self, policy: "Policy", batches: Iterator[list[CellRef]]
                         ) -> Iterator[Iterable[CellVerdict]]:
        """The verdicts of each batch, batches in order (each taken whole before the next
        is asked for)."""
        ...  # pragma: no cover - a protocol


class LocalExecutor:
    """Cells classified on this machine (``--executor local``): ``jobs`` extraction
    processes (none for 1) load, extract and prepare them for this process's supervised
    engine, whose verdicts come back one cell at a time.

    Consecutive full batches are one stream: workers and engine never wait for a batch to
    end. A batch the cache answered in part (a short one) ends the stream once its cells
    are in, so its cached verdicts go out before more are looked up.
    """

    batch_cells = 64

    def __init__(self, jobs: int = 1) -> None:
        self.jobs = jobs

    def classify_batches(self, policy: "Policy", batches: Iterator[list[CellRef]]
                         ) -> Iterator[Iterable[CellVerdict]]:
        pending: deque[CellRef] = deque()
        sizes: deque[int] = deque()
        workers = ExtractionWorkers(self.jobs, policy.compiled, policy.verify) if self.jobs > 1 \
            else None
        full = done = flowing = False

        def feed() -> bool:
            """The next batch's cells into ``pending`` (False at the end)."""
            nonlocal full, done
            batch = next(batches, None)
            done = batch is None
            if batch is not None:
                sizes.append(len(batch))
                pending.extend(batch)
                full = len(batch) == self.batch_cells
            return not done

        def stream() -> Iterator[CellRef]:
            nonlocal flowing
            while pending or (full and feed()):
                while pending:
                    yield pending.popleft()
            if done and workers is not None:
                workers.finish()  # no cell after these: workers end as their last come back
            flowing = False

        verdicts: Iterator[CellVerdict] = iter(())
        try:
            with _batch_gc():
                while sizes or feed():
                    size = sizes.popleft()
                    if pending and not flowing:  # cells no stream takes: a new one
                        for _ in verdicts:  # the one before gave its last verdict: finish it
                            pass
                        policy.classifier.start()  # loads while the first cell is prepared,
                        prepare_validators()  # forked before workers (which inherit these)
                        flowing = True
                        verdicts = (policy.classifier.classify_prepared(workers.in_order(stream()))
                                    if workers is not None else policy.classifier.classify_stream(
                                        extract_ref(ref) for ref in stream()))
                    group = islice(verdicts, size)
                    yield group
                    for _ in group:  # what the caller left (the cache layer takes them all)
                        pass
                for _ in verdicts:
                    pass
        finally:
            if workers is not None:
                workers.close()


READ_AHEAD = 10_000
"""Cells discovered ahead of classification: a run of fewer has its total (and any usage
error of its paths) before its first cell; an archive is never held whole."""


class _Discovery:
    """The cells of a run, discovered once: the first :data:`READ_AHEAD` at once, the others
    as classification needs them; ``total`` once discovery has ended (None until then)."""

    def __init__(self, refs: Iterator[CellRef]) -> None:
        self._refs = refs
        self._ahead = list(islice(refs, READ_AHEAD))
        self.total = len(self._ahead) if len(self._ahead) < READ_AHEAD else None

    def __iter__(self) -> Iterator[CellRef]:
        found, ahead, self._ahead = len(self._ahead), self._ahead, []
        yield from ahead
        for ref in self._refs:
            found += 1
            yield ref
        self.total = found


def _cached(refs: Iterable[CellRef], policy: "Policy", executor: Executor,
            cache: VerdictCache | None) -> Iterator[CellVerdict]:
    """Cached verdicts where stored, the others from ``executor`` (then stored), in order.

    Only the batches the executor holds in flight are kept: memory does not grow with the
    number of cells.
    """
    identity = policy.identity
    looked: deque[list[tuple[str | None, CellVerdict | None]]] = deque()

    def misses() -> Iterator[list[CellRef]]:
        cells = iter(refs)
        for batch in iter(lambda: list(islice(cells, executor.batch_cells)), []):
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


def failed_verdict(ref: CellRef, policy: "Policy", reason: str) -> CellVerdict:
    """The verdict of a cell whose evaluation was lost (a dead worker, a failed task): an
    ``engine_failure``, as for a crashed engine; a cell the engine would never see keeps
    its evidence errors."""
    prepared = prepare(policy.compiled, extract_ref(ref))
    ev = Evaluation(failures=[reason]) if prepared.to_engine else Evaluation()
    return build_cell(policy.compiled, prepared.cell, ev, prepared.class_of, prepared.classes)


def _engine_failed(verdict: CellVerdict) -> bool:
    """A crashed or hung engine is transient: such a verdict is never cached."""
    return any(e.code == ENGINE_FAILURE for e in verdict.errors)


def iter_classify(paths: Paths, policy: Policy | None = None, plan: str | None = None,
                  jobs: int = 1, progress: ProgressFn | None = None,
                  cache: VerdictCache | None = None,
                  executor: Executor | None = None) -> Iterator[CellVerdict]:
    """Yield cell verdicts in input order: the one classification path of the library, the
    CLI and every executor.

    The cells are discovered once, lazily, and go in batches to ``executor`` (default: a
    :class:`LocalExecutor` of ``jobs`` extraction processes); with a ``cache``, a cell
    whose files, policy and kvrules are unchanged since a verdict was stored is not
    evaluated again (see :mod:`kvrules.cache.verdicts`). ``progress`` is called after each
    cell with the cells done and the total (None while discovery goes on).
    """
    policy = policy or load_policy()
    cells = _Discovery(iter_discover(paths, plan))
    runner = executor if executor is not None else LocalExecutor(jobs)
    total = None
    with _batch_gc():
        for done, verdict in enumerate(_cached(cells, policy, runner, cache), start=1):
            total = cells.total
            if progress is not None:
                progress(done, total)
            yield verdict
    if progress is not None and total is None and cells.total:  # known after the last cell
        progress(cells.total, cells.total)


def classify(paths: Paths, policy: Policy | None = None, plan: str | None = None,
             jobs: int = 1, progress: ProgressFn | None = None,
             cache: VerdictCache | None = None, executor: Executor | None = None) -> Report:
    """Classify every cell under ``paths`` and return the whole report."""
    policy = policy or load_policy()
    cells = tuple(iter_classify(paths, policy, plan, jobs, progress, cache, executor))
    return Report(policy=policy.identity, cells=cells)


@dataclass(frozen=True)
class Run:
    """Where a command's classifications run (``executor``) and with which verdict
    ``cache``: built by the caller and passed to every consumer that classifies (readiness,
    aggregate, report, diff); nothing is taken from ambient state."""

    executor: Executor = field(default_factory=LocalExecutor)
    cache: VerdictCache | None = None

    def classify(self, paths: Paths, policy: Policy, plan: str | None = None) -> Report:
        """:func:`classify` on this run's executor and cache."""
        return classify(paths, policy, plan, cache=self.cache, executor=self.executor)
