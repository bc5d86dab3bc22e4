"""The ``kvrules`` command line: one typer app (:mod:`kvrules.cli.root`), one module per
command; this module is the entry point and starts without typer.

Registration point: every command lives in ``kvrules/cli/<command>.py`` and exposes
``register(app: typer.Typer) -> None`` which adds itself with ``app.command(...)``. A command
group (``kvrules rules check|test``) is a module with its own ``typer.Typer`` named ``app``;
mount it in ``GROUPS``. Both tuples are explicit so ``--help`` lists commands in this order.

A run that names its command builds the app with that command only: typer inspects the
signature of every registered command when it starts, and importing and inspecting all of
them cost ~20 ms of every ``classify`` run. ``--help``, completion and anything else get
the whole app (:data:`app`).
"""
from __future__ import annotations

import io
import os
import signal
import sys
import warnings
from types import FrameType
from typing import TYPE_CHECKING, Any, Sequence, TextIO

if TYPE_CHECKING:
    import typer

COMMANDS: tuple[str, ...] = (
    "classify",
    "readiness", "aggregate", "publish", "verify",
    "explain", "diff",
    "report",
)
"""Modules of :mod:`kvrules.cli` whose ``register(app)`` adds one top-level command each."""

GROUPS: tuple[str, ...] = (
    "rules",  # kvrules rules check|test
    "cache",  # kvrules cache info|prune
)
"""Modules of :mod:`kvrules.cli` whose ``app`` is mounted under the module's name."""

COMPLETION_VARIABLE = "_KVRULES_COMPLETE"
"""Set by the shell when it asks for completions: those need every command."""


def _named_command(args: Sequence[str]) -> str | None:
    """The command a run names as its first argument (None: the whole app is needed)."""
    if not args or os.environ.get(COMPLETION_VARIABLE):
        return None
    return args[0] if args[0] in COMMANDS + GROUPS else None


def build_app(only: str | None = None) -> typer.Typer:
    """The command line with every command, or with the command ``only`` alone."""
    from kvrules.cli.root import build_app as build
    return build(only)


_WHOLE: list[typer.Typer] = []


def __getattr__(name: str) -> Any:
    """``app``: the whole command line, built on first use (tests, documentation tools)."""
    if name == "app":
        if not _WHOLE:
            _WHOLE.append(build_app())
        return _WHOLE[0]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _print_warning(message: Warning | str, category: type[Warning], filename: str,
                   lineno: int, file: TextIO | None = None, line: str | None = None) -> None:
    """``kvrules: warning: ...`` on stderr, not Python's file:line form (a tool, not code)."""
    sys.stderr.write(f"kvrules: warning: {message}\n")


class _Stopped(BaseException):
    """SIGINT or SIGTERM arrived: unwind the command, so every ``finally`` removes its
    temporary file and no partial output is left, then exit 128 + the signal number."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


_RECEIVED: list[int] = []
"""Stop signals received: one raised where Python swallows exceptions (a ``__del__``, a
weakref callback) did not unwind the command, yet it still ends the run as stopped."""


def _stop(signum: int, frame: FrameType | None) -> None:
    _RECEIVED.append(signum)
    raise _Stopped(signum)


def _unraisable(unraisable: "sys.UnraisableHookArgs") -> None:
    """A stop signal swallowed by a ``__del__`` is recorded in :data:`_RECEIVED`, not
    printed as "Exception ignored"; anything else is reported as Python reports it."""
    if not isinstance(unraisable.exc_value, _Stopped):
        sys.__unraisablehook__(unraisable)


def _exit_stopped(signum: int) -> None:
    sys.stderr.write(f"kvrules: {STOPPED[signal.Signals(signum)]}\n")
    sys.exit(128 + signum)


STOPPED = {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated"}


def main() -> None:
    """Console-script entry point (``kvrules``): exit status 0, 1 or 2 (130 and 143 when
    interrupted or terminated)."""
    warnings.showwarning = _print_warning
    for stream in (sys.stdout, sys.stderr):  # PYTHONIOENCODING=ascii: "?", not a traceback
        if isinstance(stream, io.TextIOWrapper) and stream.errors == "strict":
            stream.reconfigure(errors="replace")
    for signum in STOPPED:  # SIGINT too when started in the background (inherited SIG_IGN)
        signal.signal(signum, _stop)
    sys.unraisablehook = _unraisable
    try:
        command = _named_command(sys.argv[1:])
        build_app(command)(prog_name="kvrules")
    except _Stopped as stopped:
        _exit_stopped(stopped.signum)
    except SystemExit:
        if _RECEIVED:
            _exit_stopped(_RECEIVED[0])
        raise
    except Exception:
        if _RECEIVED:  # the stop, turned into another error on its way out: Python wraps
            _exit_stopped(_RECEIVED[0])  # one raised in a class's __set_name__ (an import
        raise  # under way) in a RuntimeError
