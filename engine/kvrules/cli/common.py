"""What every command shares: usage-error handling, output writing and the progress bar.

Commands stay thin: they parse options, call the library, hand its data to
:mod:`kvrules.verdicts.render`, write the text with :func:`write_text` or :func:`write_lines`,
and exit with the code the library computed. A :class:`KvrulesUsageError` anywhere inside
:func:`usage_errors` becomes its message and diagnostics on stderr and exit status 2.
"""
from __future__ import annotations

import codecs
import os
import stat
import sys
import time
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator, TextIO, cast

from kvrules.cli import destination
from kvrules.diagnostics import KvrulesUsageError

if TYPE_CHECKING:
    from rich.progress import Progress

USAGE_EXIT = 2
"""Exit status of a usage error: bad path, invalid rule files, bad options (like click)."""

WRITE_BATCH = 1 << 16
"""Characters joined into one write by :func:`write_lines`: few writes, bounded memory."""

PROGRESS_MIN_CELLS = 20
"""Show a progress bar only for runs of at least this many cells."""


def fail(message: str, diagnostics_text: str = "") -> SystemExit:
    """Print ``kvrules: error: message`` (and diagnostics) to stderr; return the exit (status
    2) to raise. A plain ``SystemExit``, which click lets through unchanged."""
    sys.stderr.write(f"kvrules: error: {message}\n{diagnostics_text}")
    sys.stderr.flush()
    return SystemExit(USAGE_EXIT)


@contextmanager
def usage_errors(max_errors: int = 0) -> Iterator[None]:
    """Turn :class:`KvrulesUsageError` into a message on stderr and exit status 2."""
    try:
        yield
    except KvrulesUsageError as exc:
        from kvrules.verdicts.render import render_diagnostics
        raise fail(exc.message, render_diagnostics(exc.diagnostics, "text",
                                                   limit=max_errors)) from None


ESCAPE_ERRORS = "kvrules-escape"
"""Codec error handler: a character the output encoding cannot hold (a lone surrogate copied
from evidence, or non-ASCII under ``PYTHONIOENCODING=ascii``) is written as ``\\uXXXX``,
which is the same character in a JSON string and readable text in a table."""


def _escape(exc: UnicodeError) -> tuple[str, int]:
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    out = []
    for ch in exc.object[exc.start:exc.end]:
        code = ord(ch)
        if code > 0xFFFF:  # a surrogate pair, as JSON writes it
            code -= 0x10000
            out.append(f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}")
        else:
            out.append(f"\\u{code:04x}")
    return "".join(out), exc.end


codecs.register_error(ESCAPE_ERRORS, _escape)


def _escaping_stdout() -> TextIO:
    """stdout that never raises on an unencodable character (see :data:`ESCAPE_ERRORS`)."""
    stream = sys.stdout
    if hasattr(stream, "reconfigure"):
        stream.reconfigure(errors=ESCAPE_ERRORS)
    return stream


def _atomic_file(path: Path) -> tuple[TextIO, Path]:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)
    return cast(TextIO, os.fdopen(fd, "w", encoding="utf-8", errors=ESCAPE_ERRORS,
                                    newline="\n")), Path(tmp)


STDOUT = Path(destination.STDOUT)
"""``--output -``: standard output, as most tools spell it."""

PIPE_CLOSED_EXIT = 128 + 13
"""Exit status when the reader of stdout went away (SIGPIPE's, as a shell reports it)."""


@contextmanager
def _output(output: Path | None) -> Iterator[TextIO]:
    """stdout (``output`` None or ``-``), or ``output`` written atomically: a temporary file
    renamed on success only (the destination is checked by the command first, see
    :mod:`kvrules.cli.destination`). A closed stdout (``| head``) ends the command quietly with
    :data:`PIPE_CLOSED_EXIT`, never a traceback nor the exit status of an evidence error."""
    if output is None or output == STDOUT:
        stream = _escaping_stdout()
        try:
            yield stream
            stream.flush()
        except BrokenPipeError:
            devnull = os.open(os.devnull, os.O_WRONLY)  # Python flushes stdout at exit
            os.dup2(devnull, sys.stdout.fileno())
            raise SystemExit(PIPE_CLOSED_EXIT) from None
        return
    if _special(output):
        yield from _special_output(output)
        return
    try:
        handle, tmp = _atomic_file(output)
    except OSError as exc:
        raise destination.cannot_write(output, exc) from None
    written = False
    try:
        with handle:
            yield cast(TextIO, _Checked(handle, output))
            written = True
            handle.flush()
            os.fsync(handle.fileno())  # the rename must follow a complete sync, or a power
        os.replace(tmp, output)  # cut can leave an empty report under the name
    except OSError as exc:
        if not written:  # raised by the caller's own work, not by this write
            raise
        raise destination.cannot_write(output, exc) from None
    finally:
        tmp.unlink(missing_ok=True)


def _special(output: Path) -> bool:
    """``output`` is a device or a pipe (``/dev/null``, ``/dev/stdout``, a FIFO): written
    as it is, never replaced by a renamed file (as root, that would replace the device)."""
    try:
        mode = output.stat().st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def _special_output(output: Path) -> Iterator[TextIO]:
    """Write to a device or pipe in place; a failing write is a usage error."""
    try:
        handle = open(output, "w", encoding="utf-8", errors=ESCAPE_ERRORS, newline="\n")
    except OSError as exc:
        raise destination.cannot_write(output, exc) from None
    try:
        yield cast(TextIO, _Checked(handle, output))
        try:
            handle.flush()
        except OSError as exc:
            raise destination.cannot_write(output, exc) from None
    finally:
        try:
            handle.close()
        except OSError:  # the buffer a failed write left: the failure is reported already
            pass


class _Checked:
    """A report file whose failing write (full disk, I/O error) is the usage error of an
    unwritable destination, not a traceback; its temporary file is then removed."""

    def __init__(self, handle: TextIO, output: Path) -> None:
        self._handle = handle
        self._output = output

    def write(self, text: str) -> int:
        try:
            return self._handle.write(text)
        except OSError as exc:
            raise destination.cannot_write(self._output, exc) from None


def write_text(text: str, output: Path | None) -> None:
    """Write ``text`` to stdout or, atomically, to ``output``."""
    with _output(output) as out:
        out.write(text)


def write_lines(lines: Iterable[str], output: Path | None) -> None:
    """Stream ``lines`` to stdout or, atomically, to ``output`` (constant memory).

    Lines are joined into writes of about ``WRITE_BATCH`` characters: a text write costs
    ~6 us against ~2 us per jsonl record, and a count of lines would not bound memory (one
    json "line" is a whole cell). A line of that size or more (a cell's point records) is
    written as it is, not copied into a batch first.
    """
    with _output(output) as out:
        batch: list[str] = []
        size = 0
        for line in lines:
            if len(line) >= WRITE_BATCH:
                if batch:
                    out.write("".join(batch))
                    batch.clear()
                    size = 0
                out.write(line)
                continue
            batch.append(line)
            size += len(line)
            if size >= WRITE_BATCH:
                out.write("".join(batch))
                batch.clear()
                size = 0
        out.write("".join(batch))


class CellProgress:
    """A ``progress(done, total)`` callback: cells, cells per second and an ETA on stderr.

    On a terminal it draws a rich bar once the run has at least ``min_cells`` cells; with
    ``force`` (``--progress``) it also writes a plain line at most every ``every`` seconds
    when stderr is a log or a pipe. Otherwise nothing: logs and pipes never see it. Use as
    a context manager so the bar is always closed.
    """

    def __init__(self, stream: TextIO | None = None, min_cells: int = PROGRESS_MIN_CELLS,
                 enabled: bool = True, force: bool = False, every: float = 5.0) -> None:
        self._stream = stream if stream is not None else sys.stderr
        self._tty = self._stream.isatty()
        self._enabled = (enabled and self._tty) or force
        self._min_cells = 0 if force else min_cells
        self._bar: Progress | None = None
        self._task: Any = None
        self._every = every
        self._started = time.monotonic()
        self._written = self._started

    def __call__(self, done: int, total: int | None) -> None:
        """``total`` is None while the run's cells are still being discovered (an archive):
        the bar then counts without a total."""
        if not self._enabled or (total if total is not None else done) < self._min_cells:
            return
        if not self._tty:
            self._line(done, total)
            return
        if self._bar is None:
            from rich.console import Console  # only when a bar is drawn
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                       TimeElapsedColumn, TimeRemainingColumn)
            self._bar = Progress(TextColumn("classifying"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("{task.fields[rate]} cells/s"),
                                 TimeElapsedColumn(), TimeRemainingColumn(),
                                 console=Console(file=self._stream), transient=True,
                                 redirect_stdout=False, redirect_stderr=False)
            self._bar.start()
            self._task = self._bar.add_task("cells", total=total, rate="-")
        assert self._task is not None
        self._bar.update(self._task, completed=done, total=total, rate=self._rate(done))

    def _rate(self, done: int) -> str:
        elapsed = time.monotonic() - self._started
        return f"{done / elapsed:.1f}" if elapsed > 0 else "-"

    def _line(self, done: int, total: int | None) -> None:
        """One plain progress line (a log keeps a few, not one per cell)."""
        now = time.monotonic()
        if now - self._written < self._every and done != total:
            return
        self._written = now
        elapsed = now - self._started
        eta = (f"{(total - done) * elapsed / done:.0f} s" if done and total is not None
               and total >= done else "?")
        self._stream.write(f"kvrules: {done}/{'?' if total is None else total} cells, "
                           f"{self._rate(done)} cells/s, ETA {eta}\n")
        self._stream.flush()

    def __enter__(self) -> "CellProgress":
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
