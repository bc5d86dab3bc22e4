"""Output mutants: random ``--output`` destinations for the commands that write.

A campaign mutant changes the evidence; an output mutant keeps clean evidence and changes
where the report goes: inside or over an input, a folder holding the inputs, ``.``, ``..``,
a folder with someone's files (with and without ``--overwrite``), a kvrules dataset written
by an earlier run, a missing, read-only or file parent, ``/proc``. The oracle
(:func:`judge`) insists that no input byte changes, that nothing appears or vanishes outside
the output path, that a refusal changes nothing at all, that a folder kvrules did not write
is kept without ``--overwrite``, and that the exit status is 0 or 2 with no traceback.

Mutant ``I`` of seed ``S`` is an output mutant when :func:`chosen` says so (its own random
stream, so the campaign and rule mutants of other indices are the same as without this
class); everything else is drawn from ``random.Random("kvrules-fuzz-output:S:I")``.
"""
from __future__ import annotations

import hashlib
import os
import random
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .mutations import EXAMPLES, remove_tree
from .oracle import Finding, Run, check

OUTPUT_SHARE = 0.2
"""About this share of the mutant indices are output mutants."""

CAMPAIGNS = ("dense-legacy-stamp-format", "moe-tp-approved-skip")
"""Clean campaigns (every command exits 0 on them): an exit 1 would be a wrong verdict."""

DATASET_MARKER = ".kvrules-dataset"
"""kvrules' mark of a dataset it wrote (kvrules.verdicts.dataset.MARKER), spelled here so the
harness builds its mutants whatever state kvrules is in."""

OUTPUT_CLASSES = ("inputs_changed", "stray_files", "foreign_lost")
"""Failure classes only output mutants show."""


def output_random(seed: int, index: int) -> random.Random:
    return random.Random(f"kvrules-fuzz-output:{seed}:{index}")


def chosen(seed: int, index: int) -> bool:
    """Whether mutant ``index`` of ``seed`` is an output mutant."""
    return random.Random(f"kvrules-fuzz-output-share:{seed}:{index}").random() < OUTPUT_SHARE


@dataclass
class OutputMutant:
    index: int
    folder: Path  # holds in/ (the inputs) and out/ (the working folder)
    argv: list[str]  # kvrules arguments, run in out/
    output: str  # the --output as given (relative to out/)
    runs: int  # 2: the same command twice (the second replaces what the first wrote)
    evidence: str  # the inputs, relative to folder: "in" or "in/<campaign>"
    descriptions: list[str] = field(default_factory=list)

    @property
    def cwd(self) -> Path:
        return self.folder / "out"

    @property
    def inputs(self) -> Path:
        return self.folder / "in"


def _setup(folder: Path) -> None:
    """in/ with the clean campaigns; out/ with a foreign folder, a file, a read-only folder
    and a kvrules dataset (as kvrules marks one)."""
    for name in CAMPAIGNS:
        shutil.copytree(EXAMPLES / name, folder / "in" / name)
    out = folder / "out"
    (out / "foreign").mkdir(parents=True)
    (out / "foreign" / "thesis.txt").write_text("notes\n", encoding="utf-8")
    (out / "afile").write_text("x\n", encoding="utf-8")
    (out / "dataset").mkdir()
    (out / "dataset" / DATASET_MARKER).write_text("written by kvrules\n", encoding="utf-8")
    (out / "ro").mkdir()
    (out / "ro").chmod(0o555)


def _destinations(folder: Path, campaign: str) -> dict[str, list[str]]:
    """Destinations by kind, relative to out/ (or absolute); ``campaign`` is an input."""
    camp = f"../in/{campaign}"
    cell = next(p.name for p in (folder / "in" / campaign / "cells").iterdir())
    return {
        "inside an input": [f"{camp}/collection-plan.json", f"{camp}/cells/{cell}/raw/x.json",
                            f"{camp}/new.json", f"{camp}/cells", "../in/x.json"],
        "over an input": [camp, "../in", f"{camp}/cells/{cell}"],
        "holding the inputs": ["..", "../in", str(folder)],
        "the current folder": ["."],
        "a foreign folder": ["foreign"],
        "a kvrules dataset": ["dataset"],
        "an unwritable parent": ["ro/x.json", "missing/x.json", "afile/x.json", "/proc/x.json"],
        "a new path": ["new.json", "new.parquet"],
    }


