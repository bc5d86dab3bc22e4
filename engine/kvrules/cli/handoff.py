"""``kvrules classify`` as a process: the command line is parsed in a forked child while this
process imports the pipeline.

Importing typer and parsing a command line takes ~60 ms, importing the pipeline ~60 ms
more; one after the other they were a quarter of a 50-cell run, with the second core idle.
So the run forks first. The child imports typer and parses; a valid command line comes back
over a pipe as a job (help, ``--version`` and usage errors are printed by the child, which
exits as ``kvrules`` would). Meanwhile this process imports what the job needs, then runs it:
the process a user started is the one that classifies, writes the report and exits with
its status. Where there is no fork, or the app is called in-process (tests), the job runs
where it was parsed.
"""
from __future__ import annotations

import os
import pickle
import signal
import sys
from typing import Any, Callable, NoReturn

_CHANNEL: list[int] = []
"""The pipe to the parent, in a child forked to parse (empty anywhere else)."""

STOPS = {signal.SIGINT, signal.SIGTERM}
"""The signals that stop a run: held while forking, so the child never handles one as the
parent would (it resets them first), and the parent's arrive inside its clean-up."""


def can_fork() -> bool:
    """Whether this platform forks, and can hold signals while it does (POSIX)."""
    return hasattr(os, "fork") and hasattr(signal, "pthread_sigmask")


def hand_over(job: Any) -> bool:
    """Send ``job`` to the parent, if this process was forked to parse (True), else False:
    the caller then runs the job itself."""
    if not _CHANNEL:
        return False
    data = memoryview(pickle.dumps(job))
    try:
        while data:
            data = data[os.write(_CHANNEL[0], data):]
    except BrokenPipeError:  # the parent is gone (killed): nobody runs the job
        raise SystemExit(1) from None
    return True


def parse_apart(parse: Callable[[], Any], meanwhile: Callable[[], None]) -> tuple[Any, int]:
    """Run ``parse`` in a forked child and ``meanwhile`` here: the job the child handed over
    (None when it exited without one) and the child's exit status. The child never outlives
    this call: stopped (Ctrl-C, SIGTERM) or failing here, it is killed and reaped. Where no
    process can be forked (a process limit), ``parse`` runs here, and with it the job."""
    read, write = os.pipe()
    signal.pthread_sigmask(signal.SIG_BLOCK, STOPS)
    try:
        pid = os.fork()
    except OSError:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOPS)
        os.close(read)
        os.close(write)
        parse()  # the job runs where it is parsed, and the command exits
        return None, 0
    if pid == 0:
        os.close(read)
        _parse_here(parse, write)
    os.close(write)
    try:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOPS)  # a stop held meanwhile lands here
        meanwhile()
        data = _read_all(read)
        status = _exit_status(os.waitpid(pid, 0)[1])
        pid = 0
    finally:
        os.close(read)
        if pid:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    if status != 0 or not data:  # help, a usage error, or a child that died: no job
        return None, status
    return pickle.loads(data), 0


def _parse_here(parse: Callable[[], Any], write: int) -> NoReturn:
    """The child: parse (which prints help or errors itself), then exit with the status a
    ``kvrules`` process would have, never returning into the caller's frames."""
    code = 1
    try:
        for signum in STOPS:  # stopped, the child just ends; the parent reports the stop
            signal.signal(signum, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOPS)
        _CHANNEL.append(write)
        parse()
        code = 0
    except SystemExit as exc:
        code = _code_of(exc.code)
    except BaseException:  # a bug: reported as the interpreter reports it
        import traceback
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)


def _code_of(code: Any) -> int:
    """The exit status ``sys.exit(code)`` gives (a message is printed, status 1)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    sys.stderr.write(f"{code}\n")
    return 1


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    return b"".join(chunks)


def _exit_status(wait_status: int) -> int:
    """A child's status as a shell reports it (128 + N when killed by signal N)."""
    code = os.waitstatus_to_exitcode(wait_status)
    return 128 - code if code < 0 else code
