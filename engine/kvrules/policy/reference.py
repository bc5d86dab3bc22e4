"""The reference evaluation of a compiled policy: what a policy means, in plain Python.

This module is the definition of how a policy is evaluated (``docs/rules.md`` points here).
The rule engine (durable-rules, ``kvrules.backend``) is one implementation of it; every cell
can be evaluated by both and the two results compared (:func:`first_difference`).

Given a compiled policy and one cell's facts (the cell's facts plus one fact per point class,
what the pipeline hands to the backend), plus the ``params`` fact holding the policy's
parameter values:

1. **Strata, in order.** Every rule has a stratum (``CompiledPolicy.strata``, from the
   compiler's ``stratify``). Stratum *k* sees every fact known when it starts (the cell's
   facts and everything derived in strata before it) and runs to a fixpoint: a rule fires
   once for every *binding* of its positive patterns, including bindings that use facts
   derived in the same stratum, until no rule has a binding it has not fired on.
2. **A binding** assigns one fact to every positive pattern, in order: the fact has the
   pattern's type, its ``where`` holds under the operator registry's semantics
   (:func:`kvrules.policy.evaluate.eval_expr`, a ``{ref: alias.field}`` read from the facts
   bound before it), and it is none of the facts already bound (one fact never fills two
   patterns of one rule).
3. **``none``** is decided when the rule's stratum starts, over the facts known then (the
   compiler puts such a rule after every producer of what it reads, so they are complete):
   a binding of the positive patterns is kept when, for every ``none`` pattern, no fact
   other than the bound ones has the pattern's type and satisfies its ``where`` (refs read
   from the binding).
4. **Actions** of a firing run in order, each asserting one fact (:func:`action_fields`):
   ``derive`` the declared fact (a ref to an absent field leaves the field absent), and the
   verdict facts ``evidence_error``, ``condition_failed``, ``qualified``,
   ``verdict_regime``, ``verdict_eligible``. Every asserted fact gets ``by: <rule id>`` and
   the id ``<rule id>#<n>`` (*n* counts the facts derived in this evaluation).
5. **Decisions** (``decisions:``) were lowered by the compiler to ordinary rules (one per
   step, plus ``<id>.first_matching_step`` whose ``none`` takes the first step), so they need
   nothing here.

The result (:class:`Result`) has the shape of the backend's ``Evaluation``: the derived
facts, one :class:`RuleFired` per firing and failures. Derived fact ids and the order of firings
depend on the order an implementation happens to fire in; :func:`canonical` names every
derived fact by the firing that made it, so two evaluations that derived the same facts
from the same bindings compare equal whatever their order.

For speed, a pattern that compares one of its fields with a field of a fact bound before it
(``eq`` or ``same_as`` with a ``ref``, at the top of its ``where``) finds its candidates
through an index on that field, and each round of the fixpoint only looks at bindings that
use at least one fact new in the round before (semi-naive evaluation). Neither changes what
holds: every candidate is still tested with the whole ``where``.

``evaluate(cp, facts, trace=True)`` keeps a :class:`Trace`: every fact with the stratum it
appeared in, the ``none`` witnesses that blocked bindings, and :meth:`Trace.why_not`, the
first pattern a rule gets no binding past and the value its closest candidate was refused on.
"""
from __future__ import annotations

import bisect
import itertools
import json
import re
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping, Protocol, Sequence

from kvrules.facts.jsontypes import canonical as canonical_json
from kvrules.facts.jsontypes import json_type
from kvrules.policy.compiled import CompiledPolicy, per_policy
from kvrules.policy.evaluate import MISSING, eval_expr, first_failure
from kvrules.policy.model import Action, Atom, Expr, Pattern, Ref, Rule

PARAMS = "params"
"""The fact holding the policy's parameter values (type and id)."""
MAX_FIRINGS = 200_000
"""Firings per evaluation at most: a rule that keeps deriving facts it matches itself has no
fixpoint; the evaluation then stops with a failure instead of running forever."""
MAX_FAILURE_CHARS = 300


class FactLike(Protocol):
    """What the evaluation reads of an input fact (``kvrules.facts.model.Fact``)."""

    type: str
    id: str
    fields: dict[str, Any]


# --- the result: the shape of the backend's Evaluation -----------------------------------

