"""Benchmark classifying an archive: executors, workers, and a cold against a warm cache.

    python benchmarks/bench_archive.py [--campaigns 42] [--cells-per-campaign 5]
                                       [--points 500] [--format text] [--repeat 3] [--markdown]

The archive is a ``diverse`` corpus (``corpus.py``: every cell reads differently to the
rules) re-packed into ``--campaigns`` small campaigns filed two levels deep, as a shared
archive keeps them (``archive/shelf-N/campaign``). For ``--executor local`` and
``dask-local`` with 1 and 2 workers, the installed ``kvrules classify ARCHIVE --format F``
(``text`` by default: the run, not the rendering of a 100 MB report, is measured) runs as a
whole process: without the verdict cache (``--no-cache``), with a fresh
one (cold: every cell evaluated and stored) and again (warm: every cell read back). The
compiled policy cache is warm throughout. Reported: medians of ``--repeat`` runs (wall
seconds, CPU seconds of the process and its waited-for children), the warm speed-up, and
whether every run wrote the same bytes. Timings depend on the machine: not a unit test.
"""
from __future__ import annotations

import argparse
import filecmp
import json
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_cli import Run, kvrules_command, median, run_process  # noqa: E402
from corpus import generate  # noqa: E402

EXECUTORS = (("local", 1), ("local", 2), ("dask-local", 1), ("dask-local", 2))
MODES = ("uncached", "cold", "warm")


def build_archive(root: Path, campaigns: int, per_campaign: int, points: int) -> Path:
    """``campaigns`` campaigns of ``per_campaign`` diverse cells, two levels deep."""
    corpus = generate(root / "corpus", "diverse", campaigns * per_campaign, points=points)
    archive = root / "archive"
    made = 0
    for source in sorted(p for p in corpus.iterdir() if p.is_dir()):
        plan = json.loads((source / "collection-plan.json").read_text(encoding="utf-8"))
        cells = plan["cells"]
        for start in range(0, len(cells), per_campaign):
            target = archive / f"shelf-{made % 4}" / f"{source.name}-{start // per_campaign:03d}"
            chunk = cells[start:start + per_campaign]
            (target / "cells").mkdir(parents=True)
            for cell in chunk:
                shutil.move(str(source / "cells" / cell["cell_id"]),
                            str(target / "cells" / cell["cell_id"]))
            (target / "collection-plan.json").write_text(
                json.dumps({**plan, "cells": chunk}, indent=1), encoding="utf-8")
            made += 1
    shutil.rmtree(corpus)
    if made < campaigns:
        raise SystemExit(f"built {made} campaigns, fewer than {campaigns}")
    return archive


def command(archive: Path, out: Path, executor: str, jobs: int, mode: str,
            cache: Path, fmt: str) -> list[str]:
    cmd = [*kvrules_command(), "classify", str(archive), "--format", fmt, "--output",
           str(out), "--executor", executor, "--jobs", str(jobs)]
    return cmd + (["--no-cache"] if mode == "uncached" else ["--cache", str(cache)])


def measure(archive: Path, work: Path, repeat: int,
            fmt: str) -> tuple[dict[tuple[str, int, str], Run], bool]:
    """Median runs per (executor, jobs, mode), and whether every report was the same."""
    runs: dict[tuple[str, int, str], list[Run]] = {}
    reference = work / "reference.out"
    same = True
    run_process(command(archive, reference, "local", 1, "uncached", work, fmt))  # warm policies
    for n in range(repeat):
        for executor, jobs in EXECUTORS:
            cache = work / f"cache-{executor}-{jobs}-{n}"
            for mode in MODES:
                out = work / f"{executor}-{jobs}-{mode}.out"
                run = run_process(command(archive, out, executor, jobs, mode, cache, fmt))
                runs.setdefault((executor, jobs, mode), []).append(run)
                same = same and filecmp.cmp(out, reference, shallow=False)
            shutil.rmtree(cache)
    return {key: median(value) for key, value in runs.items()}, same


def report(results: dict[tuple[str, int, str], Run], cells: int, campaigns: int,
           fmt: str, same: bool, markdown: bool) -> list[str]:
    head = ["executor", "workers", "no cache s", "cold s", "warm s", "cold cells/s",
            "warm speed-up", "cold CPU s"]
    rows = []
    for executor, jobs in EXECUTORS:
        unc, cold, warm = (results[(executor, jobs, m)] for m in MODES)
        rows.append([executor, str(jobs), f"{unc.seconds:.2f}", f"{cold.seconds:.2f}",
                     f"{warm.seconds:.2f}", f"{cells / cold.seconds:.1f}",
                     f"{cold.seconds / warm.seconds:.1f}x", f"{cold.cpu:.1f}"])
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
    else:
        lines = ["  ".join(f"{h:>13}" for h in head)]
        lines += ["  ".join(f"{c:>13}" for c in r) for r in rows]
    lines.append(f"{campaigns} campaigns, {cells} cells, --format {fmt}; every report "
                 f"identical: {same}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--campaigns", type=int, default=42)
    parser.add_argument("--cells-per-campaign", type=int, default=5)
    parser.add_argument("--points", type=int, default=500)
    parser.add_argument("--format", default="text", help="the report format timed")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--markdown", action="store_true", help="print the table as markdown")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kvrules-bench-archive-") as tmp:
        work = Path(tmp)
        archive = build_archive(work, args.campaigns, args.cells_per_campaign, args.points)
        results, same = measure(archive, work, args.repeat, args.format)
        cells = args.campaigns * args.cells_per_campaign
        print("\n".join(report(results, cells, args.campaigns, args.format, same,
                                args.markdown)))


if __name__ == "__main__":
    main()
