"""Benchmark: ``kvrules classify`` against a parse-only baseline measured in the same run.

    python benchmarks/bench_classify.py [--cells 200] [--ranks 2] [--points 500] [--repeat 3]

Baseline: read and JSON-decode every file kvrules reads (plan, provenance, rank artifacts).
Classify: the library call behind ``kvrules classify`` with a fresh policy each repeat
(compilation included), one worker unless ``--jobs``. Reported: the best of ``--repeat``
runs of each, their ratio, and peak traced memory for a quarter and for the whole corpus
(memory must not grow with the number of cells: one cell is held at a time).
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus import generate  # noqa: E402

from kvrules import api  # noqa: E402


def parse_only(root: Path) -> float:
    """Seconds to read and decode every JSON file of the corpus."""
    start = time.perf_counter()
    for path in sorted(root.rglob("*.json")):
        with path.open(encoding="utf-8") as fh:
            json.load(fh)
    return time.perf_counter() - start


def classify(root: Path, jobs: int) -> tuple[float, int]:
    """Seconds to classify the corpus (streaming, as the CLI does) and the points seen."""
    start = time.perf_counter()
    points = sum(len(c.points) for c in api.iter_classify([str(root)], api.load_policy(),
                                                          jobs=jobs))
    return time.perf_counter() - start, points


def peak_memory(root: Path, cells: int) -> int:
    """Peak traced bytes while classifying the first ``cells`` cells."""
    tracemalloc.start()
    for i, _ in enumerate(api.iter_classify([str(root)], api.load_policy())):
        if i + 1 >= cells:
            break
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=200)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--points", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kvrules-bench-") as tmp:
        root = generate(Path(tmp) / "campaign", args.cells, args.ranks, args.points)
        base = min(parse_only(root) for _ in range(args.repeat))
        runs = [classify(root, args.jobs) for _ in range(args.repeat)]
        best = min(t for t, _ in runs)
        small, full = peak_memory(root, max(1, args.cells // 4)), peak_memory(root, args.cells)
    print(f"corpus: {args.cells} cells x {args.ranks} ranks x {args.points} points "
          f"({runs[0][1]} points classified), jobs={args.jobs}")
    print(f"parse-only baseline: {base:.2f} s")
    print(f"kvrules classify:    {best:.2f} s  ({runs[0][1] / best:,.0f} points/s)")
    print(f"ratio classify/parse: {best / base:.2f}x")
    print(f"peak traced memory: {small / 2**20:.1f} MiB at {max(1, args.cells // 4)} cells, "
          f"{full / 2**20:.1f} MiB at {args.cells} cells")


if __name__ == "__main__":
    main()