@dataclass(frozen=True)
class RuleFired:
    """A rule fired: the facts it bound (alias → fact id, positive patterns in order), the
    facts its actions derived, its reason, and the points it was about."""

    rule: str
    stratum: int
    bindings: tuple[tuple[str, str], ...]
    derived: tuple[str, ...]
    reason: str
    points: frozenset[str] = frozenset()


@dataclass
class DerivedFact:
    """A fact asserted by rule ``by`` from the facts it bound."""

    type: str
    id: str
    fields: dict[str, Any]
    by: str
    bindings: tuple[tuple[str, str], ...] = ()


@dataclass
class Result:
    """The reference evaluation of one cell (fields as in ``backend.events.Evaluation``)."""

    derived: list[DerivedFact] = field(default_factory=list)
    events: list[RuleFired] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    trace: "Trace | None" = field(default=None, compare=False, repr=False)


# --- session facts and their indexes -----------------------------------------------------

@dataclass(frozen=True, eq=False)
class SessionFact:
    """A fact of the evaluation: its fields (with ``id``), its order of arrival and the
    stratum that derived it (0: an input fact)."""

    type: str
    id: str
    fields: dict[str, Any]
    seq: int
    stratum: int = 0
    by: str | None = None


def join_key(value: Any) -> Any:
    """A key two values share whenever ``eq`` or ``same_as`` with a ref can hold between
    them (same JSON type and content); the index narrows candidates, the test decides."""
    if value is MISSING:
        return MISSING
    cls = value.__class__
    if cls is str or cls is int or cls is bool or value is None:
        return (json_type(value), value)
    return (json_type(value), canonical_json(value))


class Facts:
    """The facts known so far, by type in order of arrival, with equality indexes."""

    def __init__(self) -> None:
        self.by_type: dict[str, list[SessionFact]] = {}
        self.by_id: dict[str, SessionFact] = {}
        self.count = 0
        self._indexes: dict[tuple[str, str], dict[Any, list[SessionFact]]] = {}

    def add(self, type_: str, id_: str, fields: Mapping[str, Any], stratum: int = 0,
            by: str | None = None) -> SessionFact:
        fact = SessionFact(type_, id_, {**fields, "id": id_}, self.count, stratum, by)
        self.count += 1
        self.by_type.setdefault(type_, []).append(fact)
        self.by_id[id_] = fact
        for (kind, name), index in self._indexes.items():
            if kind == type_:
                index.setdefault(join_key(fact.fields.get(name, MISSING)), []).append(fact)
        return fact

    def of(self, type_: str, lo: int = 0, hi: int | None = None) -> Sequence[SessionFact]:
        """Facts of ``type_`` that arrived in ``[lo, hi)`` (by ``seq``)."""
        facts = self.by_type.get(type_, [])
        if lo == 0 and (hi is None or hi >= self.count):
            return facts
        seqs = [f.seq for f in facts]
        return facts[bisect.bisect_left(seqs, lo):
                     len(facts) if hi is None else bisect.bisect_left(seqs, hi)]

    def any_since(self, type_: str, lo: int) -> bool:
        facts = self.by_type.get(type_)
        return facts is not None and bool(facts) and facts[-1].seq >= lo

    def lookup(self, type_: str, name: str, key: Any) -> list[SessionFact]:
        """Facts of ``type_`` whose field ``name`` has join key ``key``."""
        index = self._indexes.get((type_, name))
        if index is None:
            index = {}
            for fact in self.by_type.get(type_, []):
                index.setdefault(join_key(fact.fields.get(name, MISSING)), []).append(fact)
            self._indexes[(type_, name)] = index
        return index.get(key, [])


# --- join plans ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Probe:
    """How a pattern finds its candidates: all facts of its type, or through the index of
    ``field`` with the value of ``ref`` (``absent_ok``: absent equals absent, ``same_as``)."""

    pattern: Pattern
    field: str | None = None
    ref: Ref | None = None
    absent_ok: bool = False


def _top_atoms(expr: Expr | None) -> list[Atom]:
    """Atoms that must hold for the whole ``where`` to hold (its top conjunction)."""
    if expr is None:
        return []
    if expr.kind == "atom":
        return [expr.atom] if expr.atom is not None else []
    if expr.kind == "and":
        return [a for c in expr.children for a in _top_atoms(c)]
    return []


