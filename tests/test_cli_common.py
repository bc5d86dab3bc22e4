"""kvrules.cli.common: the progress bar shows only on a terminal, and only for long runs."""
from __future__ import annotations

import io

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
