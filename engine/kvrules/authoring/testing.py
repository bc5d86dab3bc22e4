"""``kvrules rules test``: run table-driven policy cases, compare, and measure coverage.

The runner yields one :class:`CaseResult` per case and feeds every evaluated case to a
:class:`~kvrules.authoring.coverage.Coverage` tracer; reporters (``testing_report``) only
consume those values. Each case is classified exactly as ``classify`` would classify it
(:func:`kvrules.authoring.explain.joins.trace_cell`), so a passing case is a claim about the product.
Cases that go through the extractor (overlays and artifact folders) also feed a second
tracer, so the report shows how much of the policy real evidence alone covers.
"""
from __future__ import annotations

from dataclasses import dataclass

from typing import Any, Iterator, Literal

from kvrules.artifacts.discover import discover
from kvrules.artifacts.load import load_cell
from kvrules.authoring.cases import FORMS, RULE_TEST_ERROR, Case, find_test_files, load_cases
from kvrules.authoring.coverage import Coverage, CoverageReport
from kvrules.authoring.explain.joins import Traced, trace_cell
from kvrules.authoring.overlay import EditError, overlay_cell
from kvrules.diagnostics import Diagnostic, KvrulesUsageError
from kvrules.facts.extract import extract_cell
from kvrules.facts.model import CellFacts
from kvrules.policy.compiled import CompiledPolicy
from kvrules.pipeline import compile_policy
from kvrules.verdicts.model import CellVerdict, PointVerdict

Status = Literal["pass", "fail", "skip"]
POINT_KEYS = {"regime": "kv_seed_regime", "eligible": "eligible", "status": "status",
              "decided_by": "decided_by"}
CELL_KEYS = ("status", "errors", "points", "regime", "eligible", "decided_by")


@dataclass(frozen=True)
class Mismatch:
    """One expected value that differed: where (``points.2.regime``), want, got, context."""

    path: str
    want: Any
    got: Any
    context: str = ""


@dataclass(frozen=True)
class CaseResult:
    """The outcome of one case."""

    file: str
    line: int
    note: str
    status: Status
    mismatches: tuple[Mismatch, ...] = ()
    todo: str = ""
    form: str = "facts"
    """How the case gives its cell: ``overlay``, ``artifacts`` or ``facts``."""


@dataclass(frozen=True)
class PolicyTestRun:
    """All results of a run and its coverage; ``exit_code`` applies the thresholds."""

    source: str
    results: tuple[CaseResult, ...]
    coverage: CoverageReport
    extractor_coverage: CoverageReport | None = None
    """Coverage by the cases that go through the extractor alone (overlays, artifacts)."""

    def forms(self) -> dict[str, int]:
        """How many cases of each form (``overlay``, ``artifacts``, ``facts``) ran."""
        return {f: sum(1 for r in self.results if r.form == f) for f in FORMS}

    def counts(self) -> dict[str, int]:
        return {s: sum(1 for r in self.results if r.status == s) for s in ("pass", "fail",
                                                                            "skip")}

    def below(self, min_rules: float, min_conditions: float) -> list[str]:
        """Sentences for each coverage figure below its threshold (percent)."""
        out = []
        if self.coverage.rule_percent < min_rules:
            out.append(f"rule coverage {self.coverage.rule_percent:.1f}% is below {min_rules:g}%")
        if self.coverage.condition_percent < min_conditions:
            out.append(f"condition coverage {self.coverage.condition_percent:.1f}% is below "
                       f"{min_conditions:g}%")
        return out

    def exit_code(self, min_rules: float = 0, min_conditions: float = 0) -> int:
        """0 all passed and coverage met, 1 a case failed or coverage is below a threshold."""
        failed = self.counts()["fail"] or self.below(min_rules, min_conditions)
        return 1 if failed else 0


class Policies:
    """Compiled policies by parameter values (compiled once each)."""

    def __init__(self, source: str | None) -> None:
        self.source = source
        self._compiled: dict[tuple[tuple[str, bool], ...], CompiledPolicy] = {}

    def get(self, params: dict[str, bool]) -> CompiledPolicy:
        key = tuple(sorted(params.items()))
        if key not in self._compiled:
            self._compiled[key] = compile_policy(self.source, params or None)
        return self._compiled[key]


def run_policy_tests(policy: str | None = None, tests: str | None = None) -> PolicyTestRun:
    """Load the policy and its test files, run every case, and report coverage."""
    policies = Policies(policy)
    base = policies.get({})
    cases = load_cases(find_test_files(policy, tests))
    check_wants(base, cases)
    coverage, extracted = Coverage(base.policy), Coverage(base.policy)
    results = tuple(iter_results(policies, cases, coverage, extracted))
    return PolicyTestRun(policy or "rules", results, coverage.report(), extracted.report())