def probe(pattern: Pattern) -> Probe:
    for atom in _top_atoms(pattern.where):
        ref = atom.operand
        if isinstance(ref, Ref) and ref.alias != pattern.alias and not atom.negated \
                and atom.op in ("eq", "same_as"):
            return Probe(pattern, atom.field, ref, atom.op == "same_as")
    return Probe(pattern)


@dataclass(frozen=True)
class Plan:
    """A rule ready to evaluate: probes of its positive and ``none`` patterns."""

    rule: Rule
    stratum: int
    positives: tuple[Probe, ...]
    negatives: tuple[Probe, ...]
    types: frozenset[str]


@per_policy
def plans(cp: CompiledPolicy) -> dict[int, list[Plan]]:
    """Every rule's plan, by stratum, in policy order."""
    out: dict[int, list[Plan]] = {}
    for rule in cp.policy.rules:
        k = cp.strata[rule.id]
        out.setdefault(k, []).append(Plan(rule, k, tuple(map(probe, rule.positives)),
                                          tuple(map(probe, rule.negatives)),
                                          frozenset(p.fact for p in rule.positives)))
    return out


Env = dict[str, dict[str, Any]]


def candidates(facts: Facts, pr: Probe, env: Env, lo: int = 0,
               hi: int | None = None) -> Sequence[SessionFact]:
    """Facts of the pattern's type in ``[lo, hi)`` that its index admits under ``env``."""
    if pr.field is None or pr.ref is None:
        return facts.of(pr.pattern.fact, lo, hi)
    value = env.get(pr.ref.alias, {}).get(pr.ref.field, MISSING)
    if value is MISSING and not pr.absent_ok:
        return ()
    found = facts.lookup(pr.pattern.fact, pr.field, join_key(value))
    if lo == 0 and hi is None:
        return found
    return [f for f in found if lo <= f.seq and (hi is None or f.seq < hi)]


def matches(pattern: Pattern, fact: SessionFact, env: Env) -> bool:
    """The pattern's ``where`` holds for ``fact`` (refs read from ``env``)."""
    if pattern.where is None:
        return True
    return eval_expr(pattern.where, fact.fields, {**env, pattern.alias: fact.fields})


Binding = tuple[SessionFact, ...]


def bindings(facts: Facts, probes: Sequence[Probe],
             ranges: Sequence[tuple[int, int | None]] | None = None) -> Iterator[Binding]:
    """Every binding of ``probes`` (positive patterns, in order); ``ranges[i]`` restricts
    the facts of pattern ``i`` to those that arrived in ``[lo, hi)``."""
    n = len(probes)
    chosen: list[SessionFact] = []
    env: Env = {}

    def step(i: int) -> Iterator[Binding]:
        if i == n:
            yield tuple(chosen)
            return
        pr = probes[i]
        lo, hi = ranges[i] if ranges is not None else (0, None)
        for fact in candidates(facts, pr, env, lo, hi):
            if any(fact is c for c in chosen) or not matches(pr.pattern, fact, env):
                continue
            chosen.append(fact)
            env[pr.pattern.alias] = fact.fields
            yield from step(i + 1)
            chosen.pop()
            del env[pr.pattern.alias]
    return step(0)


def witness(facts: Facts, pr: Probe, binding: Binding, env: Env) -> SessionFact | None:
    """A fact other than the bound ones that satisfies the ``none`` pattern (None: none)."""
    for fact in candidates(facts, pr, env):
        if not any(fact is b for b in binding) and matches(pr.pattern, fact, env):
            return fact
    return None


# --- actions ------------------------------------------------------------------------------

_PLACEHOLDER = re.compile(r"\{([a-z][a-z0-9_]*)\.([a-z][a-z0-9_]*)\}")


def render(template: str, env: Env) -> str:
    """Fill ``{alias.field}``: strings as-is (the empty string as ``""``), other values as
    JSON, an absent field as ``absent``."""
    def one(m: re.Match[str]) -> str:
        value = env.get(m.group(1), {}).get(m.group(2), "absent")
        if isinstance(value, str):
            return value or '""'
        return json.dumps(value, default=repr)
    return _PLACEHOLDER.sub(one, template)


def _operand(value: Any, env: Env) -> Any:
    if isinstance(value, Ref):
        return env.get(value.alias, {}).get(value.field)
    return value


