"""Evaluate one cell's facts with a compiled policy on durable-rules, stratum by stratum.

Per stratum: a fresh session gets every fact known so far of the types its rules match in
ONE batch (so no rule sees a partial input), runs to quiescence, and is deleted (never more
than one live session).
Negation is stratified: probes of the previous stratum record candidate bindings and
witnesses; the runtime asserts ``neg_ok`` for candidates without a witness. Every action
is wrapped: exceptions are recorded, never swallowed; an engine failure fails the cell
closed instead of passing silently.
"""
from __future__ import annotations

import itertools
from typing import Any, Callable

from kvrules.facts.model import Fact
from kvrules.policy.compiled import CompiledPolicy, per_policy
from kvrules.backend.durable.lower import (NEG_OK, types_matched, values_read,
                                          with_companion_fields)
from kvrules.policy.model import Rule
from kvrules.policy.reference import action_fields, render
from kvrules.backend.durable import host as hostmod
from kvrules.backend.durable.encode import (DISCRIMINATOR, absent_marker, encode_fact,
                                           only_read)
from kvrules.backend.events import DerivedFact, Evaluation, RuleFired, short

_SIDS = itertools.count(1)
_TAINTED = False
"""Set when the engine raised inside a session: that process must not call it again."""


def tainted() -> bool:
    """Whether an engine call raised in this process (its sessions may be corrupt)."""
    return _TAINTED


class DuplicateFactId(ValueError):
    """Two facts of one evaluation share an id (the engine would reject the second)."""


class _Context:
    """Python-side state of the evaluation in progress (decoded facts by id)."""

    def __init__(self, cp: CompiledPolicy) -> None:
        self.cp = cp
        self.read = _fields_read(cp)
        self.valued = _field_names(cp)[1] if self.read is not None else None
        self.types: dict[str, str] = {}
        self.fields: dict[str, dict[str, Any]] = {}
        self.encoded: list[dict[str, Any]] = []
        self.texts: list[str | None] = []
        self.result = Evaluation()
        self.stratum = 0
        self.probes: dict[str, set[tuple[str, ...]]] = {}
        self.fired: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
        self.counter = itertools.count(1)

    def add(self, fact_type: str, fact_id: str, fields: dict[str, Any]) -> dict[str, Any]:
        if fact_id in self.types:  # never feed the engine a fact it rejects as observed
            raise DuplicateFactId(f"fact id {fact_id!r} appears twice")
        self.types[fact_id] = fact_type
        self.fields[fact_id] = {**fields, "id": fact_id}
        encoded = encode_fact(fact_type, fact_id, fields,
                              self.cp.list_fields.get(fact_type, frozenset()), self.read,
                              self.valued)
        for name in sorted(self.cp.ref_targets.get(fact_type, ())):  # sorted: the same
            if name not in encoded and name not in fields:  # text under every hash seed
                marker = absent_marker(name)
                encoded.update(marker if self.read is None else only_read(marker, self.read))
        self.encoded.append(encoded)
        return encoded


_CURRENT: list[_Context] = []


def _points_of(ctx: _Context, bindings: dict[str, str]) -> frozenset[str]:
    points = set()
    for fid in bindings.values():
        if ctx.types.get(fid) == "point":
            points.add(fid)
        elif isinstance(ctx.fields.get(fid, {}).get("point"), str):
            points.add(ctx.fields[fid]["point"])
    return frozenset(points)


