"""durable-rules in a supervised worker process: an engine crash costs one cell, not the run.

The C extension has memory defects (double frees, segfaults on odd input). The parent
never imports it: one long-lived worker per classifier, forked on first use, evaluates
cells sent over a pipe and answers with the :class:`Evaluation`. When the worker dies
(signal or exit) the cell is retried once in a fresh worker; a second death gives the
cell one short ``engine_failure`` and a new worker serves later cells.

The worker ignores SIGINT/SIGTERM (the parent decides what an interrupt means and kills
the worker), writes nothing (its stdout/stderr go to /dev/null) and exits when the pipe
closes.
"""
from __future__ import annotations

import atexit
import ctypes
import faulthandler
import multiprocessing
import multiprocessing.util  # noqa: F401 - its atexit hook must be registered before ours
import os
import signal
import weakref
from contextlib import contextmanager
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any, Iterator

from kvrules.facts.model import Fact
from kvrules.policy.compiled import CompiledPolicy
from kvrules.backend.events import Evaluation, short

_CRASH_HOOK = "_KVRULES_TEST_ENGINE_CRASH"
"""Test hook, read in the worker only: ``<cell_id>`` kills the worker on every evaluation
of that cell, ``<cell_id>:once`` on the first attempt only (the retry succeeds)."""


_DEFERRED = {signal.SIGINT, signal.SIGTERM}


@contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold SIGINT/SIGTERM while forking: one arriving inside a fork hook would be
    swallowed ("Exception ignored") and the run would go on. They are delivered on exit;
    children start with them blocked and call :func:`child_signals` to ignore them."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, _DEFERRED)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def child_signals(parent_pid: int, *ignored: signal.Signals) -> None:
    """In a forked child: end with the parent ``parent_pid`` (one killed by SIGKILL or the
    OOM killer leaves no worker behind, waiting forever on a pipe its siblings hold open),
    ignore ``ignored``, then unblock what the parent held."""
    _die_with_parent()
    if os.getppid() != parent_pid:  # gone before we asked to go with it
        os._exit(0)
    for sig in ignored:
        signal.signal(sig, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _DEFERRED)


def _signal_name(exitcode: int | None) -> str:
    if exitcode is None:
        return "no exit status"
    if exitcode < 0:
        try:
            return signal.Signals(-exitcode).name
        except ValueError:
            return f"signal {-exitcode}"
    return f"exit status {exitcode}"


_DROP_HOOK = "_KVRULES_TEST_ENGINE_DROP"
"""Test hook, read in the worker only: ``<cell_id>`` drops the last firing (and what it
derived) from every evaluation of that cell, as a silent engine defect would."""


def _test_drop(cell_id: str, ev: Evaluation) -> Evaluation:
    if not ev.events or os.environ.get(_DROP_HOOK) != cell_id:
        return ev
    lost = set(ev.events[-1].derived)
    return Evaluation([d for d in ev.derived if d.id not in lost], ev.events[:-1], ev.failures)


def _test_crash(cell_id: str, attempt: int) -> None:
    spec = os.environ.get(_CRASH_HOOK)
    if not spec:
        return
    target, _, mode = spec.partition(":")
    if target == cell_id and (mode != "once" or attempt == 0):
        os.kill(os.getpid(), signal.SIGSEGV)


_WORKER_NAME = "kvrules-engine"
_PARENT_POLL = 1.0
"""Seconds between checks that the parent is still alive (the pipe may be held open by
other children that inherited it, so EOF alone does not prove the parent is gone)."""


def _die_with_parent() -> None:
    try:  # Linux: SIGKILL this process when the parent thread exits
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _worker_main(cp: CompiledPolicy, conn: Connection, parent_pid: int) -> None:
    child_signals(parent_pid, signal.SIGINT, signal.SIGTERM)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    faulthandler.disable()  # it may hold its own copy of the parent's stderr
    # durable-rules is imported here, never in the parent
    from kvrules.backend.durable import session
    refused: tuple[str, str] | None = None
    try:  # the rulesets, before the first cell arrives (the parent is preparing it)
        session.ruleset_names(cp)
    except Exception as exc:  # noqa: BLE001 - every cell's engine_failure, as below
        refused = _failure(exc)
    while True:
        try:
            while not conn.poll(_PARENT_POLL):
                if os.getppid() != parent_pid:
                    os._exit(0)
            cell_id, attempt, facts = conn.recv()
        except (EOFError, OSError):
            return
        _test_crash(cell_id, attempt)
        if refused is not None:  # the engine took no ruleset: no cell can be evaluated
            conn.send(refused)
            continue
        try:
            result: Any = ("ok", _test_drop(cell_id, session.evaluate(cp, facts)))
        except Exception as exc:  # noqa: BLE001 - reported as the cell's engine_failure
            result = _failure(exc)
        conn.send(result)
        if session.tainted():  # the engine raised mid-session: never reuse this process
            conn.close()
            os._exit(0)


def _failure(exc: Exception) -> tuple[str, str]:
    """The worker's answer for an engine that raised: the cell's ``engine_failure`` text."""
    return ("error", short(f"engine: {type(exc).__name__}: {exc}"))