def _command(rnd: random.Random, inputs: str, output: str) -> tuple[list[str], str]:
    """A command that writes ``output``, and its label."""
    fmt = rnd.choice(["text", "json", "jsonl", "github", "parquet"])
    commands = {
        "classify": ["classify", inputs, "-f", fmt],
        "readiness": ["readiness", inputs],
        "aggregate": ["aggregate", inputs],
        "diff": ["diff", inputs, "-f", rnd.choice(["text", "json"])],
    }
    name = rnd.choice(sorted(commands))
    argv = commands[name] + ["-o", output, "--jobs", "1"]
    if name == "classify" and rnd.random() < 0.4:
        argv.append("--overwrite")
    return argv, name


def build_output_mutant(seed: int, index: int, workdir: Path) -> OutputMutant:
    """Create output mutant ``index`` of ``seed`` in ``workdir/m<index>`` (removed first)."""
    rnd = output_random(seed, index)
    folder = workdir / f"m{index:05d}"
    if folder.exists() or folder.is_symlink():
        remove_output_mutant(folder)
    _setup(folder)
    inputs = rnd.choice(["../in", f"../in/{CAMPAIGNS[0]}", f"../in/{CAMPAIGNS[1]}"])
    campaign = CAMPAIGNS[0] if inputs == "../in" else Path(inputs).name
    kinds = _destinations(folder, campaign)
    kind = rnd.choice(sorted(kinds))
    output = rnd.choice(kinds[kind])
    argv, name = _command(rnd, inputs, output)
    runs = 2 if rnd.random() < 0.25 else 1
    text = f"{name} --output {output} ({kind}), inputs {inputs}, run {runs}x: {' '.join(argv)}"
    return OutputMutant(index, folder, argv, output, runs, inputs[len("../"):],
                        [f"output: {text}"])


def remove_output_mutant(folder: Path) -> None:
    """Remove a mutant, its read-only folders made writable first."""
    for dirpath, dirnames, _ in os.walk(folder):
        for name in dirnames:
            path = Path(dirpath, name)
            if not path.is_symlink():
                path.chmod(path.stat().st_mode | stat.S_IWUSR | stat.S_IXUSR)
    remove_tree(folder)


def digests(folder: Path) -> dict[str, str]:
    """sha256 (or kind) of every entry below ``folder``, by path relative to it."""
    out: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            path = Path(dirpath, name)
            rel = path.relative_to(folder).as_posix()
            if path.is_symlink():
                out[rel] = "link:" + os.readlink(path)
            elif path.is_dir():
                out[rel] = "dir"
            else:
                try:
                    out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
                except OSError as exc:
                    out[rel] = f"unreadable: {exc.strerror}"
    return out


def _under(folder: Path, rel: str, output: Path) -> bool:
    """Whether the entry ``rel`` of ``folder`` is the output path or inside it."""
    return Path(os.path.realpath(folder / rel)).is_relative_to(output) \
        or Path(os.path.abspath(folder / rel)).is_relative_to(output)


def judge(run: Run, mutant: OutputMutant, before: dict[str, str],
          after: dict[str, str]) -> list[Finding]:
    """The oracle of one output run: the common checks, then inputs, strays and status."""
    out = check(run)
    if not run.timed_out and run.returncode not in (0, 2, None):
        out.append(Finding("bad_exit", f"{run.label}: exit status {run.returncode} (0 or 2 "
                                       "expected: the evidence is clean)"))
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    given = mutant.evidence
    inputs = [k for k in changed if k == given or k.startswith(given + "/")]
    if inputs:
        out.append(Finding("inputs_changed", f"{run.label}: input entries changed: "
                                             + ", ".join(inputs[:5])))
    target = Path(os.path.realpath(mutant.cwd / mutant.output))
    allowed = [] if run.returncode == 2 else [k for k in changed if _under(mutant.folder, k,
                                                                          target)]
    foreign = [k for k in changed if k == "out/foreign" or k.startswith("out/foreign/")]
    if foreign and "--overwrite" not in mutant.argv:
        out.append(Finding("foreign_lost", f"{run.label}: a folder kvrules did not write "
                                           "changed without --overwrite: "
                                           + ", ".join(foreign[:5])))
    stray = [k for k in changed if k not in inputs and k not in allowed]
    if stray:
        when = "a refusal changed" if run.returncode == 2 else "outside the output"
        out.append(Finding("stray_files", f"{run.label}: {when}: " + ", ".join(stray[:5])))
    return out


def run_output_mutant(mutant: OutputMutant, timeout: float,
                      runner: Callable[..., Run]) -> tuple[list[Run], list[Finding]]:
    """Run the mutant's command (once or twice) and judge every run."""
    runs: list[Run] = []
    findings: list[Finding] = []
    for n in range(mutant.runs):
        before = digests(mutant.folder)
        run = runner(f"output run {n + 1}", mutant.argv, timeout, mutant.cwd, False)
        after = digests(mutant.folder)
        runs.append(run)
        findings.extend(judge(run, mutant, before, after))
    return runs, findings
