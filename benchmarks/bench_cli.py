"""Benchmark ``kvrules classify`` the way users run it: a whole process per run.

    python benchmarks/bench_cli.py [--shapes few,diverse] [--scales 50,200,800]
                                   [--ranks 2] [--points 500] [--repeat 3] [--markdown]

For every corpus shape and scale, in the same run: the installed ``kvrules classify CORPUS
--format F --output FILE --no-cache`` for F in jsonl, json and text (the table) (start-up and
policy compilation included; without the verdict cache, which would turn every repeat into a
read of stored verdicts), and two parse-only baselines, also whole processes: read and decode
every JSON file of the corpus with the standard ``json`` module, and with the fastest decoder
installed (orjson, then msgspec). Reported: medians of ``--repeat`` runs, ratios against the stdlib
baseline, CPU seconds (the process and the children it waited for: kvrules' engine worker
runs beside it, on another core when there is one) and the peak RSS of each process
(``wait4``), then the performance targets as PASS/FAIL lines. Every command runs between two runs
of the stdlib baseline and its ratio is the median, over the repeats, of its time over the
mean of those two: on a shared machine whose speed drifts within seconds, a ratio of
medians taken minutes apart measures the drift as much as the command. Beside each ratio, in
brackets, the smallest and largest of its paired ratios, and beside the baseline its fastest
and slowest run over its median: how much one run says. ``json`` and ``text`` are compared
with ``jsonl`` run by run (each over the jsonl run of its round, the median of those), not as
a quotient of two medians, each over its own baseline runs. The default command
runs one extraction worker per core; ``jsonl -j1`` is the jsonl run without workers (the whole
pipeline in one process beside the engine), shown for comparison: the targets are for the
default command.
Nothing here is a unit test: timings depend on the machine.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus import SHAPES, generate  # noqa: E402

FORMATS = ("jsonl", "json", "text")
PARSE_STDLIB = """
import json, pathlib, sys
for p in sorted(pathlib.Path(sys.argv[1]).rglob("*.json")):
    with open(p, "rb") as fh:
        json.loads(fh.read())
"""
PARSE_FAST = {
    "orjson": """
import orjson, pathlib, sys
for p in sorted(pathlib.Path(sys.argv[1]).rglob("*.json")):
    with open(p, "rb") as fh:
        orjson.loads(fh.read())
""",
    "msgspec": """
import msgspec, pathlib, sys
decode = msgspec.json.decode
for p in sorted(pathlib.Path(sys.argv[1]).rglob("*.json")):
    with open(p, "rb") as fh:
        decode(fh.read())
""",
}


@dataclass(frozen=True)
class Run:
    """One whole-process run: wall seconds, CPU seconds of the process and the children it
    waited for (the engine worker included), and the largest peak resident memory (MiB)."""

    seconds: float
    rss_mib: float
    cpu: float = 0.0
    ratio: float = 1.0
    """Against the stdlib parse-only baseline run just before and just after it."""
    low: float = 1.0
    high: float = 1.0
    """Of a median: the smallest and largest paired ratio of its runs (of the baseline's:
    its fastest and slowest run over its median), how far one run could be from another."""
    to_jsonl: float = 0.0
    """Of a median json or text run: the median, over the rounds, of its time over the time
    of the jsonl run of the same round (0: not computed)."""


def run_process(cmd: list[str]) -> Run:
    """Run ``cmd`` to completion; its wall time and its own peak RSS (not tracemalloc)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.returncode not in (0, 1):  # 1: some cell has an evidence error (still a report)
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}:\n{err[-2000:]}")
    return Run(elapsed, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime)


def median(runs: list[Run], baseline: bool = False) -> Run:
    """The median run, with the spread of the runs (see :attr:`Run.low`)."""
    seconds = statistics.median(r.seconds for r in runs)
    spread = [r.seconds / seconds for r in runs] if baseline else [r.ratio for r in runs]
    return Run(seconds, statistics.median(r.rss_mib for r in runs),
               statistics.median(r.cpu for r in runs),
               statistics.median(r.ratio for r in runs), min(spread), max(spread))


def kvrules_command() -> list[str]:
    """The installed console script next to this interpreter (as users run it)."""
    script = Path(sys.executable).with_name("kvrules")
    if script.exists():
        return [str(script)]
    found = shutil.which("kvrules")
    if found is None:
        raise SystemExit("kvrules is not installed (pip install -e .)")
    return [found]