def _fire(rule: Rule, c: Any) -> None:
    ctx = _CURRENT[-1]
    try:
        bindings = {alias: fact["id"][2:] for alias, fact in c._m.items()
                    if alias != "neg_ok_"}
        key = (rule.id, tuple(sorted(bindings.items())))
        if key in ctx.fired:  # a split rule (see lower.pattern_variants) fires once per binding
            return
        ctx.fired.add(key)
        env = {alias: ctx.fields[fid] for alias, fid in bindings.items()}
        derived = []
        for action in rule.actions:
            fields = action_fields(action, env, rule, bindings)
            fields["by"] = rule.id
            fid = f"{rule.id}#{next(ctx.counter)}"
            encoded = ctx.add(action.produces, fid, fields)
            ctx.result.derived.append(DerivedFact(action.produces, fid, fields, rule.id,
                                                  tuple(sorted(bindings.items()))))
            derived.append(fid)
            c.assert_fact(dict(encoded))
        ordered = tuple((p.alias, bindings[p.alias]) for p in rule.positives)
        ctx.result.events.append(RuleFired(rule.id, ctx.stratum, ordered, tuple(derived),
                                           render(rule.reason, env), _points_of(ctx, bindings)))
    except Exception as exc:  # recorded, and the cell fails closed
        ctx.result.failures.append(f"rule {rule.id}: {type(exc).__name__}: {exc}")


def _probe(name: str, rule: Rule, c: Any) -> None:
    ctx = _CURRENT[-1]
    try:
        key = tuple(c._m[p.alias]["id"][2:] for p in rule.positives)
        ctx.probes.setdefault(name, set()).add(key)
    except Exception as exc:
        ctx.result.failures.append(f"probe {name}: {type(exc).__name__}: {exc}")


def _make_actions(cp: CompiledPolicy) -> dict[str, Callable[[Any], None]]:
    actions: dict[str, Callable[[Any], None]] = {"sink#": lambda c: None}
    for rule in cp.policy.rules:
        actions[rule.id] = (lambda r: lambda c: _fire(r, c))(rule)
        if rule.negatives:
            actions[f"{rule.id}#cand"] = (lambda r: lambda c: _probe(f"{r.id}#cand", r, c))(rule)
            for i in range(len(rule.negatives)):
                name = f"{rule.id}#wit{i}"
                actions[name] = (lambda r, n: lambda c: _probe(n, r, c))(rule, name)
    return actions


@per_policy
def ruleset_names(cp: CompiledPolicy) -> list[str]:
    """Versioned ruleset names, registered once per process."""
    tag = cp.identity.digest.split(":")[-1][:16]
    names = [f"kvrules_{tag}_s{k + 1}" for k in range(len(cp.lowered))]
    actions = _make_actions(cp)
    for name, definition in zip(names, cp.lowered):
        hostmod.ensure_registered(name, definition, actions)
    return names


@per_policy
def _types_matched(cp: CompiledPolicy) -> list[frozenset[str] | None]:
    """Per stratum, the fact types its rules match (None: every type)."""
    return [types_matched(definition) for definition in cp.lowered]


@per_policy
def _field_names(cp: CompiledPolicy) -> tuple[frozenset[str], frozenset[str]]:
    """The fields the policy's engine rules can read (the others are not encoded), and
    those whose own value they read (the others are given as their companions alone)."""
    valued = values_read(cp.lowered)
    return with_companion_fields(valued), valued


def _fields_read(cp: CompiledPolicy) -> frozenset[str]:
    """The fields the policy's engine rules can read (the others are not encoded)."""
    return _field_names(cp)[0]


@per_policy
def _negated_rules(cp: CompiledPolicy) -> dict[int, list[tuple[Rule, int]]]:
    """Rules with ``none`` patterns by stratum, with their number of negated patterns."""
    out: dict[int, list[tuple[Rule, int]]] = {}
    for rule in cp.policy.rules:
        if rule.negatives:
            out.setdefault(cp.strata[rule.id], []).append((rule, len(rule.negatives)))
    return out


def _neg_ok_facts(ctx: _Context, stratum: int) -> None:
    """For rules of this stratum with ``none``: candidates minus witnesses."""
    for rule, negated in _negated_rules(ctx.cp).get(stratum, []):
        cands = ctx.probes.get(f"{rule.id}#cand", set())
        witnessed: set[tuple[str, ...]] = set()
        for i in range(negated):
            witnessed |= ctx.probes.get(f"{rule.id}#wit{i}", set())
        for n, key in enumerate(sorted(cands - witnessed)):
            fields = {"rule": rule.id}
            fields.update({f"b_{p.alias}": fid for p, fid in zip(rule.positives, key)})
            ctx.add(NEG_OK, f"neg_ok#{rule.id}#{n}", fields)


