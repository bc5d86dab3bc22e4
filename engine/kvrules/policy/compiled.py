"""A compiled policy: the parsed rules, their strata, what the backend lowered them to, and
an analysis of which fields the rules read (used to share evaluations between identical inputs)."""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import wraps
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from kvrules.diagnostics import KvrulesUsageError
from kvrules.policy import codes
from kvrules.policy.evaluate import atoms
from kvrules.policy.model import Atom, Policy, PolicyIdentity, Ref, Rule

if TYPE_CHECKING:  # the compiler is imported to compile, not to use a cached policy
    from importlib.abc import Traversable

    from kvrules.policy.compiler import CompileState, Pass


@dataclass
class CompiledPolicy:
    """Everything the runtime needs; immutable after :func:`compile_policy`."""

    policy: Policy
    parameters: dict[str, Any]
    fact_types: dict[str, dict[str, str]]
    strata: dict[str, int]
    lowered: Any
    identity: PolicyIdentity
    rules: dict[str, Rule] = field(default_factory=dict)
    read_fields: dict[str, frozenset[str]] = field(default_factory=dict)
    ref_targets: dict[str, frozenset[str]] = field(default_factory=dict)
    list_fields: dict[str, frozenset[str]] = field(default_factory=dict)
    point_atoms: tuple[Atom, ...] = ()
    point_raw_fields: tuple[str, ...] = ()
    point_read_fields: tuple[str, ...] = ()


T = TypeVar("T")

POLICIES_KEPT = 16
"""Compiled policies a :func:`per_policy` function keeps its value for (a process uses one
or two; a test session compiles hundreds, which must not all stay alive)."""


def per_policy(derive: Callable[[CompiledPolicy], T]) -> Callable[[CompiledPolicy], T]:
    """``derive(cp)`` computed once per compiled policy and kept: what the runtime and the
    backend work out from a policy (the engine's ruleset names, the fields it reads, the
    point tests) is the same for every cell. Kept by the policy's id, with the policy beside
    the value so that id stays its own (a compiled policy is mutable, so not hashable)."""
    known: dict[int, tuple[CompiledPolicy, T]] = {}

    @wraps(derive)
    def kept(cp: CompiledPolicy) -> T:
        hit = known.get(id(cp))
        if hit is not None and hit[0] is cp:
            return hit[1]
        value = derive(cp)
        if len(known) >= POLICIES_KEPT:
            known.clear()
        known[id(cp)] = (cp, value)
        return value

    return kept


def _analyse(cp: CompiledPolicy) -> None:
    from kvrules.policy.compiler import template_refs
    read: dict[str, set[str]] = {t: set() for t in cp.fact_types}
    targets: dict[str, set[str]] = {t: set() for t in cp.fact_types}
    raw_point: set[str] = set()
    point_atoms: list[Atom] = []
    for rule in cp.policy.rules:
        alias_type = {p.alias: p.fact for p in rule.positives}
        refs: list[Ref] = []
        shown: list[Ref] = template_refs(rule.reason)
        for pattern in rule.patterns:
            for atom in atoms(pattern.where):
                read[pattern.fact].add(atom.field)
                if isinstance(atom.operand, Ref):
                    refs.append(atom.operand)
                    targets[pattern.fact].add(atom.field)  # both sides of a join must exist
                    if pattern.fact == "point":
                        raw_point.add(atom.field)
                elif pattern.fact == "point":
                    point_atoms.append(atom)
        for action in rule.actions:
            # ``error.at`` names where the error points, not a value the action reads
            values = list(action.args.get("set", {}).values()) + [
                v for k, v in action.args.items() if not (action.kind == "error" and k == "at")]
            refs += [v for v in values if isinstance(v, Ref)]
            for key in ("message", "reason"):
                if isinstance(action.args.get(key), str):
                    shown += template_refs(action.args[key])
        for ref in shown:  # shown in text only: read, but not a reason to split point classes
            if ref.alias in alias_type:
                read[alias_type[ref.alias]].add(ref.field)
        for ref in refs:
            kind = alias_type.get(ref.alias)
            if kind is None:
                continue
            read[kind].add(ref.field)
            targets[kind].add(ref.field)
            if kind == "point":
                raw_point.add(ref.field)
    cp.read_fields = {t: frozenset(v | {"id"}) for t, v in read.items()}
    cp.ref_targets = {t: frozenset(v) for t, v in targets.items()}
    cp.list_fields = {t: frozenset(f for f, k in fields.items() if k == "string_list")
                      for t, fields in cp.fact_types.items()}
    unique: dict[str, Atom] = {}
    for atom in point_atoms:
        plain = Atom(atom.field, atom.op, atom.operand if not isinstance(atom.operand, list)
                     else tuple(atom.operand))
        unique.setdefault(repr((plain.field, plain.op, plain.operand)), plain)
    cp.point_atoms = tuple(unique[k] for k in sorted(unique))
    cp.point_raw_fields = tuple(sorted(raw_point - {"id"}))
    cp.point_read_fields = tuple(sorted({a.field for a in cp.point_atoms} | set(
        cp.point_raw_fields)))


def resolve_parameters(policy: Policy, overrides: dict[str, Any] | None) -> dict[str, Any]:
    """Defaults from the policy header, overridden by the caller (type-checked)."""
    values = {n: p.default for n, p in policy.parameters.items()}
    for name, value in (overrides or {}).items():
        if name not in policy.parameters:
            raise KvrulesUsageError(f"{codes.RULE_PARAMETER_ERROR}: unknown policy parameter "
                                    f"'{name}' (known: {', '.join(sorted(values)) or 'none'})")
        if not isinstance(value, bool):
            raise KvrulesUsageError(f"{codes.RULE_PARAMETER_ERROR}: parameter '{name}' must be "
                                    f"a boolean, got {value!r}")
        values[name] = value
    return values


def compile_rules(source: str | Path | Traversable | None = None,
                  parameters: dict[str, Any] | None = None,
                  passes: tuple[tuple[str, Pass], ...] | None = None) -> CompiledPolicy:
    """Compile a policy directory or raise KvrulesUsageError carrying every diagnostic.

    ``passes`` are the policy's passes plus a backend's (see kvrules.pipeline); None: the
    policy's own."""
    from kvrules.policy.compiler import PASSES, policy_digest, run_passes
    state: CompileState = run_passes(source, PASSES if passes is None else passes)
    if state.failed or state.policy is None:
        errors = [d for d in state.diagnostics if d.severity == "error"]
        first = errors[0] if errors else None
        summary = f"{first.location()}: {first.code}: {first.message}" if first else "invalid"
        raise KvrulesUsageError(f"invalid policy {state.source}: {len(errors)} error(s); "
                                f"first: {summary}", state.diagnostics)
    values = resolve_parameters(state.policy, parameters)
    identity = PolicyIdentity(state.policy.name, state.policy.version,
                              policy_digest(state.files, values), values)
    cp = CompiledPolicy(policy=state.policy, parameters=values, fact_types=state.fact_types,
                        strata=state.strata, lowered=state.lowered, identity=identity,
                        rules={r.id: r for r in state.policy.rules})
    _analyse(cp)
    return cp
