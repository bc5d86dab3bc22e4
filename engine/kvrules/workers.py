"""``--jobs N``: worker processes that load, extract and prepare cells for the parent's engine.

Every engine call stays on the parent's supervised engine worker, so the verdicts do not
depend on N. A worker that dies (the OOM killer, ``kill -9``) breaks the process pool: the
cells it had in flight are then prepared in the parent, exactly as ``--jobs 1`` prepares
them, and a fresh pool takes the cells after them. After ``MAX_BREAKS`` broken pools the
run goes on in the parent alone. Nothing waits for a result that will never come.
"""
from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from collections import deque
from concurrent.futures import CancelledError, Future, ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures.process import BrokenProcessPool
from multiprocessing.process import BaseProcess
from typing import Iterable, Iterator

from kvrules.artifacts.discover import CellRef
from kvrules.artifacts.load import load_cell
from kvrules.backend.durable import child_signals, signals_deferred
from kvrules.facts.extract import extract_cell
from kvrules.facts.model import CellFacts
from kvrules.pipeline import Prepared, prepare
from kvrules.policy.compiled import CompiledPolicy

AHEAD_PER_WORKER = 4
"""Cells a worker may have prepared before the parent takes them."""

MAX_BREAKS = 3
"""Broken pools after which the parent prepares the remaining cells itself."""

WORKER_NICENESS = 5
"""Workers yield the CPU to the parent and its engine, the run's one sequential path: on
a machine with no spare core, workers that ran as often would slow that path down and
finish their own part early only to wait."""

LIVENESS_POLL = 1.0
"""Seconds between checks, while waiting for a cell, that the pool's workers are alive."""

UNBLOCK_SECONDS = 5.0
"""How long a stopped pool's thread is fed to finish a message cut short (see :func:`_stop`)."""

MAX_DEFAULT_JOBS = 8
"""The most workers a run starts unasked: past a few, the one engine is the longest path
and each more worker only adds its memory."""


def default_jobs() -> int:
    """Workers of a run that does not say (``--jobs`` omitted): one per core this process
    may run on, at most :data:`MAX_DEFAULT_JOBS`."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, MAX_DEFAULT_JOBS))

Job = tuple["Future[Prepared]", ProcessPoolExecutor]
"""A cell being prepared, and the pool preparing it."""

_WORKER_POLICY: list[CompiledPolicy] = []
"""The compiled policy of this worker process (set when the pool starts it)."""


def extract_ref(ref: CellRef) -> CellFacts:
    """The facts of one discovered cell."""
    return extract_cell(load_cell(ref))


def _init_worker(cp: CompiledPolicy, parent_pid: int) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not a handler inherited from the CLI:
    child_signals(parent_pid, signal.SIGINT)  # the parent owns ^C; stopping the pool stops us
    os.nice(WORKER_NICENESS)
    _WORKER_POLICY[:] = [cp]


def _prepare_ref(ref: CellRef) -> Prepared:
    """A worker's part of a cell: load, extract and group points into classes. What comes
    back is small (the cell's facts, one fact per class, the report rows' columns)."""
    return prepare(_WORKER_POLICY[0], extract_ref(ref)).reported()


class ExtractionWorkers:
    """A pool of ``jobs`` extraction processes, replaced when one of them dies."""

    def __init__(self, jobs: int, policy: CompiledPolicy) -> None:
        self.jobs = jobs
        self.policy = policy
        self.breaks = 0
        self._pool: ProcessPoolExecutor | None = None

    def __enter__(self) -> "ExtractionWorkers":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def submit(self, ref: CellRef) -> "Job | None":
        """Start preparing ``ref`` in a worker; None when the parent must prepare it."""
        while self.breaks < MAX_BREAKS:
            try:
                if self._pool is None:
                    self._pool = self._start()
                return self._pool.submit(_prepare_ref, ref), self._pool
            except BrokenProcessPool:
                self._broken()
        return None

    def result(self, ref: CellRef, job: "Job | None") -> Prepared:
        """The prepared cell; prepared here when its worker died (or none was used)."""
        if job is not None:
            future, pool = job
            try:
                return _wait(future, pool)
            except (BrokenProcessPool, CancelledError):
                if pool is self._pool:  # the first news of this pool's death
                    self._broken()
        return prepare(self.policy, extract_ref(ref))

    def in_order(self, refs: Iterable[CellRef]) -> Iterator[Prepared]:
        """The prepared cells in input order, at most ``AHEAD_PER_WORKER`` per worker
        ahead: a parent slower than its workers (waiting on the engine) holds a bounded
        number of cells, not the whole run."""
        window: deque[tuple[CellRef, Job | None]] = deque()
        for ref in refs:
            window.append((ref, self.submit(ref)))
            if len(window) >= AHEAD_PER_WORKER * self.jobs:
                yield self.result(*window.popleft())
        while window:
            yield self.result(*window.popleft())

    def close(self) -> None:
        """Stop the workers now (a cell they are preparing is not waited for). A Ctrl-C
        arriving meanwhile waits until they are stopped: interrupted halfway, the run would
        leave workers and the pool's thread behind, and the interpreter waits for both."""
        if self._pool is not None:
            with signals_deferred():
                _stop(self._pool)
            self._pool = None

    def _start(self) -> ProcessPoolExecutor:
        ctx = multiprocessing.get_context("fork" if hasattr(os, "fork") else "spawn")
        pool = ProcessPoolExecutor(self.jobs, mp_context=ctx, initializer=_init_worker,
                                   initargs=(self.policy, os.getpid()))
        try:
            with signals_deferred():  # a fork start method forks on the first submit (not
                pool.submit(int)  # waited for: a worker that cannot start breaks the pool,
        except BrokenProcessPool:  # and its cells are then prepared here)
            _stop(pool)
            raise
        return pool

    def _broken(self) -> None:
        self.breaks += 1
        self.close()