def action_fields(action: Action, env: Env, rule: Rule,
                  bound: Mapping[str, str]) -> dict[str, Any]:
    """The fields of the fact one action asserts (``by`` is added by the caller)."""
    a = action.args
    if action.kind == "derive":  # a ref to an absent field leaves the derived field absent
        return {k: _operand(v, env) for k, v in a.get("set", {}).items()
                if not isinstance(v, Ref) or v.field in env.get(v.alias, {})}
    if action.kind == "error":
        at: Ref | None = a.get("at")
        alias = at.alias if at else rule.positives[0].alias
        return {"code": a["code"], "message": render(a["message"], env),
                "at_fact": bound.get(alias, ""), "at_field": at.field if at else ""}
    if action.kind == "fail":
        return {"group": a["group"], "condition": a["condition"],
                "reason": render(a["reason"], env)}
    if action.kind == "qualify":
        return {"group": a["group"]}
    if action.kind == "regime":
        return {"point": _operand(a["point"], env), "value": _operand(a["value"], env),
                "decided_by": _operand(a.get("decided_by", rule.id), env)}
    return {"point": _operand(a["point"], env)}


def points_of(binding: Binding) -> frozenset[str]:
    """The points a firing is about: bound point facts, and the ``point`` a bound fact names."""
    out = set()
    for fact in binding:
        if fact.type == "point":
            out.add(fact.id)
        elif isinstance(fact.fields.get("point"), str):
            out.add(fact.fields["point"])
    return frozenset(out)


def _short(message: str) -> str:
    text = " ".join(message.split())
    return text if len(text) <= MAX_FAILURE_CHARS else text[:MAX_FAILURE_CHARS - 1] + "…"


# --- the evaluation -----------------------------------------------------------------------

class _Run:
    def __init__(self, cp: CompiledPolicy, trace: bool) -> None:
        self.cp = cp
        self.facts = Facts()
        self.result = Result()
        self.counter = itertools.count(1)
        self.fired: set[tuple[str, tuple[str, ...]]] = set()
        self.firings = 0
        self.trace = Trace(cp, self.facts) if trace else None

    def fire(self, plan: Plan, binding: Binding) -> None:
        rule = plan.rule
        key = (rule.id, tuple(f.id for f in binding))
        if key in self.fired:
            return
        self.fired.add(key)
        self.firings += 1
        if self.firings > MAX_FIRINGS:
            raise _NoFixpoint(rule.id)
        aliases = [p.alias for p in rule.positives]
        env = {alias: f.fields for alias, f in zip(aliases, binding)}
        bound = {alias: f.id for alias, f in zip(aliases, binding)}
        ordered = tuple(bound.items())
        sorted_bound = tuple(sorted(ordered))
        made = []
        try:
            for action in rule.actions:
                fields = action_fields(action, env, rule, bound)
                fields["by"] = rule.id
                fid = f"{rule.id}#{next(self.counter)}"
                self.facts.add(action.produces, fid, fields, plan.stratum, rule.id)
                self.result.derived.append(DerivedFact(action.produces, fid, fields, rule.id,
                                                   sorted_bound))
                made.append(fid)
            self.result.events.append(RuleFired(rule.id, plan.stratum, ordered, tuple(made),
                                            render(rule.reason, env), points_of(binding)))
        except Exception as exc:  # recorded, and the cell fails closed
            self.result.failures.append(f"rule {rule.id}: {type(exc).__name__}: {exc}")

    def allowed(self, plan: Plan) -> list[Binding]:
        """Bindings of a rule with ``none`` patterns that no fact witnesses against."""
        kept = []
        aliases = [p.alias for p in plan.rule.positives]
        for binding in bindings(self.facts, plan.positives):
            env = {alias: f.fields for alias, f in zip(aliases, binding)}
            blocker = next(((i, w) for i, pr in enumerate(plan.negatives)
                            if (w := witness(self.facts, pr, binding, env)) is not None), None)
            if blocker is None:
                kept.append(binding)
            elif self.trace is not None:
                self.trace.blocked.setdefault(plan.rule.id, []).append(
                    (tuple(f.id for f in binding), blocker[0], blocker[1].id))
        return kept

    def stratum(self, k: int, rules: list[Plan]) -> None:
        negated = [p for p in rules if p.negatives]
        plain = [p for p in rules if not p.negatives]
        for plan, found in [(p, self.allowed(p)) for p in negated]:
            for binding in found:
                self.fire(plan, binding)
        lo, hi = 0, self.facts.count  # round 1: every known fact is new to these rules
        while lo < hi:
            for plan in plain:
                self.round(plan, lo, hi)
            lo, hi = hi, self.facts.count

    def round(self, plan: Plan, lo: int, hi: int) -> None:
        """Bindings with at least one fact of ``[lo, hi)`` and every fact before ``hi``:
        pattern ``i`` takes a new fact, those before it old ones (semi-naive)."""
        probes = plan.positives
        for i, pr in enumerate(probes):
            if not self.facts.any_since(pr.pattern.fact, lo):
                continue
            ranges = [(0, lo)] * i + [(lo, hi)] + [(0, hi)] * (len(probes) - i - 1)
            for binding in list(bindings(self.facts, probes, ranges)):
                self.fire(plan, binding)


