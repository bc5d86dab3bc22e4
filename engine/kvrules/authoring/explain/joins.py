"""Re-run one cell with everything kept, and walk rule joins under the reference semantics.

The engine only reports rules that fired. Coverage and ``explain`` also need what happened to
the rules that did *not* fire. Both are answered here without touching the engine: the cell
is evaluated exactly as ``classify`` does it (:func:`kvrules.pipeline.trace_cell`: same
checks, point classes, session and verdict builder), and then each rule's patterns are
replayed in order over the facts that existed in the session, using
:mod:`kvrules.policy.evaluate` — the reference semantics the compiled engine conditions are
tested against. A fact produced in a higher stratum is never shown to
a rule of a lower one, so every replayed outcome is one the engine could have seen.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Callable, Literal

from kvrules.facts.model import CellFacts, Fact
from kvrules.policy.compiled import CompiledPolicy
from kvrules.policy.evaluate import atoms, eval_expr, first_failure
from kvrules.policy.model import Atom, Pattern, Rule
from kvrules.backend.events import Evaluation
from kvrules.verdicts.model import CellVerdict
from kvrules.pipeline import trace_cell as trace_pipeline

WALK_LIMIT = 20000
"""Join prefixes replayed per rule and cell at most (a bound, never reached by real cells)."""

Env = dict[str, dict[str, Any]]


@dataclass(frozen=True)
class SessionFact:
    """A fact of the session: its fields (with ``id``), the fact it came from, its stratum."""

    type: str
    id: str
    fields: dict[str, Any]
    stratum: int = 0
    fact: Fact | None = None
    by: str | None = None


@dataclass
class Traced:
    """One cell evaluated as ``classify`` does, with the facts and events kept."""

    cp: CompiledPolicy
    cell: CellFacts
    verdict: CellVerdict
    evaluation: Evaluation
    class_of: dict[int, str]
    facts: dict[str, list[SessionFact]] = field(default_factory=dict)
    root: str = ""
    """The campaign folder as given (evidence paths are shown relative to it)."""

    def shown_path(self, file: str) -> str:
        """An evidence file relative to the current directory, as users type paths."""
        if not file or not self.root:
            return file
        return os.path.relpath(os.path.join(self.root, file))

    def by_id(self, fact_id: str) -> SessionFact | None:
        for group in self.facts.values():
            for f in group:
                if f.id == fact_id:
                    return f
        return None


def trace_cell(cp: CompiledPolicy, cell: CellFacts) -> Traced:
    """Classify one cell as the pipeline does (no memo) and keep every fact of its session."""
    run = trace_pipeline(cp, cell)
    ev, prepared = run.evaluation, run.prepared
    traced = Traced(cp, prepared.cell, run.verdict, ev, prepared.class_of)
    add = traced.facts.setdefault
    add("params", []).append(SessionFact("params", "params", {**cp.parameters, "id": "params"}))
    for f in prepared.facts:
        add(f.type, []).append(SessionFact(f.type, f.id, {**f.fields, "id": f.id}, 0, f))
    for d in ev.derived:
        add(d.type, []).append(SessionFact(d.type, d.id, {**d.fields, "id": d.id},
                                           cp.strata.get(d.by, 0), None, d.by))
    return traced


Visit = Callable[[Pattern, SessionFact, Env], None]


def walk(traced: Traced, rule: Rule, visit: Visit,
         only: Callable[[Pattern, SessionFact], bool] = lambda p, f: True) -> int:
    """Replay ``rule``'s patterns in order; ``visit(pattern, fact, env)`` is called for every
    fact of the pattern's type reached by a matching join prefix. Returns the number of
    complete matches (the rule would fire that many times). ``only`` restricts candidates.
    """
    stratum = traced.cp.strata.get(rule.id, 1)
    budget = [WALK_LIMIT]

    def step(i: int, env: Env) -> int:
        if i == len(rule.patterns) or budget[0] <= 0:
            return 1 if i == len(rule.patterns) else 0
        budget[0] -= 1
        pattern = rule.patterns[i]
        matched, total = False, 0
        for fact in candidates(traced, pattern, stratum):
            if not only(pattern, fact):
                continue
            here = {**env, pattern.alias: fact.fields}
            visit(pattern, fact, here)
            if pattern.where is None or eval_expr(pattern.where, fact.fields, here):
                matched = True
                if not pattern.negated:
                    total += step(i + 1, here)
        if pattern.negated and not matched:
            total += step(i + 1, env)
        return total
    return step(0, {})


def candidates(traced: Traced, pattern: Pattern, stratum: int) -> list[SessionFact]:
    """Facts of the pattern's type visible to a rule of ``stratum``."""
    limit = stratum - 1 if pattern.negated else stratum
    return [f for f in traced.facts.get(pattern.fact, []) if f.stratum <= limit]


@dataclass(frozen=True)
class Blocker:
    """Why a rule cannot fire: the first pattern (in order) that no join prefix gets past.

    ``no_fact``: no fact of the pattern's type is visible; ``failed``: the closest candidate
    fails ``atom`` (the first failing condition under the reference semantics); ``blocked``:
    a ``none`` pattern is matched by ``fact``.
    """

    pattern: Pattern
    kind: Literal["no_fact", "failed", "blocked"]
    fact: SessionFact | None = None
    atom: Atom | None = None
    env: Env = field(default_factory=dict)
    candidates: int = 0


Only = Callable[[Pattern, SessionFact], bool]


def _matches(pattern: Pattern, fact: SessionFact, env: Env) -> bool:
    here = {**env, pattern.alias: fact.fields}
    return pattern.where is None or eval_expr(pattern.where, fact.fields, here)


def why_not(traced: Traced, rule: Rule, only: Only = lambda p, f: True) -> Blocker | None:
    """The first pattern that stops ``rule`` (None when it can fire on these facts)."""
    stratum = traced.cp.strata.get(rule.id, 1)
    envs: list[Env] = [{}]
    for pattern in rule.patterns:
        cands = [f for f in candidates(traced, pattern, stratum) if only(pattern, f)]
        if pattern.negated:
            hits = [next((f for f in cands if _matches(pattern, f, e)), None) for e in envs]
            if all(h is not None for h in hits):
                return Blocker(pattern, "blocked", hits[0], None, envs[0], len(cands))
            envs = [e for e, h in zip(envs, hits) if h is None]
            continue
        nxt = [{**e, pattern.alias: f.fields} for e in envs for f in cands
               if _matches(pattern, f, e)]
        if not nxt:
            return _failure(pattern, cands, envs[0])
        envs = nxt[:WALK_LIMIT]
    return None


def _failure(pattern: Pattern, cands: list[SessionFact], env: Env) -> Blocker:
    """The candidate that gets furthest through the conditions, and where it fails."""
    if not cands:
        return Blocker(pattern, "no_fact", None, None, env, 0)
    order = {id(a): i for i, a in enumerate(atoms(pattern.where))}

    def failing(f: SessionFact) -> Atom | None:
        assert pattern.where is not None
        return first_failure(pattern.where, f.fields, {**env, pattern.alias: f.fields})
    best = max(cands, key=lambda f: order.get(id(failing(f)), -1))
    here = {**env, pattern.alias: best.fields}
    return Blocker(pattern, "failed", best, failing(best), here, len(cands))
