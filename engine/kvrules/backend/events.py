"""The event stream of one evaluation: what explain, coverage and traces are built from."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class RuleFired:
    """A rule fired: which facts it bound (alias → fact id), what it derived, and why."""

    rule: str
    stratum: int
    bindings: tuple[tuple[str, str], ...]
    derived: tuple[str, ...]
    reason: str
    points: frozenset[str] = frozenset()


@dataclass
class DerivedFact:
    """A fact asserted by a rule (``by``) from the facts it bound."""

    type: str
    id: str
    fields: dict[str, Any]
    by: str
    bindings: tuple[tuple[str, str], ...] = ()


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
