"""Lint checks for policies: one finding class and one checker per check, in a registry.

``CHECKS`` is explicit (no discovery at import time) and ordered; its ids are what
``kvrules rules check --disable ID`` takes. Each check's docstring (on its Issue class) is
its user documentation: what it catches, with a failing and a passing snippet.
"""
from __future__ import annotations

from kvrules.authoring.lint.base import Check, Issue, LintContext
from kvrules.authoring.lint.conditions import (ContradictoryConditionsIssue,
                                               check_contradictions)
from kvrules.authoring.lint.flow import (NeverFiresIssue, UnusedDerivedFactIssue,
                                         check_never_fires, check_unused_derived)
from kvrules.authoring.lint.regimes import (AmbiguousRegimeIssue, UnreachableStepIssue,
                                            check_ambiguous_regimes, check_unreachable_steps)
from kvrules.authoring.lint.types import (DeriveTypeMismatchIssue, RefTypeMismatchIssue,
                                          check_derive_types, check_ref_types)

CHECKS: dict[str, Check] = {
    "ref-types": Check(RefTypeMismatchIssue, check_ref_types),
    "derive-types": Check(DeriveTypeMismatchIssue, check_derive_types),
    "contradictory-conditions": Check(ContradictoryConditionsIssue, check_contradictions),
    "never-fires": Check(NeverFiresIssue, check_never_fires),
    "unused-derived-fact": Check(UnusedDerivedFactIssue, check_unused_derived),
    "ambiguous-regime": Check(AmbiguousRegimeIssue, check_ambiguous_regimes),
    "unreachable-step": Check(UnreachableStepIssue, check_unreachable_steps),
}
"""Check id → check, in the order they run."""

__all__ = ["CHECKS", "Check", "Issue", "LintContext"]
