"""Run the mutation fuzz harness: ``python -m tests.fuzz --mutants N --seed S``.

Also runnable as a script from the repository root: ``python tests/fuzz/run.py ...``.
Each mutant is a pure function of ``(seed, index)``; reproduce one with ``--seed S --only I``.
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make ``tests.fuzz`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tests.fuzz import bounds, mutations as mut  # noqa: E402
    from tests.fuzz import outputs  # noqa: E402
    from tests.fuzz.oracle import CLASSES, Expectation, Finding, Run, check  # noqa: E402
    from tests.fuzz.cache_tamper import CACHE_CLASSES, fuzz_cache  # noqa: E402
else:
    from . import bounds, mutations as mut
    from . import outputs
    from .oracle import CLASSES, Expectation, Finding, Run, check
    from .cache_tamper import CACHE_CLASSES, fuzz_cache

MEMORY_LIMIT = 2 * 1024 ** 3  # address space of one kvrules process (a /dev/zero read stops here)
ALL_CLASSES = CLASSES + outputs.OUTPUT_CLASSES + CACHE_CLASSES + ("harness_errors",)


@dataclass
class MutantResult:
    seed: int
    index: int
    kind: str
    descriptions: list[str]
    runs: list[Run] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    kept: Path | None = None

    @property
    def failed(self) -> bool:
        return bool(self.findings)


@dataclass
class FuzzResult:
    seed: int
    results: list[MutantResult]
    seconds: float

    def counts(self) -> dict[str, int]:
        """Mutants showing each failure class (a mutant counts once per class)."""
        out = {c: 0 for c in ALL_CLASSES}
        for r in self.results:
            for c in {f.cls for f in r.findings}:
                out[c] += 1
        return out

    @property
    def failures(self) -> list[MutantResult]:
        return [r for r in self.results if r.failed]


def baseline_cells() -> dict[str, set[str]]:
    """Cells of every pristine example campaign: folders under cells/ (plans name the same)."""
    out: dict[str, set[str]] = {}
    for campaign in sorted(p for p in mut.EXAMPLES.iterdir() if p.is_dir()):
        cells = campaign / "cells"
        out[campaign.name] = {c.name for c in cells.iterdir() if c.is_dir()} if cells.is_dir() \
            else set()
    return out


def untouched(touched: set[tuple[str, str]]) -> set[tuple[str, str]]:
    """Baseline cells that no mutation touched (``*`` touches a campaign or everything)."""
    if mut.ALL in touched:
        return set()
    out = set()
    for campaign, cells in baseline_cells().items():
        if (campaign, "*") in touched:
            continue
        out |= {(campaign, c) for c in cells if (campaign, c) not in touched}
    return out


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def run_kvrules(label: str, args: list[str], timeout: float, cwd: Path,
                report_expected: bool, env: dict[str, str] | None = None) -> Run:
    """One whole kvrules process, killed (with its process group) after ``timeout`` seconds
    (``env``: variables set for it on top of this process's)."""
    argv = [sys.executable, "-m", "kvrules", *args]
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", COLUMNS="120", **(env or {}))
    start = time.monotonic()
    proc = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, start_new_session=True,
                            preexec_fn=_limits)
    timed_out = False
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, err = proc.communicate()
    return Run(label=label, argv=argv, returncode=None if timed_out else proc.returncode,
               stdout=out.decode("utf-8", "replace"), stderr=err.decode("utf-8", "replace"),
               report_expected=report_expected, timed_out=timed_out,
               seconds=time.monotonic() - start)


def fuzz_one(seed: int, index: int, workdir: Path, timeout: float,
             keep: Path | None) -> MutantResult:
    """Build, run and judge mutant ``index``; the mutant folder is removed (or kept) after."""
    if outputs.chosen(seed, index):
        return fuzz_output(seed, index, workdir, timeout, keep)
    try:
        mutant = mut.build_mutant(seed, index, workdir)
    except Exception:  # a bug of the harness, not of kvrules: report it, go on
        return MutantResult(seed, index, "?", ["<mutant could not be built>"],
                            findings=[Finding("harness_errors", traceback.format_exc())])
    result = MutantResult(seed, index, mutant.kind, mutant.descriptions)
    folder = str(mutant.folder)
    if mutant.kind == "rules":
        cell = sorted(baseline_cells()[mut.RULES_CAMPAIGN.name])
        runs = [
            (run_kvrules("rules check", ["rules", "check", folder], timeout, workdir, False),
             None),
            (run_kvrules("classify --rules",
                         ["classify", str(mut.RULES_CAMPAIGN), "--rules", folder,
                          "--format", "json"], timeout, workdir, True),
             Expectation({(mut.RULES_CAMPAIGN.name, c) for c in cell})),
        ]
    else:
        runs = [(run_kvrules("classify", ["classify", folder, "--format", "json"], timeout,
                             workdir, True),
                 Expectation(untouched(mutant.touched), root=folder))]
    for run, expect in runs:
        result.runs.append(run)
        result.findings.extend(check(run, expect))
        result.findings.extend(bounds.check(mutant.descriptions, run))
    if result.failed and keep is not None:
        dest = keep / f"seed{seed}-m{index:05d}"
        if dest.exists():
            mut.remove_tree(dest)
        mut.copy_tree(mutant.folder, dest / mutant.kind)
        (dest / "README.txt").write_text(describe(result, with_stderr=40), encoding="utf-8")
        result.kept = dest
    mut.remove_tree(mutant.folder)
    return result