class _NoFixpoint(Exception):
    pass


def evaluate(cp: CompiledPolicy, facts: Sequence[FactLike], trace: bool = False) -> Result:
    """The reference evaluation of one cell's ``facts`` (the backend's input) under ``cp``."""
    run = _Run(cp, trace)
    run.facts.add(PARAMS, PARAMS, dict(cp.parameters))
    for fact in facts:
        run.facts.add(fact.type, fact.id, fact.fields)
    by_stratum = plans(cp)
    try:
        for k in sorted(by_stratum):
            run.stratum(k, by_stratum[k])
    except _NoFixpoint as stop:
        run.result.failures.append(f"rule {stop.args[0]}: no fixpoint after {MAX_FIRINGS} "
                                   "firings")
    run.result.failures = [_short(f) for f in run.result.failures]
    run.result.trace = run.trace
    return run.result


# --- comparing two evaluations ------------------------------------------------------------

class EvaluationLike(Protocol):
    """What a comparison reads of an evaluation (the engine's or this module's result)."""

    @property
    def derived(self) -> Sequence[Any]: ...
    @property
    def events(self) -> Sequence[Any]: ...
    @property
    def failures(self) -> Sequence[str]: ...


def canonical(ev: EvaluationLike) -> tuple[Any, ...]:
    """An evaluation with every derived id replaced by the firing that made it (rule,
    bindings named the same way, position among that firing's facts) and everything in
    sorted order: equal for evaluations that differ only in the order they fired in."""
    made: dict[str, tuple[str, tuple[tuple[str, str], ...], int]] = {}
    for e in ev.events:
        for n, fid in enumerate(e.derived):
            made[fid] = (e.rule, tuple(e.bindings), n)
    names: dict[str, str] = {}

    def name(fid: str, depth: int = 0) -> str:
        if fid not in made or depth > 64:
            return fid
        if fid not in names:
            rule, bound, n = made[fid]
            inner = ",".join(f"{a}={name(f, depth + 1)}" for a, f in bound)
            names[fid] = f"{rule}<{inner}>{n}"
        return names[fid]

    ids = re.compile("|".join(map(re.escape, sorted(made, key=len, reverse=True))) + r"(?!\d)"
                     ) if made else None

    def text(value: str) -> str:
        """A string naming derived ids (a reason or message that shows an ``id``)."""
        if ids is None or "#" not in value:
            return value
        return ids.sub(lambda m: name(m.group(0)), value)

    def fields(d: Mapping[str, Any]) -> str:
        return canonical_json({k: text(v) if isinstance(v, str) else v for k, v in d.items()})

    derived = sorted((name(d.id), d.type, d.by, fields(d.fields),
                      tuple((a, name(f)) for a, f in d.bindings)) for d in ev.derived)
    events = sorted((e.rule, e.stratum, tuple((a, name(f)) for a, f in e.bindings),
                     tuple(name(f) for f in e.derived), text(e.reason),
                     tuple(sorted(text(p) for p in e.points)))
                    for e in ev.events)
    return (tuple(derived), tuple(events), tuple(sorted(ev.failures)))


def first_difference(engine: EvaluationLike, reference: EvaluationLike) -> str | None:
    """None when the two evaluations agree (:func:`canonical`), else the first difference."""
    return canonical_difference(canonical(engine), canonical(reference))


