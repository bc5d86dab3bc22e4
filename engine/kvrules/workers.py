"""``--jobs N``: worker processes that load, extract and prepare cells for the parent's engine.

Every engine call stays on the parent's supervised engine worker, so the verdicts do not
depend on N. Each worker has its own pipe: the parent sends it cells to prepare and reads
the prepared cells back, with no thread in between (a pool's threads fight the parent's
main thread for the interpreter lock while it drives the engine and writes the report).
A worker that dies (the OOM killer, ``kill -9``) costs nothing: the cells it had in
flight are prepared in the parent, exactly as ``--jobs 1`` prepares them, and a fresh
worker takes its place. After ``MAX_BREAKS`` deaths no worker is started again and the
parent prepares what is left. Nothing waits for a result that will never come.
"""
from __future__ import annotations

import multiprocessing
import os
import pickle
import signal
import socket
from collections import deque
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import Iterable, Iterator

from kvrules.artifacts.discover import CellRef
from kvrules.artifacts.load import load_cell
from kvrules.backend.durable import child_signals, signals_deferred
from kvrules.facts.extract import extract_cell
from kvrules.facts.model import CellFacts
from kvrules.pipeline import Prepared, prepare
from kvrules.policy.compiled import CompiledPolicy

AHEAD_PER_WORKER = 16
"""Cells a worker may have prepared before the parent takes them: enough that a worker
rarely waits for the parent. The parent and its engine fall behind the workers while
both run (a 50-cell run had the parent take cells 25-45 ms after they were ready); with
4 a worker then stopped and was woken again cell by cell, and its cache went cold each
time. With 16: 0.92-0.99x the time and 3-14% less CPU per run in paired runs (50 and 200
cells, both shapes). The bound keeps memory flat however far behind the parent falls (the
waiting cells are kept pickled, see :class:`_Worker`)."""

MAX_BREAKS = 3
"""Worker deaths after which the parent prepares the remaining cells itself."""

WORKER_NICENESS = 5
"""Workers yield the CPU to the parent and its engine, the run's one sequential path: on
a machine with no spare core, workers that ran as often would slow that path down and
finish their own part early only to wait."""

LIVENESS_POLL = 1.0
"""Seconds between checks, while waiting for a cell, that its worker is alive."""

SEND_BUFFER = 1 << 20
"""Bytes a worker's pipe may hold (the system's cap applies): room for the cells a worker
may prepare ahead (:data:`AHEAD_PER_WORKER`, ~60 KiB each), so it goes on with the next
cell instead of waiting for the parent to read (on Linux the default holds about three)."""

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


def extract_ref(ref: CellRef) -> CellFacts:
    """The facts of one discovered cell."""
    return extract_cell(load_cell(ref))


