"""Text and JSON for ``rules check``: pure functions from results to strings.

The other authoring commands keep their renderers next to their data (``testing_report``,
``explain_report``, ``diff`` ...) but follow the same rule: no printing, no I/O, one small
function per format, byte-deterministic output.
"""
from __future__ import annotations

import json
from typing import Any

from kvrules.authoring.check import CheckResult
from kvrules.verdicts.render import render_diagnostics


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def check_summary(result: CheckResult) -> str:
    """``rules: 9 files, 66 rules: no findings`` (or the error and warning counts)."""
    head = f"{result.source}: {plural(len(result.files), 'file')}, " \
           f"{plural(result.rules, 'rule')}"
    if not result.diagnostics:
        return f"{head}: no findings"
    return f"{head}: {plural(result.errors, 'error')}, {plural(result.warnings, 'warning')}"


def render_check_text(result: CheckResult, limit: int | None = None) -> str:
    """``file:line:col: code: message (rule: id)`` lines, then the summary line."""
    return render_diagnostics(result.diagnostics, "text", limit=limit) + \
        check_summary(result) + "\n"


def check_dict(result: CheckResult) -> dict[str, Any]:
    return {"policy": result.source, "files": list(result.files), "rules": result.rules,
            "errors": result.errors, "warnings": result.warnings,
            "diagnostics": [d.to_dict() | {"severity": d.severity}
                            for d in result.diagnostics]}


def render_check_json(result: CheckResult) -> str:
    """One JSON document: policy, files, counts and every diagnostic with its severity."""
    return json.dumps(check_dict(result), indent=2, ensure_ascii=False) + "\n"