def check_wants(cp: CompiledPolicy, cases: list[Case]) -> None:
    """Expectations may only name qualification groups and parameters the policy has."""
    problems = []
    for case in cases:
        unknown = [k for k in case.want if k not in CELL_KEYS
                   and k not in cp.policy.qualifications]
        unknown += [f"params.{k}" for k in case.params if k not in cp.policy.parameters]
        if unknown:
            problems.append(Diagnostic(case.file, case.line, 1, f"case '{case.note}': unknown "
                                       f"{', '.join(unknown)}", RULE_TEST_ERROR))
    if problems:
        raise KvrulesUsageError("invalid policy test files", problems)


def iter_results(policies: Policies, cases: list[Case], coverage: Coverage | None = None,
                 extracted: Coverage | None = None) -> Iterator[CaseResult]:
    """Run the cases in order, yielding each result as soon as it is known; ``extracted``
    records only the cases that go through the extractor."""
    for case in cases:
        if case.todo is not None:
            yield CaseResult(case.file, case.line, case.note, "skip", todo=case.todo,
                             form=case.form)
            continue
        traced = trace_cell(policies.get(case.params), case_cell(case))
        for tracer in (coverage, extracted if case.form != "facts" else None):
            if tracer is not None:
                tracer.record(traced)
        found = tuple(compare(case.want, traced))
        yield CaseResult(case.file, case.line, case.note, "fail" if found else "pass", found,
                         form=case.form)


def case_cell(case: Case) -> CellFacts:
    """The case's cell: its compact facts, its overlay on an example campaign, or its
    artifact folder, the last two read like ``classify``."""
    if case.cell is not None:
        return case.cell
    if case.overlay is not None:
        try:
            return overlay_cell(case.overlay)
        except EditError as exc:
            raise KvrulesUsageError(f"{case.file}:{case.line}: case '{case.note}': "
                                    f"{exc}") from None
    assert case.artifacts is not None
    refs = discover([str(case.artifacts)], str(case.plan) if case.plan else None)
    chosen = [r for r in refs if case.cell_id in (None, r.cell_id)]
    if len(chosen) != 1:
        names = ", ".join(r.cell_id for r in refs) or "none"
        raise KvrulesUsageError(f"{case.file}:{case.line}: case '{case.note}' needs exactly "
                                f"one cell of {case.artifacts} (cells: {names}); use 'cell:'")
    return extract_cell(load_cell(chosen[0]))


def compare(want: dict[str, Any], traced: Traced) -> Iterator[Mismatch]:
    """Every expectation that the verdict does not meet, in a stable order."""
    v = traced.verdict
    if "status" in want and want["status"] != v.status:
        yield Mismatch("status", want["status"], v.status, _error_context(v))
    if "errors" in want:
        got = sorted({e.code for e in v.errors})
        if sorted(want["errors"]) != got:
            yield Mismatch("errors", sorted(want["errors"]), got, _error_context(v))
    for group, q_want in want.items():
        if group not in CELL_KEYS:
            yield from _qualification(group, q_want, v)
    shared = {k: want[k] for k in POINT_KEYS if k in want and k != "status"}
    points = {p.benchmark_id: p for p in v.points}
    wanted = {int(k): {**shared, **w} for k, w in want.get("points", {}).items()}
    for bid in sorted((set(points) if shared else set()) | set(wanted)):
        yield from _point(bid, {**shared, **wanted.get(bid, {})}, points.get(bid))


def _qualification(group: str, want: dict[str, Any], v: CellVerdict) -> Iterator[Mismatch]:
    q = v.qualifications.get(group)
    reasons = "; ".join(f"{f.id}: {f.reason}" for f in q.failed) if q else ""
    if "eligible" in want and (q is None or q.eligible != want["eligible"]):
        yield Mismatch(f"{group}.eligible", want["eligible"], q.eligible if q else None,
                       reasons)
    if "failed" in want:
        got = sorted({f.id for f in q.failed}) if q else []
        if sorted(want["failed"]) != got:
            yield Mismatch(f"{group}.failed", sorted(want["failed"]), got, reasons)


def _point(bid: int, want: dict[str, Any], p: PointVerdict | None) -> Iterator[Mismatch]:
    if p is None:
        yield Mismatch(f"points.{bid}", "present", "absent")
        return
    context = f"decided by {p.decided_by}; fired: {', '.join(p.trace) or 'nothing'}"
    for key, attr in POINT_KEYS.items():
        if key in want and want[key] != getattr(p, attr):
            yield Mismatch(f"points.{bid}.{key}", want[key], getattr(p, attr), context)


def _error_context(v: CellVerdict) -> str:
    return "; ".join(f"{e.code}: {e.message}" for e in v.errors)
