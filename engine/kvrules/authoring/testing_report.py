"""Reporters for ``rules test``: ``pretty`` for people, ``json`` for tools. Pure functions.

A failure reads as a diff: one line per expectation that differed, ``want`` against ``got``,
then what the engine did (which rule decided, which rules fired, the failed conditions or
the error messages) so the author sees *why* without re-running anything.
"""
from __future__ import annotations

import json
from typing import Any

from kvrules.authoring.coverage import CoverageReport
from kvrules.authoring.render import plural
from kvrules.authoring.testing import CaseResult, Mismatch, PolicyTestRun


def _value(v: Any) -> str:
    return json.dumps(v, ensure_ascii=False)


def mismatch_lines(mismatches: tuple[Mismatch, ...]) -> list[str]:
    """``path: want X, got Y`` per mismatch; a shared context once, after its last line."""
    lines = []
    for i, m in enumerate(mismatches):
        lines.append(f"    {m.path}: want {_value(m.want)}, got {_value(m.got)}")
        following = mismatches[i + 1].context if i + 1 < len(mismatches) else None
        if m.context and m.context != following:
            lines.append(f"      ({m.context})")
    return lines


def case_lines(r: CaseResult, verbose: bool = False) -> list[str]:
    """Lines for one result: failures always, skips always, passes when verbose."""
    where = f"{r.file}:{r.line}"
    if r.status == "fail":
        return [f"FAIL {where}: {r.note}"] + mismatch_lines(r.mismatches)
    if r.status == "skip":
        return [f"SKIP {where}: {r.note} (todo: {r.todo})"]
    return [f"PASS {where}: {r.note}"] if verbose else []


def coverage_lines(c: CoverageReport, conditions: bool = False) -> list[str]:
    """The two figures, every rule that never fired, and (on request) partial conditions."""
    lines = [f"rule coverage: {len(c.rules_fired)}/{c.rules_total} rules fired "
             f"({c.rule_percent:.1f}%)"]
    lines += [f"  not fired: {f}:{n} {rule}" for rule, f, n in c.rules_not_fired]
    lines.append(f"condition coverage: {c.conditions_covered}/{c.conditions_total} conditions "
                 f"seen true and false ({c.condition_percent:.1f}%)")
    if conditions:
        lines += [f"  {x.file}:{x.line}:{x.column} {x.rule}: {x.text} ({seen})"
                  for x, seen in c.partial]
    return lines


def summary_line(run: PolicyTestRun) -> str:
    n = run.counts()
    return (f"{plural(len(run.results), 'case')}: {n['pass']} passed, {n['fail']} failed, "
            f"{n['skip']} skipped")


def forms_lines(run: PolicyTestRun) -> list[str]:
    """How many cases went through the extractor, and what they alone cover."""
    f = run.forms()
    lines = [f"through the extractor: {f['overlay'] + f['artifacts']} "
             f"(overlay {f['overlay']}, artifacts {f['artifacts']}); compact facts: "
             f"{f['facts']}"]
    x = run.extractor_coverage
    if x is not None and f["overlay"] + f["artifacts"]:
        lines.append(f"  covered by them alone: rules {x.rule_percent:.1f}%, conditions "
                     f"{x.condition_percent:.1f}%")
    return lines


def render_test_pretty(run: PolicyTestRun, min_rules: float = 0, min_conditions: float = 0,
                       verbose: bool = False) -> str:
    """Failures and skips (and passes when verbose), a summary, coverage and thresholds."""
    below = run.below(min_rules, min_conditions)
    lines: list[str] = [x for r in run.results for x in case_lines(r, verbose)]
    if lines:
        lines.append("")
    lines.append(summary_line(run))
    lines += coverage_lines(run.coverage, verbose or any("condition" in b for b in below))
    lines += forms_lines(run)
    lines += [f"FAIL {b}" for b in below]
    return "\n".join(lines) + "\n"


def _case_dict(r: CaseResult) -> dict[str, Any]:
    out: dict[str, Any] = {"file": r.file, "line": r.line, "note": r.note, "status": r.status,
                           "form": r.form}
    if r.mismatches:
        out["mismatches"] = [{"path": m.path, "want": m.want, "got": m.got,
                              "context": m.context} for m in r.mismatches]
    if r.todo:
        out["todo"] = r.todo
    return out


def render_test_json(run: PolicyTestRun, min_rules: float = 0,
                     min_conditions: float = 0) -> str:
    """One document: cases, counts, coverage, thresholds and what fell below them."""
    doc = {"policy": run.source, "summary": run.counts(),
           "cases": [_case_dict(r) for r in run.results],
           "forms": run.forms(),
           "coverage": run.coverage.to_dict(),
           "extractor_coverage": (run.extractor_coverage.to_dict()
                                  if run.extractor_coverage is not None else None),
           "thresholds": {"rules": min_rules, "conditions": min_conditions},
           "below": run.below(min_rules, min_conditions)}
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"

