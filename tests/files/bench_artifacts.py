"""Time load_cell against plain json.load of the same files (not a test; run by hand).

    python tests/files/bench_artifacts.py [results_per_rank] [ranks] [repeats]

Builds a dp campaign from the bundled dp2 example in a temporary folder, with generated rank
artifacts of N results each, and prints the best-of-R time of json.load over every JSON file
of the cell versus load_cell. The artifact stage must stay within 2x of plain decoding.
"""
from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from helpers import DP2, big_rank, copy_example, dump, load, pod_dir, set_at  # noqa: E402

from kvrules.artifacts.discover import discover  # noqa: E402
from kvrules.artifacts.load import load_cell  # noqa: E402


def build(tmp: Path, results: int, ranks: int) -> Path:
    campaign = copy_example(tmp, DP2)
    pod = pod_dir(campaign)
    template = load(pod / "benchmark.json")
    for old in pod.glob("benchmark*.json"):
        old.unlink()
    for rank in range(ranks):
        name = "benchmark.json" if rank == 0 else f"benchmark_dp{rank}.json"
        dump(pod / name, big_rank(template, results, rank, ranks))
    set_at(campaign / "collection-plan.json", "/cells/0/topology/dp", ranks)
    return campaign


def best(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    results, ranks, repeats = (int(a) for a in (sys.argv[1:] + ["500", "2", "20"][len(sys.argv) - 1:]))
    with tempfile.TemporaryDirectory() as tmp:
        campaign = build(Path(tmp), results, ranks)
        (ref,) = discover([str(campaign)])
        files = sorted(campaign.rglob("*.json"))
        ev = load_cell(ref)  # warm the schema caches, as in a corpus run
        assert ev.diagnostics == [], ev.diagnostics

        def plain() -> None:
            for path in files:
                with open(path, "rb") as fh:
                    json.load(fh)

        base = best(plain, repeats)
        ours = best(lambda: load_cell(ref), repeats)
        size = sum(p.stat().st_size for p in files) / 1e6
        print(f"{ranks} ranks x {results} results, {len(files)} files, {size:.1f} MB")
        print(f"json.load: {base * 1e3:.2f} ms  load_cell: {ours * 1e3:.2f} ms  "
              f"ratio: {ours / base:.2f}")


if __name__ == "__main__":
    main()
