"""What CI services and editors read: GitHub annotations, SARIF 2.1.0 and JUnit XML.

``rules check`` findings go out as GitHub workflow annotations or as a SARIF log (code
scanning, editors); ``rules test`` results as GitHub annotations or as JUnit XML (every CI
test tab). Pure functions from results to text, byte-deterministic like every renderer.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

from kvrules.authoring.check import CheckResult
from kvrules.authoring.render import check_summary, plural
from kvrules.authoring.testing import CaseResult, PolicyTestRun
from kvrules.authoring.testing_report import mismatch_lines, summary_line
from kvrules.diagnostics import Diagnostic, sort_diagnostics
from kvrules.authoring.lint import CHECKS
from kvrules.verdicts.model import KVRULES_VERSION
from kvrules.verdicts.render import render_diagnostics

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def _gh(text: str, prop: bool = False) -> str:
    """GitHub workflow-command escaping (``%``, newlines; also ``:`` and ``,`` in props)."""
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if prop else text


def render_check_github(result: CheckResult) -> str:
    """One annotation per finding, then the summary as a notice."""
    return render_diagnostics(result.diagnostics, "github") + \
        f"::notice title=kvrules rules check::{_gh(check_summary(result))}\n"


def _uri(file: str) -> str:
    """A finding's file as a SARIF URI: relative to the working directory when below it."""
    path = Path(file)
    try:
        return Path(os.path.relpath(path)).as_posix() if not path.is_absolute() or \
            Path.cwd() in path.parents else path.as_uri()
    except ValueError:
        return path.as_posix()


def _describe(code: str) -> str:
    """A finding code in words: a lint check's own summary, else the code spelled out."""
    for check in CHECKS.values():
        doc = (check.issue.__doc__ or "").strip()
        if check.issue.code == code and doc:
            return doc.splitlines()[0]
    return code.replace("_", " ")


def _sarif_result(d: Diagnostic) -> dict[str, Any]:
    region = {k: v for k, v in (("startLine", d.line), ("startColumn", d.column)) if v}
    location: dict[str, Any] = {"artifactLocation": {"uri": _uri(d.file)}}
    if region:
        location["region"] = region
    out: dict[str, Any] = {
        "ruleId": d.code, "level": "error" if d.severity == "error" else "warning",
        "message": {"text": d.message}, "locations": [{"physicalLocation": location}]}
    props = {k: v for k, v in (("rule", d.rule), ("pointer", d.pointer)) if v}
    if props:
        out["properties"] = props
    return out


def render_check_sarif(result: CheckResult) -> str:
    """A SARIF 2.1.0 log with one run: the finding codes as rules, the findings as results."""
    return render_check_sarif_runs([result])


def render_check_sarif_runs(results: list[CheckResult]) -> str:
    """A SARIF 2.1.0 log with one run per checked policy."""
    log = {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [_sarif_run(r) for r in results]}
    return json.dumps(log, indent=2, ensure_ascii=False) + "\n"


def _sarif_run(result: CheckResult) -> dict[str, Any]:
    diags = sort_diagnostics(result.diagnostics)
    rule_ids = sorted({d.code for d in diags})
    return {
        "tool": {"driver": {
            "name": "kvrules", "version": KVRULES_VERSION,
            "rules": [{"id": rid, "shortDescription": {"text": _describe(rid)}}
                      for rid in rule_ids]}},
        "results": [_sarif_result(d) for d in diags],
        "properties": {"policy": result.source, "files": list(result.files),
                       "rules": result.rules}}


def _case_text(r: CaseResult) -> str:
    return "\n".join(mismatch_lines(r.mismatches)) or r.status


def render_test_github(run: PolicyTestRun, min_rules: float = 0,
                       min_conditions: float = 0) -> str:
    """An error annotation per failed case (at its line), a notice for the summary."""
    lines = []
    for r in run.results:
        if r.status == "fail":
            lines.append(f"::error file={_gh(r.file, True)},line={r.line},"
                         f"title={_gh('kvrules rules test', True)}::"
                         f"{_gh(r.note + ': ' + _case_text(r))}")
    for sentence in run.below(min_rules, min_conditions):
        lines.append(f"::error title=kvrules coverage::{_gh(sentence)}")
    lines.append(f"::notice title=kvrules rules test::{_gh(summary_line(run))}")
    return "\n".join(lines) + "\n"


def render_test_junit(run: PolicyTestRun, min_rules: float = 0,
                      min_conditions: float = 0) -> str:
    """JUnit XML: one testcase per policy case (classname: its file), plus one for each
    coverage threshold, so a CI test tab shows coverage failures too."""
    counts = run.counts()
    below = run.below(min_rules, min_conditions)
    thresholds = [("rule coverage", min_rules), ("condition coverage", min_conditions)]
    checked = [(name, limit) for name, limit in thresholds if limit]
    suite = ET.Element("testsuite", {
        "name": "kvrules rules test", "tests": str(len(run.results) + len(checked)),
        "failures": str(counts["fail"] + len(below)), "skipped": str(counts["skip"]),
        "errors": "0"})
    for r in run.results:
        case = ET.SubElement(suite, "testcase", {"classname": r.file, "name": r.note,
                                                 "file": r.file, "line": str(r.line)})
        if r.status == "fail":
            failure = ET.SubElement(case, "failure",
                                    {"message": plural(len(r.mismatches), "mismatch")})
            failure.text = _case_text(r)
        elif r.status == "skip":
            ET.SubElement(case, "skipped", {"message": r.todo or "todo"})
    for name, limit in checked:
        case = ET.SubElement(suite, "testcase", {"classname": "coverage",
                                                 "name": f"{name} >= {limit:g}%"})
        failed = [s for s in below if s.startswith(name)]
        if failed:
            ET.SubElement(case, "failure", {"message": failed[0]}).text = failed[0]
    root = ET.Element("testsuites", {"name": "kvrules"})
    root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
