"""The benchmark script still runs end to end (tiny corpora: its figures are not checked,
only that it measures the installed command, reports every column and checks the targets)."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_cli.py"


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="--breakdown reads /proc")
def test_the_cli_benchmark_measures_every_command_and_the_processes_of_one(
        tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(BENCH), "--shapes", "few,diverse",
                           "--scales", "2,3", "--ranks", "1", "--points", "4", "--repeat", "2",
                           "--markdown", "--breakdown"], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    header = "| corpus | cells | parse:json | parse:orjson | jsonl | json | text | jsonl -j1 |"
    assert header in lines
    rows = [line for line in lines if line.startswith(("| few |", "| diverse |"))]
    assert len(rows) == 4 and all(row.count(" MiB)") == 6 for row in rows)
    spread = re.compile(r"\((\d+\.\d\d)x \[(\d+\.\d\d)-(\d+\.\d\d)\], cpu ")
    for row in rows:  # every figure: the median ratio within its runs' range
        found = [tuple(map(float, m)) for m in spread.findall(row)]
        assert len(found) == 6 and all(low <= ratio <= high for ratio, low, high in found)
        assert found[0][0] == 1.0  # the baseline's own ratio; its range is its runs'
    verdicts = [line for line in lines if line.startswith(("PASS", "FAIL"))]
    assert len(verdicts) == 4 * 4 + 2 * 2
    assert sum("baseline runs [" in v for v in verdicts) == 4  # the jsonl target shows both
    against = re.compile(r"(json|text) (\d+\.\d\d)x jsonl, run by run")
    found = [against.search(v) for v in verdicts]
    assert sum(m is not None and float(m.group(2)) > 0 for m in found) == 4 * 2
    split = [line for line in lines if line.startswith("jsonl CPU seconds by process")]
    assert len(split) == 4
    assert all("parent" in s and "engine worker" in s
               and "extraction workers" in s for s in split)
