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

import multiprocessing
import os
import signal
from typing import Any

from kvrules.facts.model import Fact
from kvrules.policy.compiled import CompiledPolicy
from kvrules.runtime.events import Evaluation, short

_CRASH_HOOK = "_KVRULES_TEST_ENGINE_CRASH"
"""Test hook, read in the worker only: ``<cell_id>`` kills the worker on every evaluation
of that cell, ``<cell_id>:once`` on the first attempt only (the retry succeeds)."""


def _signal_name(exitcode: int | None) -> str:
    if exitcode is None:
        return "no exit status"
    if exitcode < 0:
        try:
            return signal.Signals(-exitcode).name
        except ValueError:
            return f"signal {-exitcode}"
    return f"exit status {exitcode}"


def _test_crash(cell_id: str, attempt: int) -> None:
    spec = os.environ.get(_CRASH_HOOK)
    if not spec:
        return
    target, _, mode = spec.partition(":")
    if target == cell_id and (mode != "once" or attempt == 0):
        os.kill(os.getpid(), signal.SIGSEGV)


def _worker_main(cp: CompiledPolicy, conn: Any) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    from kvrules.runtime import session  # durable-rules is imported here, never in the parent
    while True:
        try:
            cell_id, attempt, facts = conn.recv()
        except (EOFError, OSError):
            return
        _test_crash(cell_id, attempt)
        try:
            result: Any = ("ok", session.evaluate(cp, facts))
        except Exception as exc:  # noqa: BLE001 - reported as the cell's engine_failure
            result = ("error", short(f"engine: {type(exc).__name__}: {exc}"))
        conn.send(result)
        if session.tainted():  # the engine raised mid-session: never reuse this process
            conn.close()
            os._exit(0)


class EngineSupervisor:
    """Evaluate cells on durable-rules in a child process (forked lazily, reused)."""

    def __init__(self, cp: CompiledPolicy) -> None:
        self.cp = cp
        self._proc: Any = None
        self._conn: Any = None
        self.restarts = 0

    def _start(self) -> None:
        ctx = multiprocessing.get_context("fork" if hasattr(os, "fork") else "spawn")
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=_worker_main, args=(self.cp, child), daemon=True,
                           name="kvrules-engine")
        proc.start()
        child.close()
        self._proc, self._conn = proc, parent

    def close(self) -> None:
        """Stop the worker (a new one starts on the next evaluation)."""
        proc, conn = self._proc, self._conn
        self._proc = self._conn = None
        if conn is not None:
            conn.close()
        if proc is not None:
            if proc.is_alive():
                proc.kill()
            proc.join(5)

    def _attempt(self, cell_id: str, attempt: int, facts: list[Fact]) -> Any:
        """("ok", Evaluation) | ("error", text) | ("died", exit description)."""
        if self._proc is None or not self._proc.is_alive():
            self.close()
            self._start()
        try:
            self._conn.send((cell_id, attempt, facts))
            return self._conn.recv()
        except (EOFError, OSError, BrokenPipeError):
            proc = self._proc
            if proc is not None:
                proc.join(5)
            died = _signal_name(proc.exitcode if proc is not None else None)
            self.close()
            self.restarts += 1
            return ("died", died)
        except BaseException:  # KeyboardInterrupt, SystemExit: the pipe is out of step
            self.close()
            raise

    def evaluate(self, facts: list[Fact], cell_id: str = "") -> tuple[Evaluation, bool]:
        """The evaluation of ``facts`` and whether it is a real one (False: engine crashed)."""
        for attempt in range(2):
            kind, value = self._attempt(cell_id, attempt, facts)
            if kind == "ok":
                return value, True
            if kind == "error":
                return Evaluation(failures=[value]), True
            died = value
        return Evaluation(failures=[short(
            f"the rule engine crashed ({died}) evaluating this cell, twice; "
            "the cell is not classified")]), False

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass
