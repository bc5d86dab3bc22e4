"""kvrules.cli.common: the progress bar shows only on a terminal, and only for long runs."""
from __future__ import annotations

from pathlib import Path

import io
from contextlib import contextmanager

from kvrules.cli.common import PROGRESS_MIN_CELLS, CellProgress


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def run(stream: io.StringIO, total: int, enabled: bool = True) -> str:
    with CellProgress(stream, enabled=enabled) as progress:
        for done in range(1, total + 1):
            progress(done, total)
    return stream.getvalue()


def test_a_long_run_on_a_terminal_draws_a_bar() -> None:
    assert f"{PROGRESS_MIN_CELLS}/{PROGRESS_MIN_CELLS}" in run(FakeTerminal(), PROGRESS_MIN_CELLS)


def test_no_bar_for_a_short_run_a_pipe_or_when_disabled() -> None:
    assert run(FakeTerminal(), PROGRESS_MIN_CELLS - 1) == ""
    assert run(io.StringIO(), 100) == ""
    assert run(FakeTerminal(), 100, enabled=False) == ""


def test_output_dash_is_stdout_and_creates_no_file(tmp_path) -> None:
    import subprocess
    import sys
    from helpers import EXAMPLES
    done = subprocess.run([sys.executable, "-m", "kvrules", "classify",
                           str(EXAMPLES / "dense-legacy-stamp-format"), "-f", "json", "-o", "-"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 0 and '"kvrules_version"' in done.stdout
    assert list(tmp_path.iterdir()) == []


def test_a_closed_pipe_ends_quietly_with_the_sigpipe_status(tmp_path) -> None:
    """``kvrules classify ... | head -1``: no traceback, and not exit 1 (an evidence error)."""
    import subprocess
    import sys
    from helpers import EXAMPLES
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from corpus import generate  # a report far larger than a pipe's buffer
    corpus = generate(tmp_path / "corpus", cells=4, ranks=1, points=400)
    proc = subprocess.Popen([sys.executable, "-m", "kvrules", "classify", str(corpus),
                             str(EXAMPLES / "dp2-peer-ineligible"), "-f", "jsonl"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.readline()
    proc.stdout.close()  # the reader goes away while kvrules is still writing
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141, err
    assert "Traceback" not in err and "BrokenPipe" not in err


def test_a_usage_error_writes_no_partial_report_in_any_format(tmp_path) -> None:
    import subprocess
    import sys
    for fmt in ("jsonl", "json", "table"):
        done = subprocess.run([sys.executable, "-m", "kvrules", "classify", str(tmp_path),
                               "-f", fmt], capture_output=True, text=True, timeout=120)
        assert (done.returncode, done.stdout) == (2, ""), fmt
        assert "neither a campaign folder" in done.stderr


def _slow_lines(count: int, pause: float):
    import time
    for n in range(count):
        time.sleep(pause)
        yield f"line {n}\n"


def test_a_report_is_synced_once_before_the_rename(tmp_path, monkeypatch) -> None:
    """The rename of an atomic write follows a complete sync of the file."""
    import os
    from kvrules.cli import common
    calls: list[str] = []
    real_sync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append("sync"), real_sync(fd)))
    monkeypatch.setattr(os, "replace", lambda a, b: (calls.append("rename"), real_replace(a, b)))
    out = tmp_path / "report.jsonl"
    common.write_lines(_slow_lines(40, 0.0), out)
    assert out.read_text() == "".join(f"line {n}\n" for n in range(40))
    assert calls == ["sync", "rename"]
    assert [p.name for p in tmp_path.iterdir()] == ["report.jsonl"]


def test_a_report_cut_short_is_neither_synced_nor_renamed(tmp_path, monkeypatch) -> None:
    import os
    from kvrules.cli import common
    synced: list[int] = []
    monkeypatch.setattr(os, "fsync", synced.append)

    def failing():
        yield "first\n"
        raise RuntimeError("cut short")
    out = tmp_path / "report.jsonl"
    try:
        common.write_lines(failing(), out)
    except RuntimeError:
        pass
    assert synced == [] and list(tmp_path.iterdir()) == []


def test_lines_are_written_in_order_small_ones_batched_large_ones_as_they_are(
        tmp_path, monkeypatch) -> None:
    """Small lines go out in batches of about WRITE_BATCH characters; a line that size or
    more (a cell's point records) is one write of its own, never copied into a batch."""
    from kvrules.cli import common
    monkeypatch.setattr(common, "WRITE_BATCH", 100)
    big = "x" * 250 + "\n"
    lines = ["a\n"] * 30 + [big] + ["b\n"] * 3 + [big, big] + ["c\n"]
    writes: list[str] = []
    real_output = common._output

    @contextmanager
    def recording(output):
        with real_output(output) as out:
            real_write = out.write
            out.write = lambda text: (writes.append(text), real_write(text))[1]
            yield out
    monkeypatch.setattr(common, "_output", recording)
    out = tmp_path / "report.jsonl"
    common.write_lines(iter(lines), out)
    assert out.read_text() == "".join(lines)
    assert [w for w in writes if w] == ["a\n" * 30, big, "b\n" * 3, big, big, "c\n"]
    assert any(w is big for w in writes)  # the very string, not a copy