def fuzz_output(seed: int, index: int, workdir: Path, timeout: float,
                keep: Path | None) -> MutantResult:
    """Build, run and judge output mutant ``index`` (see :mod:`tests.fuzz.outputs`)."""
    try:
        mutant = outputs.build_output_mutant(seed, index, workdir)
        runs, findings = outputs.run_output_mutant(mutant, timeout, run_kvrules)
    except Exception:  # a bug of the harness, not of kvrules: report it, go on
        return MutantResult(seed, index, "output", ["<output mutant could not be run>"],
                            findings=[Finding("harness_errors", traceback.format_exc())])
    result = MutantResult(seed, index, "output", mutant.descriptions, runs, findings)
    if result.failed and keep is not None:
        dest = keep / f"seed{seed}-m{index:05d}"
        if dest.exists():
            mut.remove_tree(dest)
        mut.copy_tree(mutant.folder, dest / "output")
        (dest / "README.txt").write_text(describe(result, with_stderr=40), encoding="utf-8")
        result.kept = dest
    outputs.remove_output_mutant(mutant.folder)
    return result


def fuzz(mutants: int, seed: int, jobs: int = 1, timeout: float = 20.0,
         keep: Path | None = None, only: list[int] | None = None) -> FuzzResult:
    """Run mutants ``0..mutants-1`` (or only the indices given) of ``seed``."""
    indices = only if only else list(range(mutants))
    start = time.monotonic()
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kvrules-fuzz-") as tmp:
        workdir = Path(tmp)
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            results = list(pool.map(lambda i: fuzz_one(seed, i, workdir, timeout, keep),
                                    indices))
    return FuzzResult(seed, results, time.monotonic() - start)


def describe(r: MutantResult, with_stderr: int = 8) -> str:
    lines = [f"seed {r.seed} mutant {r.index} ({r.kind}): "
             + ", ".join(sorted({f.cls for f in r.findings})),
             f"  reproduce: python -m tests.fuzz --seed {r.seed} --only {r.index} --keep DIR"]
    lines += [f"  mutation: {d}" for d in r.descriptions]
    lines += [f"  finding: {f.cls}: {f.detail.strip().splitlines()[-1] if f.cls == 'harness_errors' else f.detail}"
              for f in r.findings]
    for run in r.runs:
        status = "timeout" if run.timed_out else f"exit {run.returncode}"
        lines.append(f"  {run.label}: {status} in {run.seconds:.1f}s: "
                     + " ".join(run.argv[1:]))
        err = run.stderr.strip().splitlines()
        tail = [l for l in err if l.strip()]
        if "Traceback" in run.stderr:  # the exception line says most
            at = max(i for i, line in enumerate(err) if line.startswith("Traceback"))
            ours = [line for line in err[at:] if line.lstrip().startswith("File ")
                    and ("/engine/" in line or "kvrules" in line)]
            tail = err[at:at + 1] + ours[-1:] + ["  ..."] + err[-3:] if len(err) - at > 6 \
                else err[at:]
        for line in tail[:with_stderr]:
            lines.append(f"    | {line[:300]}")
    if r.kept is not None:
        lines.append(f"  kept: {r.kept}")
    return "\n".join(lines)


def summary(res: FuzzResult) -> str:
    counts = res.counts()
    head = ["mutants", "failing", *[c.replace("_", " ") for c in ALL_CLASSES]]
    vals = [len(res.results), len(res.failures), *[counts[c] for c in ALL_CLASSES]]
    widths = [max(len(h), len(str(v))) for h, v in zip(head, vals)]
    fmt = " | ".join(f"{{:>{w}}}" for w in widths)
    return "\n".join([fmt.format(*head), "-+-".join("-" * w for w in widths), fmt.format(*vals),
                      f"seed {res.seed}, {res.seconds:.1f}s"])


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mutants", type=int, default=100, help="number of mutants (indices 0..N-1)")
    p.add_argument("--seed", type=int, default=0, help="seed; mutant I of seed S is always the same")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="mutants run in parallel")
    p.add_argument("--timeout", type=float, default=20.0, help="seconds per kvrules process")
    p.add_argument("--keep", type=Path, default=None, help="copy failing mutants into DIR")
    p.add_argument("--only", type=lambda s: [int(x) for x in s.split(",") if x],
                   default=None, help="run only these mutant indices (comma separated)")
    p.add_argument("--list", action="store_true", help="print the mutations, run nothing")
    p.add_argument("--cache-mutants", type=int, default=0,
                   help="also run this many cache mutants (tampered cache folders)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.list:
        with tempfile.TemporaryDirectory(prefix="kvrules-fuzz-") as tmp:
            for i in args.only or range(args.mutants):
                if outputs.chosen(args.seed, i):
                    o = outputs.build_output_mutant(args.seed, i, Path(tmp))
                    print(f"{i} (output): " + "; ".join(o.descriptions))
                    outputs.remove_output_mutant(o.folder)
                    continue
                m = mut.build_mutant(args.seed, i, Path(tmp))
                print(f"{i} ({m.kind}): " + "; ".join(m.descriptions))
                mut.remove_tree(m.folder)
        return 0
    with tempfile.TemporaryDirectory(prefix="kvrules-fuzz-cache-") as cache:
        os.environ.setdefault("KVRULES_CACHE_DIR", cache)  # this run's, not the user's
        res = fuzz(args.mutants, args.seed, args.jobs, args.timeout, args.keep, args.only)
    if args.cache_mutants:
        cached = fuzz_cache(args.cache_mutants, args.seed, args.jobs, args.timeout)
        res = FuzzResult(res.seed, res.results + cached.results, res.seconds + cached.seconds)
    for r in res.failures:
        print(describe(r))
        print()
    print(summary(res))
    return 1 if res.failures else 0


if __name__ == "__main__":
    sys.exit(main())
