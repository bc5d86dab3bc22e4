"""The event stream of one evaluation: what explain, coverage and traces are built from.

A firing and a derived fact are the language's own result model
(:mod:`kvrules.policy.reference`); the engine's evaluation is made of the same classes."""
from __future__ import annotations

from dataclasses import dataclass, field

from kvrules.policy.reference import DerivedFact as DerivedFact
from kvrules.policy.reference import RuleFired as RuleFired


@dataclass
class Evaluation:
    """Result of evaluating one cell session: derived facts, fired rules, engine failures,
    and where the reference evaluation disagreed with the engine (when it was checked)."""

    derived: list[DerivedFact] = field(default_factory=list)
    events: list[RuleFired] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    disagreements: list[str] = field(default_factory=list)


MAX_FAILURE_CHARS = 300
"""engine_failure messages are cut to this length (no tracebacks in reports)."""


def short(message: str, limit: int = MAX_FAILURE_CHARS) -> str:
    """One line, at most ``limit`` characters."""
    text = " ".join(message.split())
    return text if len(text) <= limit else text[:limit - 1] + "…"
