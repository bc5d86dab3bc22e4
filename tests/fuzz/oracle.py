"""The oracle: what every kvrules process must satisfy, whatever its input."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"

CLASSES = ("signals", "tracebacks", "hangs", "bad_exit", "invalid_report", "eligible_in_error",
           "lost_cells")


@dataclass
class Run:
    """One finished kvrules process."""

    label: str  # e.g. "classify" or "rules check"
    argv: list[str]
    returncode: int | None  # None: killed after the timeout
    stdout: str
    stderr: str
    report_expected: bool = False  # --format json on stdout
    timed_out: bool = False
    seconds: float = 0.0


@dataclass
class Finding:
    cls: str
    detail: str


@dataclass
class Expectation:
    """Cells (campaign name, cell_id) that must still be reported with a status."""

    cells: set[tuple[str, str]] = field(default_factory=set)
    root: str | None = None  # the path given to classify, to name campaigns relative to it


@lru_cache(maxsize=1)
def report_validator() -> Draft202012Validator:
    """The shipped report schema, loaded as tests/verdict_samples.py does."""
    report = json.loads((SCHEMAS / "report.schema.json").read_text(encoding="utf-8"))
    try:
        from referencing import Registry, Resource
        record = json.loads((SCHEMAS / "report-record.schema.json").read_text(encoding="utf-8"))
        registry = Registry().with_resources(
            [(s["$id"], Resource.from_contents(s)) for s in (report, record)])
        return Draft202012Validator(report, registry=registry)
    except ImportError:  # pragma: no cover - jsonschema < 4.18
        return Draft202012Validator(report)


def campaign_name(campaign: str, root: str | None) -> str:
    """The campaign folder name of a report's ``campaign`` label."""
    if root is not None:
        prefix = root.rstrip("/") + "/"
        if campaign.startswith(prefix):
            return campaign[len(prefix):]
    return Path(campaign).name


def check(run: Run, expect: Expectation | None = None) -> list[Finding]:
    """Every violation of the oracle by one process (empty: it behaved)."""
    out: list[Finding] = []
    if run.timed_out:
        out.append(Finding("hangs", f"{run.label}: no exit within the timeout ({run.seconds:.1f}s)"))
        return out
    rc = run.returncode
    if rc is not None and rc < 0:
        out.append(Finding("signals", f"{run.label}: killed by signal {-rc}"))
    if "Traceback" in run.stderr:
        out.append(Finding("tracebacks", f"{run.label}: Traceback in stderr"))
    if rc is not None and rc >= 0 and rc not in (0, 1, 2):
        out.append(Finding("bad_exit", f"{run.label}: exit status {rc}"))
    crashed = any(f.cls == "tracebacks" for f in out) and not run.stdout.strip()
    if run.report_expected and rc in (0, 1) and not crashed:  # a crash is counted once
        out.extend(check_report(run, expect))
    return out


def check_report(run: Run, expect: Expectation | None) -> list[Finding]:
    try:
        doc = json.loads(run.stdout)
    except ValueError as exc:
        return [Finding("invalid_report", f"{run.label}: stdout is not JSON: {exc}")]
    out: list[Finding] = []
    errors = sorted(report_validator().iter_errors(doc), key=lambda e: list(e.absolute_path))
    if errors:
        first = errors[0]
        where = "/" + "/".join(map(str, first.absolute_path))
        out.append(Finding("invalid_report",
                           f"{run.label}: {len(errors)} schema error(s), first at {where}: "
                           f"{first.message[:200]}"))
    # the semantic checks run on schema-invalid reports too, as far as their shape allows
    cells = doc.get("cells") if isinstance(doc, dict) else None
    seen: set[tuple[str, str]] = set()
    for cell in cells if isinstance(cells, list) else []:
        if not isinstance(cell, dict):
            continue
        campaign, cell_id = str(cell.get("campaign")), str(cell.get("cell_id"))
        if cell.get("status") in ("ok", "error"):
            seen.add((campaign_name(campaign, expect.root if expect else None), cell_id))
        points = cell.get("points")
        if cell.get("status") == "error" and isinstance(points, list):
            bad = [p.get("benchmark_id") for p in points
                   if isinstance(p, dict) and p.get("eligible") is True]
            if bad:
                out.append(Finding("eligible_in_error",
                                   f"{run.label}: error cell {campaign}/{cell_id}"
                                   f" has eligible points {bad[:5]}"))
    if expect is not None:
        lost = sorted(expect.cells - seen)
        if lost:
            out.append(Finding("lost_cells",
                               f"{run.label}: untouched cells not reported (or without status): "
                               + ", ".join(f"{c}/{i}" for c, i in lost)))
    return out