def canonical_difference(a: tuple[Any, ...], b: tuple[Any, ...]) -> str | None:
    """:func:`first_difference` of two evaluations already made canonical (the reference's
    can be made where it was evaluated)."""
    if a == b:
        return None
    for label, xs, ys in zip(("derived fact", "firing", "failure"), a, b):
        only_a = [x for x in xs if x not in set(ys)]
        only_b = [y for y in ys if y not in set(xs)]
        if only_a or only_b:
            first = (f"engine only: {only_a[0]!r}" if only_a
                     else f"reference only: {only_b[0]!r}")
            return (f"{label}s differ ({len(only_a)} engine only, {len(only_b)} reference "
                    f"only); {first}")
        if xs != ys:
            return f"{label}s differ in multiplicity"
    return "evaluations differ"


# --- the trace: why a rule did not fire ---------------------------------------------------

@dataclass(frozen=True)
class WhyNot:
    """The first pattern of a rule that no binding gets past.

    ``kind``: ``no_fact`` (no fact of the pattern's type was visible), ``failed`` (the
    candidate that got furthest fails ``atom``, having ``observed`` in the field it tests),
    ``blocked`` (a ``none`` pattern is matched by ``fact`` for every binding).
    """

    pattern: Pattern
    kind: str
    fact: SessionFact | None = None
    atom: Atom | None = None
    observed: Any = MISSING
    candidates: int = 0


@dataclass
class Trace:
    """What an evaluation kept for explaining it: every fact (with the stratum it appeared
    in), the ``none`` witnesses that blocked bindings (rule → (bound ids, pattern index,
    witness id)), and :meth:`why_not`."""

    cp: CompiledPolicy
    facts: Facts
    blocked: dict[str, list[tuple[tuple[str, ...], int, str]]] = field(default_factory=dict)

    def visible(self, pattern: Pattern, stratum: int) -> list[SessionFact]:
        """Facts of the pattern's type a rule of ``stratum`` can see (``none`` patterns: the
        facts known when the stratum starts)."""
        limit = stratum - 1 if pattern.negated else stratum
        return [f for f in self.facts.by_type.get(pattern.fact, []) if f.stratum <= limit]

    def why_not(self, rule_id: str) -> WhyNot | None:
        """Why ``rule_id`` did not fire (None: it has a binding on these facts)."""
        rule = self.cp.rules[rule_id]
        stratum = self.cp.strata[rule_id]
        partial: list[tuple[Env, list[SessionFact]]] = [({}, [])]
        for pattern in rule.positives:
            cands = self.visible(pattern, stratum)
            nxt = [({**env, pattern.alias: f.fields}, bound + [f]) for env, bound in partial
                   for f in cands if all(f is not b for b in bound) and
                   matches(pattern, f, env)]
            if not nxt:
                return _failure(pattern, cands, partial[0][0])
            partial = nxt
        for pattern in rule.negatives:
            cands = self.visible(pattern, stratum)
            hits = [next((f for f in cands if all(f is not b for b in bound)
                          and matches(pattern, f, env)), None) for env, bound in partial]
            if all(h is not None for h in hits):
                return WhyNot(pattern, "blocked", hits[0], None, MISSING, len(cands))
            partial = [p for p, h in zip(partial, hits) if h is None]
        return None


def _failure(pattern: Pattern, cands: list[SessionFact], env: Env) -> WhyNot:
    if not cands:
        return WhyNot(pattern, "no_fact")
    assert pattern.where is not None
    where = pattern.where
    order = {id(a): i for i, a in enumerate(_all_atoms(where))}

    def failing(f: SessionFact) -> Atom | None:
        return first_failure(where, f.fields, {**env, pattern.alias: f.fields})
    best = max(cands, key=lambda f: order.get(id(failing(f)), -1))
    atom = failing(best)
    observed = best.fields.get(atom.field, MISSING) if atom is not None else MISSING
    return WhyNot(pattern, "failed", best, atom, observed, len(cands))


def _all_atoms(expr: Expr) -> list[Atom]:
    if expr.kind == "atom":
        return [expr.atom] if expr.atom is not None else []
    return [a for c in expr.children for a in _all_atoms(c)]


__all__ = ["DerivedFact", "RuleFired", "Result", "Trace", "WhyNot", "canonical", "evaluate",
           "first_difference"]