def fastest_decoder() -> str | None:
    for name in PARSE_FAST:
        try:
            __import__(name)
            return name
        except ImportError:
            continue
    return None


def measure(corpus: Path, out_dir: Path, repeat: int) -> dict[str, Run]:
    """Median run of each command on one corpus, interleaved so drift hits all alike."""
    commands: dict[str, list[str]] = {"parse:json": [sys.executable, "-c", PARSE_STDLIB,
                                                     str(corpus)]}
    fast = fastest_decoder()
    if fast is not None:
        commands[f"parse:{fast}"] = [sys.executable, "-c", PARSE_FAST[fast], str(corpus)]
    for fmt in FORMATS:
        commands[fmt] = kvrules_command() + ["classify", str(corpus), "--format", fmt,
                                             "--output", str(out_dir / f"report.{fmt}"),
                                             "--no-cache"]  # evaluation, not cache reads
    commands["jsonl -j1"] = commands["jsonl"] + ["--jobs", "1"]  # shown, not a target
    baseline = commands.pop("parse:json")
    runs: dict[str, list[Run]] = {name: [] for name in ["parse:json", *commands]}
    for _ in range(repeat):
        before = run_process(baseline)
        runs["parse:json"].append(before)
        for name, cmd in commands.items():  # each between two baseline runs
            run = run_process(cmd)
            after = run_process(baseline)
            runs["parse:json"].append(after)
            base = (before.seconds + after.seconds) / 2
            runs[name].append(Run(run.seconds, run.rss_mib, run.cpu, run.seconds / base))
            before = after
    out = {name: median(r, baseline=name == "parse:json") for name, r in runs.items()}
    for fmt in FORMATS[1:]:  # against jsonl run by run: a quotient of two medians of ratios
        quotients = [f.seconds / j.seconds for f, j in zip(runs[fmt], runs["jsonl"])]
        out[fmt] = replace(out[fmt], to_jsonl=statistics.median(quotients))
    return out


ROLES = ("parent", "engine worker", "extraction workers")


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _cpu_seconds(pid: int) -> float | None:
    """User plus system CPU seconds of ``pid`` so far (None once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _is_engine(pid: int) -> bool:
    """The engine worker is the one child that loads durable-rules' C engine."""
    try:
        return "durable_rules_engine" in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


def breakdown(cmd: list[str], every: float = 0.005) -> dict[str, float]:
    """CPU seconds of one run by role, read from /proc while it runs (Linux; a process's
    last few milliseconds before it ends are not seen)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seen: dict[int, float] = {}
    engines: set[int] = set()
    while proc.poll() is None:
        for pid in [proc.pid, *_children(proc.pid)]:
            cpu = _cpu_seconds(pid)
            if cpu is not None:
                seen[pid] = cpu
                if pid != proc.pid and pid not in engines and _is_engine(pid):
                    engines.add(pid)
        time.sleep(every)
    out = dict.fromkeys(ROLES, 0.0)
    for pid, cpu in seen.items():
        role = "parent" if pid == proc.pid \
            else "engine worker" if pid in engines else "extraction workers"
        out[role] += cpu
    return out


def corpus_points(cells: int, ranks: int, points: int) -> int:
    return cells * ranks * points


def report(results: dict[tuple[str, int], dict[str, Run]], markdown: bool) -> list[str]:
    """A table: per shape and scale, seconds, ratio to stdlib parse and peak RSS."""
    names = list(next(iter(results.values())))
    lines = []
    if markdown:
        lines.append("| corpus | cells | " + " | ".join(names) + " |")
        lines.append("|---|---|" + "---|" * len(names))
    for (shape, cells), runs in results.items():
        cols = [f"{r.seconds:.2f} s ({r.ratio:.2f}x {_spread(r)}, cpu {r.cpu:.2f} s, "
                f"{r.rss_mib:.0f} MiB)" for r in runs.values()]
        if markdown:
            lines.append(f"| {shape} | {cells} | " + " | ".join(cols) + " |")
        else:
            lines.append(f"{shape:8} {cells:5} cells")
            lines += [f"    {n:14} {c}" for n, c in zip(names, cols)]
    return lines


def _spread(run: Run) -> str:
    """The runs' spread as a bracketed range (``[1.49-1.71]``)."""
    return f"[{run.low:.2f}-{run.high:.2f}]"


