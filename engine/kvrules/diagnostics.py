"""One diagnostic shape for every layer: rule files, evidence, lint findings, tests.

Evidence problems are values collected on a cell (exit 1); a broken tool invocation or
policy raises :class:`KvrulesUsageError` (exit 2). Keeping the two apart lets embedding
jobs classify a corpus without try/except around every cell.
"""
from __future__ import annotations

from dataclasses import dataclass

from typing import Any, Iterable, Literal


Severity = Literal["error", "warning", "info"]

# --- evidence error codes (spec section 3), structural ones found during extraction ---
ARTIFACT_UNREADABLE = "artifact_unreadable"
"""A rank artifact, plan, provenance or sidecar file is not valid JSON or not an object."""
ARTIFACT_INVALID = "artifact_invalid"
"""A file breaks the structure its JSON Schema describes (or a cross-field structural rule)."""
ARTIFACT_INCOMPLETE = "artifact_incomplete"
"""A rank artifact did not finish cleanly (status/valid/usable/timing_valid/error)."""
NO_RANK_ARTIFACTS = "no_rank_artifacts"
"""The cell folder holds no rank artifact."""
RANK_SET_MISMATCH = "rank_set_mismatch"
"""The dp ranks found are not exactly 0..dp-1 of the plan, or a rank appears twice."""
RUN_IDENTITY_MISMATCH = "run_identity_mismatch"
"""run_id or grid_digest differ between the ranks of one cell."""
PROVENANCE_MISMATCH = "provenance_mismatch"
"""Pods of one cell carry different collector provenance."""
SIDECAR_INVALID = "sidecar_invalid"
"""A worker-probe sidecar with the wrong schema envelope."""

STRUCTURAL_CODES = (
    ARTIFACT_UNREADABLE, ARTIFACT_INVALID, ARTIFACT_INCOMPLETE, NO_RANK_ARTIFACTS,
    RANK_SET_MISMATCH, RUN_IDENTITY_MISMATCH, PROVENANCE_MISMATCH, SIDECAR_INVALID,
)

# --- runtime codes: the engine could not reach a verdict (always fail closed) ---
POLICY_UNDECIDED = "policy_undecided"
"""No rule decided a regime for a point; the point is never eligible."""
POLICY_CONFLICT = "policy_conflict"
"""Two rules decided different regimes for one point at the same precedence."""
ENGINE_FAILURE = "engine_failure"
"""The rule engine raised or swallowed an error while evaluating a cell."""
ENGINE_DISAGREEMENT = "engine_disagreement"
"""The rule engine and the reference evaluation of the policy derived different things."""
FACT_INVALID = "fact_invalid"
"""A fact does not match the fact catalogue (an unknown type or field, or a wrong type)."""


@dataclass(frozen=True, order=True)
class Diagnostic:
    """A problem with a location: ``file`` relative to the input, ``pointer`` a JSON pointer."""

    file: str
    line: int | None
    column: int | None
    message: str
    code: str
    pointer: str = ""
    rule: str | None = None
    severity: Severity = "error"

    def to_dict(self) -> dict[str, Any]:
        """The report shape: code, message, file, pointer (+ rule, line, column when known)."""
        out: dict[str, Any] = {"code": self.code, "message": self.message,
                               "file": self.file, "pointer": self.pointer}
        if self.rule is not None:
            out["rule"] = self.rule
        if self.line is not None:
            out["line"] = self.line
            out["column"] = self.column
        if self.severity != "error":
            out["severity"] = self.severity
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Diagnostic":
        return cls(file=data.get("file", ""), line=data.get("line"), column=data.get("column"),
                   message=data["message"], code=data["code"], pointer=data.get("pointer", ""),
                   rule=data.get("rule"), severity=data.get("severity", "error"))

    def location(self) -> str:
        """``file:line:column`` when a line is known, else ``file#pointer``."""
        if self.line is not None:
            return f"{self.file}:{self.line}:{self.column}"
        return f"{self.file}#{self.pointer}" if self.pointer else self.file


def evidence_error(code: str, message: str, file: str, pointer: str = "",
                   rule: str | None = None) -> Diagnostic:
    """Shorthand for an evidence error found in an artifact file."""
    return Diagnostic(file=file, line=None, column=None, message=message, code=code,
                      pointer=pointer, rule=rule)


def text_line(diag: Diagnostic, prefix: str = "") -> str:
    """``location: code: message (rule: id)`` on one line; ``prefix`` (the campaign folder
    as typed) makes a cell-relative location readable from the current directory."""
    location = diag.location()
    if prefix:
        location = f"{prefix.rstrip('/')}/{location}" if diag.file else prefix + location
    code = diag.code if diag.severity == "error" else f"{diag.code} ({diag.severity})"
    rule = f" (rule: {diag.rule})" if diag.rule else ""
    head = f"{location}: " if location else ""
    return f"{head}{code}: {diag.message}{rule}"


def sort_diagnostics(diags: Iterable[Diagnostic]) -> list[Diagnostic]:
    """Stable order (file, line, column, message) so reports are byte-identical."""
    return sorted(diags, key=lambda d: (d.file, d.line or 0, d.column or 0, d.pointer,
                                        d.message, d.code))


class KvrulesWarning(UserWarning):
    """Something the user should hear about that changes no verdict (an input given twice).

    Library callers get a standard :mod:`warnings` warning; the CLI prints it on stderr."""


class KvrulesUsageError(Exception):
    """The tool or the policy is unusable (bad path, invalid rule file): exit status 2."""

    exit_code = 2

    def __init__(self, message: str, diagnostics: list[Diagnostic] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.diagnostics = diagnostics or []
