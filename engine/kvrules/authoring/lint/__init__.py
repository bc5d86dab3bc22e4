"""Lint checks for policies: one finding class and one checker per check, in a registry.

``CHECKS`` is explicit (no discovery at import time) and ordered; its ids are what
``kvrules rules check --disable ID`` takes. Each check's docstring (on its Issue class) is
its user documentation: what it catches, with a failing and a passing snippet.
"""
from __future__ import annotations

from kvrules.authoring.lint_ids import CHECK_IDS
from kvrules.authoring.lint.base import Check, Issue, LintContext
from kvrules.authoring.lint.conditions import (ContradictoryConditionsIssue,
                                               check_contradictions)
from kvrules.authoring.lint.flow import (NeverFiresIssue, UnusedDerivedFactIssue,
                                         check_never_fires, check_unused_derived)
from kvrules.authoring.lint.regimes import (AmbiguousRegimeIssue, UnreachableStepIssue,
                                            check_ambiguous_regimes, check_unreachable_steps)
from kvrules.authoring.lint.types import (DeriveTypeMismatchIssue, RefTypeMismatchIssue,
                                          check_derive_types, check_ref_types)

CHECKS: dict[str, Check] = dict(zip(CHECK_IDS, (
    Check(RefTypeMismatchIssue, check_ref_types),
    Check(DeriveTypeMismatchIssue, check_derive_types),
    Check(ContradictoryConditionsIssue, check_contradictions),
    Check(NeverFiresIssue, check_never_fires),
    Check(UnusedDerivedFactIssue, check_unused_derived),
    Check(AmbiguousRegimeIssue, check_ambiguous_regimes),
    Check(UnreachableStepIssue, check_unreachable_steps)), strict=True))
"""Check id → check, in the order they run."""

__all__ = ["CHECKS", "Check", "Issue", "LintContext"]
