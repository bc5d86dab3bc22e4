"""``kvrules rules check``: the compiler's passes up to lowering, plus the lint passes.

The lint checks are inserted into the compiler's pass table by name (after ``stratify``),
like OPA's ``WithStageAfter``: one driver, one diagnostic list, one sort order. Compiler
errors and lint findings therefore look the same and can never be reported twice.
"""
from __future__ import annotations

from dataclasses import dataclass

from importlib.abc import Traversable
from pathlib import Path
from typing import Collection

from kvrules.authoring.coverage import authored_rules
from kvrules.authoring.lint import CHECKS, Check, LintContext
from kvrules.diagnostics import Diagnostic, KvrulesUsageError
from kvrules.pipeline import PASSES as CHECK_PASSES
from kvrules.policy.compiler import CompileState, Pass, run_passes

LINT_AFTER = "stratify"
"""The compiler pass after which the lint passes run."""


@dataclass(frozen=True)
class CheckResult:
    """Everything ``rules check`` found in one policy directory."""

    source: str
    files: tuple[str, ...]
    rules: int
    diagnostics: tuple[Diagnostic, ...]

    @property
    def errors(self) -> int:
        return sum(1 for d in self.diagnostics if d.severity == "error")

    @property
    def warnings(self) -> int:
        return sum(1 for d in self.diagnostics if d.severity == "warning")

    @property
    def exit_code(self) -> int:
        """0 clean (warnings allowed), 1 when any finding is an error."""
        return 1 if self.errors else 0


def insert_after(passes: tuple[tuple[str, Pass], ...], name: str,
                 extra: tuple[tuple[str, Pass], ...]) -> tuple[tuple[str, Pass], ...]:
    """The pass table with ``extra`` inserted right after the pass called ``name``."""
    names = [n for n, _ in passes]
    if name not in names:
        raise ValueError(f"no compiler pass named {name!r}")
    i = names.index(name) + 1
    return passes[:i] + extra + passes[i:]


def lint_pass(check: Check) -> Pass:
    """A compiler pass running one check; skipped when the policy model was not built."""
    def run(state: CompileState) -> None:
        if state.policy is None or not state.fact_types or state.quarantined:
            return  # a partial policy would give false "never fires" and "unused" findings
        ctx = LintContext(state.policy, state.fact_types,
                          {name: positions for name, (_, positions) in state.docs.items()})
        state.diagnostics.extend(issue.diagnostic() for issue in check.run(ctx))
    return run


def check_passes(disable: Collection[str] = ()) -> tuple[tuple[str, Pass], ...]:
    """The compiler's check passes with every enabled lint check after ``stratify``."""
    unknown = sorted(set(disable) - set(CHECKS))
    if unknown:
        raise KvrulesUsageError(f"unknown check id(s): {', '.join(unknown)} "
                                f"(known: {', '.join(CHECKS)})")
    lint = tuple((f"lint:{cid}", lint_pass(c)) for cid, c in CHECKS.items()
                 if cid not in disable)
    return insert_after(CHECK_PASSES, LINT_AFTER, lint)


def check_policy(source: str | Path | Traversable | None = None,
                 disable: Collection[str] = ()) -> CheckResult:
    """Check a policy directory (default: the shipped policy).

    Raises KvrulesUsageError only when there is nothing to check (no such directory, no
    rule files); everything wrong inside the files is a diagnostic.
    """
    state = run_passes(source, check_passes(disable))
    rules = len(authored_rules(state.policy)) if state.policy else 0
    return CheckResult(state.source, tuple(sorted(state.files)), rules,
                       tuple(state.diagnostics))
