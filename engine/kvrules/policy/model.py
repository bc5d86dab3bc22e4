"""The parsed policy: rules, patterns, tests and actions, each with its source location."""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any


Loc = tuple[str, int, int]
"""(file, line, column) of a policy element."""


@dataclass(frozen=True)
class Ref:
    """A reference to a field of another bound fact: ``{ref: alias.field}``."""

    alias: str
    field: str


Operand = Any  # a literal (scalar or list of scalars) or a Ref


@dataclass(frozen=True)
class Atom:
    """One test of one field: ``field op operand``; ``negated`` after pushing ``not`` down."""

    field: str
    op: str
    operand: Operand
    negated: bool = False
    pointer: str = ""
    loc: Loc = ("", 0, 0)

    def describe(self) -> str:
        """Human form such as ``native_regime == 'fake_fallback'``."""
        operand = f"{self.operand.alias}.{self.operand.field}" if isinstance(
            self.operand, Ref) else repr(self.operand)
        text = f"{self.field} {self.op} {operand}"
        return f"not ({text})" if self.negated else text


@dataclass(frozen=True)
class Expr:
    """A boolean combination: kind is ``and``/``or`` over children, or ``atom``."""

    kind: str
    children: tuple["Expr", ...] = ()
    atom: Atom | None = None


@dataclass(frozen=True)
class Pattern:
    """A fact pattern: bind one fact of ``fact`` type as ``alias`` when ``where`` holds."""

    fact: str
    alias: str
    where: Expr | None
    negated: bool
    pointer: str
    loc: Loc


@dataclass(frozen=True)
class Action:
    """One action: kind is derive|error|fail|qualify|regime|eligible."""

    kind: str
    args: dict[str, Any]
    pointer: str
    loc: Loc

    @property
    def produces(self) -> str:
        """The fact type this action asserts."""
        return self.args["fact"] if self.kind == "derive" else BUILTIN_BY_ACTION[self.kind]


BUILTIN_BY_ACTION = {"error": "evidence_error", "fail": "condition_failed",
                     "qualify": "qualified", "regime": "verdict_regime",
                     "eligible": "verdict_eligible"}

BUILTIN_FACTS: dict[str, dict[str, str]] = {
    "evidence_error": {"code": "string", "message": "string", "at_fact": "string",
                       "at_field": "string"},
    "condition_failed": {"group": "string", "condition": "string", "reason": "string"},
    "qualified": {"group": "string"},
    "verdict_regime": {"point": "string", "value": "any", "decided_by": "string"},
    "verdict_eligible": {"point": "string"},
}
"""Facts the runtime reads to build verdicts; rules produce them with the matching actions."""

COMMON_FIELDS = {"id": "string"}
DERIVED_COMMON_FIELDS = {"id": "string", "by": "string"}


@dataclass(frozen=True)
class Rule:
    """One rule: patterns (positive and ``none``), actions, and a reason template."""

    id: str
    description: str
    patterns: tuple[Pattern, ...]
    actions: tuple[Action, ...]
    reason: str
    loc: Loc
    pointer: str
    file: str

    @cached_property
    def positives(self) -> tuple[Pattern, ...]:
        """The patterns that must match (read on every firing of the rule)."""
        return tuple(p for p in self.patterns if not p.negated)

    @cached_property
    def negatives(self) -> tuple[Pattern, ...]:
        """The ``none`` patterns."""
        return tuple(p for p in self.patterns if p.negated)


@dataclass(frozen=True)
class Parameter:
    """A policy parameter: its name, type, default value and what it changes."""

    name: str
    type: str
    default: Any
    description: str = ""


SUBJECT_FIELD = {"regime": "point"}
"""The field of the result's builtin fact that names the subject (``verdict_regime.point``)."""
PICK_SUFFIX = ".first_matching_step"
CANDIDATE_SUFFIX = "_candidate"


@dataclass(frozen=True)
class DecisionStep:
    """One step of a decision, as written: conditions, value, reason, location."""

    id: str
    description: str
    patterns: tuple[Pattern, ...]
    value: Any
    reason: str
    loc: Loc
    pointer: str
    file: str
    value_loc: Loc

    @property
    def otherwise(self) -> bool:
        """A step without conditions: it holds for every subject that reaches it."""
        return not self.patterns


@dataclass(frozen=True)
class Decision:
    """An ordered decision: the first step that holds for a subject decides its result."""

    id: str
    description: str
    subject: str
    alias: str
    result: str
    steps: tuple[DecisionStep, ...]
    loc: Loc
    pointer: str
    file: str
    subject_loc: Loc = ("", 0, 0)

    @property
    def pick_rule(self) -> str:
        """Id of the generated rule that takes the first step's candidate."""
        return self.id + PICK_SUFFIX

    @property
    def candidate_fact(self) -> str:
        """Generated derived fact carrying one step's proposal for one subject."""
        return self.id + CANDIDATE_SUFFIX

    @property
    def subject_field(self) -> str:
        return SUBJECT_FIELD[self.result]

    def position(self, step_id: str) -> int | None:
        """1-based position of a step (None when it is not a step of this decision)."""
        for k, step in enumerate(self.steps, 1):
            if step.id == step_id:
                return k
        return None


@dataclass
class Policy:
    """A whole policy directory after parsing (before compilation)."""

    name: str
    version: str
    description: str
    parameters: dict[str, Parameter]
    qualifications: dict[str, dict[str, Any]]
    derived: dict[str, dict[str, str]]
    regimes: tuple[str, ...]
    error_codes: tuple[str, ...]
    rules: list[Rule] = field(default_factory=list)
    decisions: list[Decision] = field(default_factory=list)
    """Ordered decisions as written; :mod:`kvrules.policy.decisions` lowers them to rules."""
    files: dict[str, str] = field(default_factory=dict)
    header_loc: Loc = ("", 0, 0)


@dataclass(frozen=True)
class PolicyIdentity:
    """Which policy produced a report: name, version and a digest of its files and parameters."""

    name: str
    version: str
    digest: str
    parameters: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version, "digest": self.digest,
                "parameters": dict(sorted(self.parameters.items()))}