def targets(results: dict[tuple[str, int], dict[str, Run]], points: dict[int, int]) -> list[str]:
    """The performance targets, each as a PASS/FAIL line."""
    out = []

    def check(ok: bool, text: str) -> None:
        out.append(f"{'PASS' if ok else 'FAIL'}  {text}")

    for (shape, cells), runs in results.items():
        jsonl = runs["jsonl"].ratio
        check(jsonl <= 1.5, f"{shape}/{cells}: jsonl {jsonl:.2f}x stdlib parse, runs "
              f"{_spread(runs['jsonl'])}, baseline runs {_spread(runs['parse:json'])} of "
              "their median (target <= 1.5x)")
        for fmt in FORMATS[1:]:
            ratio = runs[fmt].to_jsonl
            check(ratio <= 1.15, f"{shape}/{cells}: {fmt} {ratio:.2f}x jsonl, run by run "
                  "(target <= 1.15x)")
        peak = max(runs[f].rss_mib for f in FORMATS)
        check(peak <= 150, f"{shape}/{cells}: peak RSS {peak:.0f} MiB (target <= 150 MiB)")
    for shape in sorted({s for s, _ in results}):
        scales = sorted(c for s, c in results if s == shape)
        if len(scales) < 2:
            continue
        lo, hi = scales[0], scales[-1]
        per_lo = results[(shape, lo)]["jsonl"].seconds / points[lo]
        per_hi = results[(shape, hi)]["jsonl"].seconds / points[hi]
        check(per_hi <= 1.25 * per_lo, f"{shape}: jsonl time per point at {hi} cells is "
              f"{per_hi / per_lo:.2f}x that at {lo} cells (linear: <= 1.25x)")
        rss_lo = max(results[(shape, lo)][f].rss_mib for f in FORMATS)
        rss_hi = max(results[(shape, hi)][f].rss_mib for f in FORMATS)
        check(rss_hi <= 1.2 * rss_lo, f"{shape}: peak RSS {rss_lo:.0f} MiB at {lo} cells, "
              f"{rss_hi:.0f} MiB at {hi} cells (flat: <= 1.2x)")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--scales", default="50,200,800")
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--points", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--markdown", action="store_true", help="print the table as markdown")
    parser.add_argument("--breakdown", action="store_true",
                        help="also run jsonl once more per corpus and print its CPU seconds "
                             "by process (parent, engine worker, extraction workers; Linux)")
    args = parser.parse_args()
    scales = [int(s) for s in args.scales.split(",")]
    results: dict[tuple[str, int], dict[str, Run]] = {}
    split: dict[tuple[str, int], dict[str, float]] = {}
    points = {c: corpus_points(c, args.ranks, args.points) for c in scales}
    with tempfile.TemporaryDirectory(prefix="kvrules-bench-") as tmp:
        for shape in args.shapes.split(","):
            for cells in scales:
                corpus = generate(Path(tmp) / f"{shape}-{cells}", shape, cells, args.ranks,
                                  args.points)
                os.sync()  # the corpus on disk now: its writeback is not timed with a run
                out_dir = Path(tmp) / f"out-{shape}-{cells}"
                out_dir.mkdir()
                results[(shape, cells)] = measure(corpus, out_dir, args.repeat)
                if args.breakdown:
                    split[(shape, cells)] = breakdown(kvrules_command() + [
                        "classify", str(corpus), "--format", "jsonl", "--output",
                        str(out_dir / "report.jsonl"), "--no-cache"])
                shutil.rmtree(corpus)
    print(f"kvrules classify as a whole process; {args.ranks} ranks x {args.points} points "
          f"per cell; medians of {args.repeat}; python {sys.version.split()[0]}, "
          f"{os.cpu_count()} CPUs")
    print("\n".join(report(results, args.markdown)))
    print("\n".join(targets(results, points)))
    for (shape, cells), roles in split.items():
        print(f"jsonl CPU seconds by process, {shape}/{cells}: " + ", ".join(
            f"{role} {seconds:.2f}" for role, seconds in roles.items()))


if __name__ == "__main__":
    main()