def evaluate_in_process(cp: CompiledPolicy, facts: list[Fact]) -> Evaluation:
    """Evaluate ``facts`` on durable-rules in this process, unsupervised.

    For callers that cannot have a worker (daemon processes) and for the authoring tools,
    which replay one cell at a time: an engine crash here takes the process with it.
    """
    from kvrules.backend.durable import session  # durable-rules is imported on first use only
    return session.evaluate(cp, facts)


class EngineSupervisor:
    """Evaluate cells on durable-rules in a child process (forked lazily, reused)."""

    def __init__(self, cp: CompiledPolicy) -> None:
        self.cp = cp
        self._proc: BaseProcess | None = None
        self._conn: Connection | None = None
        self.restarts = 0
        self._pending: tuple[str, list[Fact], Any] | None = None
        _LIVE.add(self)

    def _start(self) -> Connection:
        """Fork a worker; returns the parent's end of its pipe."""
        ctx = (multiprocessing.get_context("fork") if hasattr(os, "fork")
               else multiprocessing.get_context("spawn"))
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=_worker_main, args=(self.cp, child, os.getpid()),
                           daemon=True, name=_WORKER_NAME)
        with signals_deferred():  # recorded before a held signal can unwind the caller
            proc.start()
            self._proc, self._conn = proc, parent
            child.close()
        return parent

    def close(self, wait: bool = True) -> None:
        """Stop the worker (a new one starts on the next evaluation); ``wait``: until it
        is gone (otherwise multiprocessing reaps it later)."""
        self._pending = None
        proc, conn = self._proc, self._conn
        self._proc = self._conn = None
        if conn is not None:
            conn.close()
        if proc is not None:
            if proc.is_alive():
                proc.kill()
            if wait:
                proc.join(5)

    def _died(self) -> tuple[str, str]:
        """The worker is gone: reap it and describe how it ended."""
        proc = self._proc
        if proc is not None:
            proc.join(5)
        died = _signal_name(proc.exitcode if proc is not None else None)
        self.close()
        self.restarts += 1
        return ("died", died)

    def _send(self, cell_id: str, attempt: int, facts: list[Fact]) -> tuple[str, str] | None:
        """Hand one evaluation to the worker (forked if needed); ("died", how) if it is gone."""
        conn = self._conn
        if self._proc is None or not self._proc.is_alive() or conn is None:
            self.close()
            conn = self._start()
        try:
            conn.send((cell_id, attempt, facts))
            return None
        except (EOFError, OSError, BrokenPipeError):
            return self._died()
        except BaseException:  # KeyboardInterrupt, SystemExit: the pipe is out of step
            self.close()
            raise

    def _receive(self) -> Any:
        """("ok", Evaluation) | ("error", text) | ("died", exit description)."""
        conn = self._conn
        if conn is None:
            return self._died()
        try:
            return conn.recv()
        except (EOFError, OSError, BrokenPipeError):
            return self._died()
        except BaseException:
            self.close()
            raise

    def start(self) -> None:
        """Fork the worker now, if none is running: it loads the engine and the policy's
        rulesets while the caller prepares the first cell (else the first evaluation waits
        for both)."""
        if self._proc is None and not multiprocessing.current_process().daemon:
            self._start()

    def submit(self, facts: list[Fact], cell_id: str = "") -> None:
        """Start evaluating ``facts``; :meth:`result` returns the evaluation.

        One evaluation is in flight at a time, so the caller can prepare the next cell
        while the worker evaluates this one (the worker is another process: another core).
        """
        if self._pending is not None:
            raise RuntimeError("an evaluation is already in flight")
        if multiprocessing.current_process().daemon:  # e.g. inside a user's Pool worker,
            self._pending = (cell_id, facts, ("ok", evaluate_in_process(self.cp, facts)))
            return  # which may not have children
        self._pending = (cell_id, facts, self._send(cell_id, 0, facts))

    def result(self) -> tuple[Evaluation, bool]:
        """The evaluation submitted last and whether it is a real one (False: the engine
        crashed on it twice: the worker is retried once, fresh, before giving up)."""
        if self._pending is None:
            raise RuntimeError("no evaluation in flight")
        cell_id, facts, outcome = self._pending
        self._pending = None
        for attempt in range(2):
            if attempt == 1:
                outcome = self._send(cell_id, 1, facts)
            kind, value = outcome if outcome is not None else self._receive()
            if kind == "ok":
                return value, True
            if kind == "error":
                return Evaluation(failures=[value]), True
            died = value
        return Evaluation(failures=[short(
            f"the rule engine crashed ({died}) evaluating this cell, twice; "
            "the cell is not classified")]), False

    def evaluate(self, facts: list[Fact], cell_id: str = "") -> tuple[Evaluation, bool]:
        """The evaluation of ``facts`` and whether it is a real one (False: engine crashed)."""
        self.submit(facts, cell_id)
        return self.result()

    def __del__(self) -> None:
        try:  # not waiting: a Ctrl-C arriving inside __del__ would be swallowed
            self.close(wait=False)
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


_LIVE: "weakref.WeakSet[EngineSupervisor]" = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    """Kill engine workers at exit (before multiprocessing joins its children: the workers
    ignore SIGTERM, so its terminate() would not stop them)."""
    for supervisor in list(_LIVE):
        supervisor.close()
    for proc in multiprocessing.active_children():
        if proc.name == _WORKER_NAME:  # one whose supervisor was already collected
            proc.kill()
            proc.join(5)