def _has_rules(definition: dict[str, Any]) -> bool:
    return any(not name.startswith(("sink#", "session#")) for name in definition)


def evaluate(cp: CompiledPolicy, facts: list[Fact]) -> Evaluation:
    """Run every stratum over ``facts`` (plus the params fact) and return what happened."""
    names = ruleset_names(cp)
    ctx = _Context(cp)
    ctx.add("params", "params", dict(cp.parameters))
    for fact in facts:
        ctx.add(fact.type, fact.id, fact.fields)
    engine = hostmod.host()
    with hostmod.LOCK:
        _CURRENT.append(ctx)
        try:
            strata = zip(names, cp.lowered, _types_matched(cp))
            for k, (name, definition, matched) in enumerate(strata, start=1):
                if _TAINTED:
                    ctx.result.failures.append("engine: not run (an earlier engine call failed)")
                    break
                ctx.stratum = k
                _neg_ok_facts(ctx, k)
                if _has_rules(definition):
                    _run_session(engine, name, ctx, matched)
        finally:
            _CURRENT.pop()
    ctx.result.failures = [short(f) for f in ctx.result.failures]
    return ctx.result


def _batch(ctx: _Context, sid: str, matched: frozenset[str] | None = None) -> hostmod.Batch:
    """The facts known so far of the types ``matched`` (None: all), in session ``sid``: the
    JSON of ``[dict(f, sid=sid) ...]`` from each fact's JSON written once per evaluation."""
    for fact in ctx.encoded[len(ctx.texts):]:  # each text checked once (engine_safe)
        text = hostmod.engine_safe(hostmod.dumps(fact)) if fact and "sid" not in fact else None
        ctx.texts.append(text[:-1] if text is not None else None)
    chosen = [(f, text) for f, text in zip(ctx.encoded, ctx.texts)
              if matched is None or f.get(DISCRIMINATOR) in matched]
    facts = [dict(f, sid=sid) for f, _ in chosen]
    tail = f',"sid":"{sid}"}}'  # sid is a decimal number: nothing to escape
    parts = [hostmod.engine_safe(hostmod.dumps(f)) if text is None else text + tail
             for f, (_, text) in zip(facts, chosen)]
    return hostmod.Batch(facts, "[" + ",".join(parts) + "]")


def _run_session(engine: Any, name: str, ctx: _Context,
                 matched: frozenset[str] | None) -> None:
    """One stratum's session over the facts its rules can match."""
    with hostmod.texts_kept():
        _session(engine, name, ctx, matched)


def _session(engine: Any, name: str, ctx: _Context, matched: frozenset[str] | None) -> None:
    global _TAINTED
    sid = str(next(_SIDS))
    try:
        batch = _batch(ctx, sid, matched)
    except hostmod.StringTooLong as exc:  # refused before the engine: nothing to undo
        ctx.result.failures.append(f"engine: {exc}")
        return
    try:
        engine.assert_facts(name, batch)
    except Exception as exc:  # the session may be half-made: never touch it again
        _TAINTED = True
        ctx.result.failures.append(f"engine: {type(exc).__name__}: {exc}")
        return
    try:
        state = engine.get_state(name, sid)
        if state.get("exception"):
            ctx.result.failures.append(f"engine: {state['exception']}")
    except Exception as exc:
        ctx.result.failures.append(f"engine: {type(exc).__name__}: {exc}")
    try:
        engine.delete_state(name, sid)  # only a session assert_facts created
    except Exception as exc:
        _TAINTED = True
        ctx.result.failures.append(f"engine: {type(exc).__name__}: {exc}")
