"""Batches of cells classified by dask.distributed workers, streamed back in input order.

The compiled policy travels once, as the input of a task every batch depends on (not as
scattered data: a result the scheduler can recompute survives the death of the workers
holding it, scattered data does not); a worker keeps one
:class:`kvrules.api.Policy` (classifier and supervised engine) per policy digest and
parameters, so a task carries only its cells' locations. At most ``window`` batches are in
flight: memory stays flat however large the archive. A batch whose task fails (after one
retry) or whose workers keep dying gets an ``engine_failure`` verdict per cell, built as the
local pipeline builds one for a crashed engine, and the run goes on.
"""
from __future__ import annotations

import json
import multiprocessing
import pickle
from collections import deque
from typing import Any, Callable, Iterator

from kvrules import api
from kvrules.artifacts.discover import CellRef
from kvrules.backend.events import short
from kvrules.diagnostics import KvrulesUsageError
from kvrules.policy.compiled import CompiledPolicy
from kvrules.verdicts.model import KVRULES_VERSION, CellVerdict

BATCH_CELLS = 16
"""Cells per task: about half a second of work, well above a task's overhead."""

_POLICIES: dict[tuple[str, str], api.Policy] = {}
"""Worker side: the policies this worker process has classified with, by digest."""


def _policy_on_worker(compiled: CompiledPolicy) -> api.Policy:
    """The worker's policy for ``compiled`` (one classifier and engine per digest)."""
    identity = compiled.identity
    key = (identity.digest, json.dumps(identity.parameters, sort_keys=True, default=str))
    policy = _POLICIES.get(key)
    if policy is None:
        policy = _POLICIES[key] = api.Policy(compiled, None)
    return policy


def policy_of(payload: bytes) -> CompiledPolicy:
    """Worker side: the compiled policy a run ships (pickled, so Dask never walks it)."""
    compiled = pickle.loads(payload)
    assert isinstance(compiled, CompiledPolicy)
    return compiled


def classify_batch(compiled: CompiledPolicy, refs: list[CellRef]) -> list[CellVerdict]:
    """Worker side: the verdicts of ``refs``, as the local pipeline gives them."""
    process = multiprocessing.current_process()
    if process.daemon:  # a nanny's worker is daemonic by default; the engine worker it
        process.daemon = False  # forks (to contain engine crashes) must be allowed
    policy = _policy_on_worker(compiled)
    return [v for done in api.LocalExecutor().classify_batches(policy, iter([refs])) for v in done]


def installed_version() -> str:
    """Worker side: the kvrules version a worker runs."""
    return KVRULES_VERSION


class DaskExecutor:
    """An :class:`kvrules.api.Executor` over a dask.distributed client."""

    batch_cells = BATCH_CELLS

    def __init__(self, client: Any, window: int | None = None) -> None:
        self.client = client
        self.window = window
        self.task: Callable[[CompiledPolicy, list[CellRef]], list[CellVerdict]] = classify_batch
        self._check_versions()

    def _check_versions(self) -> None:
        """Workers must run this kvrules: another one could give other verdicts."""
        others = {v for v in self.client.run(installed_version).values() if v != KVRULES_VERSION}
        if others:
            raise KvrulesUsageError(f"the Dask workers run kvrules {', '.join(sorted(others))}, "
                                    f"this is kvrules {KVRULES_VERSION}: install the same one")

    def classify_batches(self, policy: api.Policy,
                         batches: Iterator[list[CellRef]]) -> Iterator[list[CellVerdict]]:
        """The verdicts of each batch, in order, with at most ``window`` tasks in flight."""
        payload = pickle.dumps(policy.compiled, protocol=pickle.HIGHEST_PROTOCOL)
        shipped = self.client.submit(policy_of, payload, pure=False)
        flight: deque[tuple[list[CellRef], Any]] = deque()
        try:
            for batch in batches:
                task = self.client.submit(self.task, shipped, batch, pure=False,
                                          retries=1) if batch else None
                flight.append((batch, task))
                if len(flight) >= self._window():
                    yield self._collect(policy, *flight.popleft())
            while flight:
                yield self._collect(policy, *flight.popleft())
        finally:
            pending = [task for _, task in flight if task is not None]
            if pending:
                self.client.cancel(pending)

    def _window(self) -> int:
        """Batches in flight: ``window``, else twice the worker threads there are now (a
        cluster that scales up, as dask-jobqueue's do, gets a wider window as it grows)."""
        if self.window is not None:
            return self.window
        threads: int = sum(self.client.nthreads().values())
        return 2 * max(1, threads)

    def _collect(self, policy: api.Policy, batch: list[CellRef], task: Any) -> list[CellVerdict]:
        """The task's verdicts; an ``engine_failure`` per cell when it failed for good."""
        if task is None:
            return []
        try:
            verdicts: list[CellVerdict] = task.result()
        except Exception as exc:  # noqa: BLE001 - a lost batch is reported, never raised
            reason = short(f"dask task failed: {type(exc).__name__}: {exc}")
            return [api.failed_verdict(ref, policy, reason) for ref in batch]
        if len(verdicts) != len(batch):
            reason = f"dask task returned {len(verdicts)} verdicts for {len(batch)} cells"
            return [api.failed_verdict(ref, policy, reason) for ref in batch]
        return verdicts