def _serve(policy: CompiledPolicy, verify: bool, conn: Connection, parent_pid: int,
           inherited: list[Connection]) -> None:
    """A worker's life: prepare each cell the parent sends, in order, until the pipe closes.
    What goes back is small (the cell's facts, one fact per class, the report rows'
    columns); None asks the parent to prepare the cell itself (it raised here)."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not a handler inherited from the CLI:
    child_signals(parent_pid, signal.SIGINT)  # the parent owns ^C; stopping us is its call
    os.nice(WORKER_NICENESS)
    for other in inherited:  # the parent's ends of this worker's pipe and the others'
        other.close()
    while True:
        try:
            ref = pickle.loads(conn.recv_bytes())
        except (EOFError, OSError):
            return
        try:
            made = prepare(policy, extract_ref(ref)).reported()
            # the reference evaluation here, beside the engine, not on the parent's path
            prepared: Prepared | None = made.with_reference(policy) if verify else made
        except Exception:  # noqa: BLE001 - the parent prepares it and reports as --jobs 1
            prepared = None
        try:
            conn.send_bytes(pickle.dumps(prepared, pickle.HIGHEST_PROTOCOL))
        except OSError:  # the parent stopped listening: the run is over
            return


class _Worker:
    """One extraction process, the cells sent to it in order and those it sent back
    (pickled: a cell is unpickled when the parent takes it, so the cells waiting for a
    parent that lags hold their ~60 KiB of bytes, not the objects, about twice as large)."""

    def __init__(self, process: BaseProcess, conn: Connection) -> None:
        self.process = process
        self.conn = conn
        self.sent: deque[CellRef] = deque()
        self.back: deque[bytes] = deque()
        self.alive = True

    @property
    def busy(self) -> int:
        """Cells sent and not yet back: the worker with the fewest gets the next one."""
        return len(self.sent) - len(self.back)

    def read(self) -> bool:
        """Take one prepared cell off the pipe; False when the worker is gone."""
        try:
            self.back.append(self.conn.recv_bytes())
            return True
        except (EOFError, OSError):
            return False

    def finish(self) -> None:
        """Send nothing more: the worker reads the end of its cells, sends the last back
        and exits (the pipe stays open for reading them)."""
        fd = os.dup(self.conn.fileno())
        try:
            sock = socket.socket(fileno=fd)
        except OSError:  # not a socket (spawn's pipes): the worker is stopped at close
            os.close(fd)
            return
        with sock:
            try:
                sock.shutdown(socket.SHUT_WR)
            except OSError:  # the worker is gone already
                pass

    def stop(self) -> None:
        """End the process now (a cell it is preparing is dropped) and reap it."""
        self.alive = False
        if self.process.is_alive():
            self.process.terminate()
        self.process.join()
        self.conn.close()


def _pipe() -> tuple[Connection, Connection]:
    """The parent's and the worker's ends of a new worker's pipe (a socket pair, as
    ``multiprocessing.Pipe`` makes on POSIX, with room for the cells sent back)."""
    ours, its = socket.socketpair()
    try:
        its.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER)
    except OSError:  # a platform without the option: the default buffer serves
        pass
    return Connection(ours.detach()), Connection(its.detach())


class ExtractionWorkers:
    """``jobs`` extraction processes; one that dies is replaced (up to ``MAX_BREAKS``)."""

    def __init__(self, jobs: int, policy: CompiledPolicy, verify: bool = True) -> None:
        self.jobs = jobs
        self.policy = policy
        self.verify = verify
        self.breaks = 0
        self._workers: list[_Worker] = []

    def __enter__(self) -> "ExtractionWorkers":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def submit(self, ref: CellRef) -> "_Worker | None":
        """Send ``ref`` to the least busy worker; None when the parent must prepare it.
        Workers start one per cell sent, so the first cell is on its way before the next
        worker is forked."""
        self._collect()
        if (len(self._workers) < self.jobs and self.breaks < MAX_BREAKS
                and not multiprocessing.current_process().daemon):  # which may not fork
            try:
                self._workers.append(self._start())
            except OSError:  # no process can be forked now: a break, as a death is
                self._broken()
        if not self._workers:
            return None
        worker = min(self._workers, key=lambda w: w.busy)
        try:
            worker.conn.send_bytes(pickle.dumps(ref, pickle.HIGHEST_PROTOCOL))
        except OSError:
            self._died(worker)
            return None
        worker.sent.append(ref)
        return worker

    def result(self, ref: CellRef, job: "_Worker | None") -> Prepared:
        """The prepared cell; prepared here when its worker died (or none was used)."""
        if job is not None:
            while job.alive and not job.back and self._wait(job):
                if not job.read():
                    self._died(job)
            job.sent.popleft()
            if job.back:
                prepared: Prepared | None = pickle.loads(job.back.popleft())
                if prepared is not None:
                    return prepared
        return prepare(self.policy, extract_ref(ref))

    def in_order(self, refs: Iterable[CellRef]) -> Iterator[Prepared]:
        """The prepared cells in input order, at most ``AHEAD_PER_WORKER`` per worker
        ahead: a parent slower than its workers (waiting on the engine) holds a bounded
        number of cells, not the whole run."""
        window: deque[tuple[CellRef, _Worker | None]] = deque()
        for ref in refs:
            window.append((ref, self.submit(ref)))
            if len(window) >= AHEAD_PER_WORKER * self.jobs:
                yield self.result(*window.popleft())
        while window:
            yield self.result(*window.popleft())

    def finish(self) -> None:
        """No cell is submitted after those sent: the workers are told to end when they are
        done (they exit while the parent takes their last cells, instead of being stopped
        after them)."""
        for worker in self._workers:
            worker.finish()

    def close(self) -> None:
        """Stop the workers now (a cell they are preparing is not waited for). A Ctrl-C
        arriving meanwhile waits until they are stopped: interrupted halfway, the run would
        leave workers behind."""
        with signals_deferred():
            for worker in self._workers:
                worker.stop()
        self._workers = []

    def _start(self) -> _Worker:
        if hasattr(os, "fork"):
            ctx = multiprocessing.get_context("fork")
            mine, theirs = _pipe()
        else:
            ctx = multiprocessing.get_context("spawn")  # type: ignore[assignment]
            mine, theirs = ctx.Pipe()
        inherited = [mine, *(w.conn for w in self._workers)]
        process = ctx.Process(target=_serve, daemon=True, name="kvrules-extraction",
                              args=(self.policy, self.verify, theirs, os.getpid(), inherited))
        with signals_deferred():
            try:
                process.start()
            except BaseException:
                mine.close()
                raise
            finally:
                theirs.close()  # only the worker holds its end: its death is our end of file
        return _Worker(process, mine)

    def _collect(self) -> None:
        """Read every cell the workers have finished, so the next goes to one that is free."""
        for worker in self._workers[:]:
            while worker.alive and worker.conn.poll():
                if not worker.read():
                    self._died(worker)

    def _wait(self, worker: _Worker) -> bool:
        """Wait until ``worker`` has something to read (True) or is dead (False)."""
        while not wait([worker.conn], timeout=LIVENESS_POLL):
            if not worker.process.is_alive() and not worker.conn.poll():
                self._died(worker)
                return False
        return True

    def _died(self, worker: _Worker) -> None:
        """``worker`` is gone: the cells it still had are prepared here, in their turn."""
        if worker.alive:
            worker.stop()
            self._workers.remove(worker)
            self._broken()

    def _broken(self) -> None:
        self.breaks += 1
