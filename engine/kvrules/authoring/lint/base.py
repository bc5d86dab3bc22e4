"""The shape every lint finding shares, and what a checker gets to look at.

A check is a frozen ``Issue`` subclass (its ``code``, ``description`` and ``severity`` are
class constants) plus a checker function ``(LintContext) -> Iterable[Issue]`` next to it;
``kvrules.authoring.lint.CHECKS`` registers both under a stable id. Findings become the same
:class:`~kvrules.diagnostics.Diagnostic` the compiler emits, so ``rules check`` reports
compiler errors and lint findings in one sorted list.
"""
from __future__ import annotations

from dataclasses import dataclass

from typing import Callable, ClassVar, Iterable

from kvrules.authoring.lint.sat import KindOf
from kvrules.authoring.policyinfo import field_kind
from kvrules.diagnostics import Diagnostic, Severity
from kvrules.policy.model import Loc, Policy
from kvrules.policy.yamlpos import Positions, position_of


@dataclass(frozen=True)
class Issue:
    """One finding: which rule, where (file, line, column, JSON pointer) and what."""

    code: ClassVar[str] = ""
    description: ClassVar[str] = ""
    severity: ClassVar[Severity] = "error"

    message: str
    loc: Loc
    pointer: str
    rule: str | None = None

    def diagnostic(self) -> Diagnostic:
        file, line, column = self.loc
        return Diagnostic(file=file, line=line, column=column, message=self.message,
                          code=self.code, pointer=self.pointer, rule=self.rule,
                          severity=self.severity)


@dataclass(frozen=True)
class LintContext:
    """A compiled-enough policy: the model, declared fact types and source positions."""

    policy: Policy
    fact_types: dict[str, dict[str, str]]
    positions: dict[str, Positions]

    def kind_of(self, fact: str) -> KindOf:
        """Guaranteed field types of ``fact`` for the satisfiability checks."""
        return lambda name: field_kind(self.policy, fact, name)

    def declared(self, fact: str, name: str) -> str | None:
        """The declared type of a field (None when the fact or field is unknown)."""
        return self.fact_types.get(fact, {}).get(name)

    def locate(self, file: str, pointer: str) -> Loc:
        line, column = position_of(self.positions.get(file, {}), pointer)
        return (file, line, column)


Checker = Callable[[LintContext], Iterable[Issue]]


@dataclass(frozen=True)
class Check:
    """A registered check: the finding it emits and the function that finds it."""

    issue: type[Issue]
    run: Checker