def _wait(future: "Future[Prepared]", pool: ProcessPoolExecutor) -> Prepared:
    """The future's result, or BrokenProcessPool when a worker is dead and the pool has
    not said so one poll later: a worker killed while writing its result leaves the
    pool's thread reading the rest of the message, and the future would never settle."""
    dead_seen = False
    while True:
        try:
            return future.result(timeout=LIVENESS_POLL)
        except FutureTimeout:
            if dead_seen:
                raise BrokenProcessPool("a worker died and its pool did not notice") from None
            dead_seen = any(p.exitcode is not None for p in _processes(pool))


def _processes(pool: ProcessPoolExecutor) -> list[BaseProcess]:
    return list((getattr(pool, "_processes", None) or {}).values())


def _stop(pool: ProcessPoolExecutor) -> None:
    """Shut ``pool`` down without waiting for the cells in flight (Python < 3.14 has no
    public way to stop its processes, so they are terminated through the pool's table)."""
    running = _processes(pool)
    thread = getattr(pool, "_executor_manager_thread", None)
    results = getattr(pool, "_result_queue", None)
    pool.shutdown(wait=False, cancel_futures=True)
    for process in running:
        if process.is_alive():
            process.terminate()
    for process in running:
        process.join()
    if thread is not None and results is not None:
        _unblock(thread, results._writer.fileno())


def _unblock(thread: threading.Thread, writer: int) -> None:
    """End the pool's thread, even one reading the rest of a message whose writer was
    terminated mid-write (the interpreter waits for that thread at exit, and other
    children hold the pipe open, so no end of file comes): it is fed zeros, reads a
    message that does not decode, declares the pool broken and returns."""
    thread.join(0.05)
    if not thread.is_alive():
        return
    os.set_blocking(writer, False)
    deadline = time.monotonic() + UNBLOCK_SECONDS
    filler = bytes(1 << 16)
    while thread.is_alive() and time.monotonic() < deadline:
        try:
            os.write(writer, filler)
        except BlockingIOError:  # the pipe is full: the thread is not reading it
            pass
        except OSError:
            return
        thread.join(0.01)
