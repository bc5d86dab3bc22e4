"""``--jobs N`` extraction workers: a worker that dies mid-run costs no cell and no hang.

Each scenario runs in a fresh interpreter (bounded by a timeout: the old pool waited
forever for the result of a killed worker) that makes the chosen cells kill the worker
process preparing them (SIGKILL, as the OOM killer does), before it prepares the cell or
halfway through writing the prepared cell back; the parent is never killed.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Iterator

from helpers import EXAMPLES

CAMPAIGNS = sorted(str(p) for p in EXAMPLES.iterdir() if p.is_dir() and p.name != "__pycache__")

SCENARIO = """
import json, os, signal, struct, sys
import multiprocessing.connection as mpc
from pathlib import Path
from kvrules import api, workers
from kvrules.cache.verdicts import VerdictCache
from kvrules.verdicts.render import render_json

victims, when, cache = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]
campaigns = sys.argv[4:]
parent = os.getpid()
load = workers.load_cell
send = mpc.Connection._send_bytes
cut = []

def deadly_load(ref):
    if os.getpid() != parent and (victims == "all" or str(ref.cell_dir) in victims):
        if when == "before":
            os.kill(os.getpid(), signal.SIGKILL)
        if when == "raise":
            raise RuntimeError("a bug in a worker")
        cut.append(ref)
    return load(ref)

def cut_send(self, buf):
    if cut:  # a victim's result: its length and half of it, then death
        self._send(struct.pack("!i", len(buf)))
        self._send(memoryview(buf)[: len(buf) // 2])
        os.kill(os.getpid(), signal.SIGKILL)
    return send(self, buf)

workers.load_cell = deadly_load
mpc.Connection._send_bytes = cut_send
breaks = []
broken = workers.ExtractionWorkers._broken
def counted(self):
    breaks.append(1)
    broken(self)
workers.ExtractionWorkers._broken = counted
policy = api.load_policy()
serial = render_json(api.classify(campaigns, policy, jobs=1))
store = VerdictCache(Path(cache)) if cache else None
parallel = render_json(api.classify(campaigns, policy, jobs=2, cache=store))
print(json.dumps({"same": serial == parallel, "breaks": len(breaks),
                  "cells": len(json.loads(serial)["cells"])}))
"""


def run(victims: object, cache: str = "", when: str = "before") -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", SCENARIO, json.dumps(victims), when, cache,
                           *CAMPAIGNS], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    out: dict[str, object] = json.loads(done.stdout)
    return out


def cell_dirs() -> list[str]:
    return sorted(str(p.resolve()) for c in CAMPAIGNS for p in (Path(c) / "cells").iterdir())


def test_a_worker_killed_on_one_cell_costs_nothing() -> None:
    """The lost cells are prepared in the parent (as --jobs 1 does): the same bytes."""
    got = run([cell_dirs()[3]])
    assert got["same"] is True and got["breaks"] == 1 and got["cells"] == len(cell_dirs())


def test_a_worker_killed_while_writing_its_result_costs_nothing() -> None:
    """Half a message, then the end of the pipe: the parent neither waits for the rest
    nor reads the half as a cell."""
    got = run([cell_dirs()[3]], when="mid-result")
    assert got["same"] is True and got["breaks"] == 1 and got["cells"] == len(cell_dirs())


def test_a_cell_that_raises_in_a_worker_is_prepared_in_the_parent() -> None:
    """The worker lives on; the parent prepares the cell as --jobs 1 does (here it
    succeeds: only workers raise)."""
    got = run([cell_dirs()[3], cell_dirs()[5]], when="raise")
    assert got["same"] is True and got["breaks"] == 0 and got["cells"] == len(cell_dirs())


def test_workers_that_always_die_leave_the_run_to_the_parent(tmp_path: Path) -> None:
    """Every worker dies: after MAX_BREAKS deaths none is started again (the one still
    running may die too) and the parent prepares the rest; through the verdict cache's
    batches as well."""
    from kvrules.workers import MAX_BREAKS
    for cache in ("", str(tmp_path / "v")):
        got = run("all", cache)
        assert got["same"] is True and 1 <= int(str(got["breaks"])) <= MAX_BREAKS + 1


def test_after_max_breaks_no_pool_is_started() -> None:
    from kvrules import workers
    done = workers.ExtractionWorkers(2, None)  # type: ignore[arg-type]
    done.breaks = workers.MAX_BREAKS
    assert done.submit(None) is None and done._workers == []  # type: ignore[arg-type]


def test_no_death_no_break() -> None:
    got = run([])
    assert got["same"] is True and got["breaks"] == 0


def test_workers_told_no_more_cells_come_end_by_themselves() -> None:
    """``finish()`` once the last cell is sent: the workers end as they finish (the parent
    then only reaps them); every cell still comes back from them."""
    import time

    from kvrules import api, workers
    from kvrules.artifacts.discover import CellRef, discover

    policy = api.load_policy()
    refs = discover(CAMPAIGNS)
    pool = workers.ExtractionWorkers(2, policy.compiled)
    taken: list[workers.Prepared] = []
    try:
        def sent() -> Iterator[CellRef]:
            yield from refs
            pool.finish()

        for prepared in pool.in_order(sent()):
            taken.append(prepared)
        processes = [w.process for w in pool._workers]
        deadline = time.monotonic() + 10
        while any(p.is_alive() for p in processes) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(processes) == 2 and not any(p.is_alive() for p in processes)
        assert [p.exitcode for p in processes] == [0, 0] and pool.breaks == 0
    finally:
        pool.close()
    assert [p.cell.cell_id for p in taken] == [r.cell_id for r in refs]
