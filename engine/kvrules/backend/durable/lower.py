"""Lower compiled rules to durable-rules ruleset definitions (one ruleset per stratum).

Conditions test encoded values (see backend/durable/encode.py). A rule with ``none`` patterns is
split into probes the runtime uses for stratified negation: ``<id>#cand`` (the positive
part) and ``<id>#wit<i>`` (positive part plus the i-th negated pattern), both one stratum
earlier, and the main rule joined on a ``neg_ok`` fact the runtime asserts for every
candidate binding without a witness. durable's own ``$not`` is never used.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from kvrules.policy.evaluate import atoms, atoms as atoms_of
from kvrules.policy import codes
from kvrules.policy.model import Atom, Expr, Pattern, Ref, Rule
from kvrules.policy.operators import OPERATORS
from kvrules.backend.durable.encode import (ABSENT_MARK, AGREE_SUFFIX, DISCRIMINATOR,
                                           ENGINE_STRING_BYTES, JOIN_ID, LENGTH_SUFFIX,
                                           NUMERIC_SUFFIX, TRUTHY_SUFFIX, companion,
                                           encode_scalar, escape_prefix, string_problem)
from kvrules.facts.jsontypes import value_type

if TYPE_CHECKING:  # compiler passes: the compiler itself runs only to compile
    from kvrules.policy.compiler import CompileState, Pass

ABSENT_TAG = "absent"
NEG_OK = "neg_ok"
INVERSE = {"lt": "$gte", "le": "$gt", "gt": "$lte", "ge": "$lt"}
DIRECT = {"lt": "$lt", "le": "$lte", "gt": "$gt", "ge": "$gte"}
Lowering = Callable[[str, Any, bool], dict[str, Any]]
"""``(field, literal operand, negated) -> engine condition``."""


def engine_field(name: str) -> str:
    """The engine field a rule's field is read from: a fact's ``id`` from ``fid`` (the
    engine leaves a stored fact's ``id`` pointing into the caller's JSON text, which a join
    may read after it was freed; ``fid`` it copies, see ``encode.JOIN_ID``)."""
    return JOIN_ID if name == "id" else name


def _is_number(value: Any) -> bool:
    return value_type(value) in ("integer", "number")


def _num(field: str) -> str:
    return field + NUMERIC_SUFFIX


def _absent(field: str) -> dict[str, Any]:
    return {"$or": [{"$nex": {field: 1}}, {field: ABSENT_MARK}]}


def _present(field: str) -> dict[str, Any]:
    return {"$neq": {field: ABSENT_MARK}}  # $neq never matches a missing field


def _eq_literal(field: str, value: Any) -> dict[str, Any]:
    if _is_number(value):
        return {"$and": [{_num(field): 1}, {field: value}]}
    return {field: encode_scalar(value)}


def _not_numeric(field: str) -> dict[str, Any]:
    return {"$or": [{"$nex": {_num(field): 1}}, {_num(field): 0}]}


def _ne_present(field: str, value: Any) -> dict[str, Any]:
    """Present and different (the absent case is added by the caller)."""
    if _is_number(value):
        return {"$or": [{_num(field): 0}, {"$neq": {field: value}}]}
    return {"$neq": {field: encode_scalar(value)}}


def _ne_literal(field: str, value: Any) -> dict[str, Any]:
    return {"$or": [{"$nex": {field: 1}}, _ne_present(field, value)]}


def _is(field: str, kind: str, negated: bool) -> dict[str, Any]:
    if kind == "number":
        return _not_numeric(field) if negated else {_num(field): 1}
    t = companion(field)
    return {"$or": [{"$nex": {t: 1}}, {"$neq": {t: kind}}]} if negated else {t: kind}


def _ref_atom(atom: Atom, alias: str) -> dict[str, Any]:
    ref = atom.operand
    assert isinstance(ref, Ref)
    f, ref_field = engine_field(atom.field), engine_field(ref.field)
    t = companion(f)
    source = "$m" if ref.alias == alias else ref.alias
    other, other_t = {source: ref_field}, {source: companion(ref_field)}
    if atom.op == "same_as":  # absent markers on both sides: absent equals absent
        if atom.negated:
            return {"$or": [{"$neq": {f: other}}, {"$neq": {t: other_t}}]}
        return {"$and": [{f: other}, {t: other_t}]}
    if atom.op == "eq" and not atom.negated:
        return {"$and": [{"$neq": {t: ABSENT_TAG}}, {f: other}, {t: other_t}]}
    if atom.op == "eq":
        return {"$or": [{"$nex": {f: 1}}, {t: ABSENT_TAG}, {"$neq": {f: other}},
                        {"$neq": {t: other_t}}]}
    if atom.negated:
        raise ValueError("a negated comparison with a ref cannot be lowered")
    other_n = {source: _num(ref_field)}
    return {"$and": [{_num(f): 1}, {_num(f): other_n}, {DIRECT[atom.op]: {f: other}}]}


def _lower_eq(f: str, v: Any, neg: bool) -> dict[str, Any]:
    return _ne_literal(f, v) if neg else _eq_literal(f, v)


def _lower_in(f: str, v: Any, neg: bool) -> dict[str, Any]:
    if neg:
        return {"$or": [{"$nex": {f: 1}}, {"$and": [_ne_present(f, x) for x in v]}]}
    return {"$or": [_eq_literal(f, x) for x in v]}


def _lower_order(op: str) -> Lowering:
    def lower(f: str, v: Any, neg: bool) -> dict[str, Any]:
        if neg:
            return {"$or": [{"$nex": {_num(f): 1}}, {_num(f): 0}, {INVERSE[op]: {f: v}}]}
        return {"$and": [{_num(f): 1}, {DIRECT[op]: {f: v}}]}
    return lower


def _lower_exists(f: str, v: Any, neg: bool) -> dict[str, Any]:
    return _absent(f) if neg else _present(f)


def _lower_truthy(f: str, v: Any, neg: bool) -> dict[str, Any]:
    b = f + TRUTHY_SUFFIX
    return {"$or": [{"$nex": {b: 1}}, {b: 0}]} if neg else {b: 1}


def _lower_is(f: str, v: Any, neg: bool) -> dict[str, Any]:
    if v == ABSENT_TAG:
        return _present(f) if neg else _absent(f)
    return _is(f, v, neg)


def _lower_starts_with(f: str, v: Any, neg: bool) -> dict[str, Any]:
    if neg:
        raise ValueError("starts_with cannot be negated")
    return {"$mt": {f: "s:" + escape_prefix(v) + ".*"}}


def _lower_contains_any(f: str, v: Any, neg: bool) -> dict[str, Any]:
    items = ["s:" + x for x in v]
    if neg:  # absent (never sent, or sent as the absent marker) holds none of the items
        return {"$or": [{"$nex": {f: 1}}, {f: ABSENT_MARK},
                        {"$and": [{"$iall": {f: {"$neq": {"$i": x}}}} for x in items]}]}
    return {"$or": [{"$iany": {f: {"$i": x}}} for x in items]}


LENGTH_OPS = {"eq": ("$eq", "$neq"), "ne": ("$neq", "$eq"), "lt": ("$lt", "$gte"),
              "le": ("$lte", "$gt"), "gt": ("$gt", "$lte"), "ge": ("$gte", "$lt")}


def _cmp(op: str, field: str, value: Any) -> dict[str, Any]:
    return {field: value} if op == "$eq" else {op: {field: value}}


def _lower_length(f: str, v: Any, neg: bool) -> dict[str, Any]:
    """Lists carry a ``__len`` companion (see encode.encode_fields)."""
    (cmp, n), = v.items()
    direct, inverse = LENGTH_OPS[cmp]
    t, n_field = companion(f), f + LENGTH_SUFFIX
    if neg:
        return {"$or": [{"$nex": {t: 1}}, {"$neq": {t: "array"}}, _cmp(inverse, n_field, n)]}
    return {"$and": [{t: "array"}, _cmp(direct, n_field, n)]}


def _lower_agree_on(f: str, v: Any, neg: bool) -> dict[str, Any]:
    """Lists of objects carry ``__ag`` (1: every item is an object) and one ``__ag_<key>``
    per key some item holds (1: the items agree on it); a key no item holds agrees."""
    ok = f + AGREE_SUFFIX
    keys = [f"{ok}_{k}" for k in v]
    if neg:
        return {"$or": [{"$nex": {ok: 1}}, {ok: 0}] + [{k: 0} for k in keys]}
    return {"$and": [{ok: 1}] + [{"$or": [{"$nex": {k: 1}}, {k: 1}]} for k in keys]}


def _lower_same_as(f: str, v: Any, neg: bool) -> dict[str, Any]:
    raise ValueError("same_as needs a {ref: ...} operand")


LOWERINGS: dict[str, Lowering] = {
    "eq": _lower_eq, "in": _lower_in, "lt": _lower_order("lt"), "le": _lower_order("le"),
    "gt": _lower_order("gt"), "ge": _lower_order("ge"), "exists": _lower_exists,
    "truthy": _lower_truthy, "is": _lower_is, "starts_with": _lower_starts_with,
    "contains_any": _lower_contains_any, "length": _lower_length,
    "agree_on": _lower_agree_on, "same_as": _lower_same_as,
}
"""The engine condition of every registry operator (kvrules.policy.operators) with a
literal operand: ``(field, operand, negated) -> condition``. Refs: see :func:`_ref_atom`."""


def lower_atom(atom: Atom, alias: str = "") -> dict[str, Any]:
    """The engine condition for one atom (raises ValueError for unsupported negations)."""
    if isinstance(atom.operand, Ref):
        return _ref_atom(atom, alias)
    lowering = LOWERINGS.get(atom.op)
    if lowering is None:
        raise ValueError(f"unknown operator {atom.op}")
    return lowering(engine_field(atom.field), atom.operand, atom.negated)


def _flatten(key: str, parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Merge nested same-kind connectives so the engine sees the flattest expression."""
    out: list[dict[str, Any]] = []
    for part in parts:
        if set(part) == {key}:
            out.extend(part[key])
        else:
            out.append(part)
    return out[0] if len(out) == 1 else {key: out}


def lower_expr(expr: Expr, alias: str = "") -> dict[str, Any]:
    if expr.kind == "atom":
        assert expr.atom is not None
        return lower_atom(expr.atom, alias)
    key = "$and" if expr.kind == "and" else "$or"
    return _flatten(key, [lower_expr(c, alias) for c in expr.children])


MAX_VARIANTS = 64
"""Most engine rules one policy rule may expand to (see :func:`_dnf`)."""


def lower_pattern(pattern: Pattern) -> dict[str, Any]:
    """``{alias: condition}`` for one positive fact pattern."""
    conds: list[dict[str, Any]] = [{DISCRIMINATOR: pattern.fact}]
    if pattern.where is not None:
        conds.append(lower_expr(pattern.where, pattern.alias))
    return {pattern.alias: _flatten("$and", conds)}


def _joined_alias(pattern: Pattern) -> str | None:
    """The first other bound fact this pattern compares with (a join in the engine)."""
    for atom in atoms_of(pattern.where):
        if isinstance(atom.operand, Ref) and atom.operand.alias != pattern.alias:
            return atom.operand.alias
    return None


def _dnf(expr: dict[str, Any]) -> list[list[dict[str, Any]]]:
    """Disjunctive normal form over engine leaves: a list of flat conjunctions."""
    if set(expr) == {"$and"}:
        out: list[list[dict[str, Any]]] = [[]]
        for child in expr["$and"]:
            out = [left + right for left in out for right in _dnf(child)]
            if len(out) > MAX_VARIANTS:
                raise ValueError(f"the condition expands to more than {MAX_VARIANTS} cases")
        return out
    if set(expr) == {"$or"}:
        return [conj for child in expr["$or"] for conj in _dnf(child)]
    return [[expr]]


def pattern_variants(pattern: Pattern) -> list[dict[str, Any]]:
    """Alternatives of one pattern; a joining pattern is split into flat conjunctions.

    durable-rules 2.0.28 mis-evaluates nested ``$and``/``$or`` in join (beta) conditions
    (it skips to the first end marker it meets, which may close an inner group), so a join
    never reaches the engine with nesting: each disjunct becomes its own engine rule.
    """
    lowered = lower_pattern(pattern)
    other = _joined_alias(pattern)
    if other is None:
        return [lowered]
    (alias, expr), = lowered.items()
    # An engine conjunction holding exactly one join comparison reads past its expression
    # list (valgrind: invalid read in reduceExpressionSequence); a second, always-true join
    # comparison (two bound facts never share an id) keeps every join list well-formed.
    distinct = {"$neq": {JOIN_ID: {other: JOIN_ID}}}
    return [{alias: {"$and": conj + [distinct]}} for conj in _dnf(expr)]


def _variants(name: str, run: str, alternatives: list[list[dict[str, Any]]]
              ) -> dict[str, dict[str, Any]]:
    """Engine rules for every combination of pattern alternatives (all run one action)."""
    combos: list[list[dict[str, Any]]] = [[]]
    for options in alternatives:
        combos = [c + [o] for c in combos for o in options]
        if len(combos) > MAX_VARIANTS:
            raise ValueError(f"the rule expands to more than {MAX_VARIANTS} engine rules")
    return {name if n == 0 else f"{name}#v{n}": {"all": combo, "run": run}
            for n, combo in enumerate(combos)}


def neg_ok_pattern(rule: Rule) -> dict[str, Any]:
    """The join on the runtime's ``neg_ok`` fact for this rule's binding."""
    conds: list[dict[str, Any]] = [{DISCRIMINATOR: NEG_OK}, {"rule": "s:" + rule.id}]
    conds += [{f"b_{p.alias}": {p.alias: JOIN_ID}} for p in rule.positives]
    return {"neg_ok_": {"$and": conds}}


def lower_rule(rule: Rule) -> dict[str, dict[str, Any]]:
    """The main engine rule(s), named by the rule id (and ``#v<n>`` for split variants)."""
    alternatives = [pattern_variants(p) for p in rule.positives]
    if rule.negatives:
        alternatives.append([neg_ok_pattern(rule)])
    return _variants(rule.id, rule.id, alternatives)


def lower_probes(rule: Rule) -> dict[str, dict[str, Any]]:
    """Candidate and witness probes of a rule with ``none`` patterns."""
    positives = [pattern_variants(p) for p in rule.positives]
    out = _variants(f"{rule.id}#cand", f"{rule.id}#cand", positives)
    for i, neg in enumerate(rule.negatives):
        pos = Pattern(neg.fact, neg.alias, neg.where, False, neg.pointer, neg.loc)
        out.update(_variants(f"{rule.id}#wit{i}", f"{rule.id}#wit{i}",
                             positives + [pattern_variants(pos)]))
    return out


SESSION_FACT = "params"
"""The one fact every session holds (the runtime always asserts the policy parameters)."""


def sink_rules(fact_types: list[str]) -> dict[str, dict[str, Any]]:
    """A rule that makes every fact 'handled' (durable rejects unmatched facts), plus an opener.

    The sink matches a fact of any of ``fact_types`` and never fires (it waits for a fact of
    no type). It is one rule, not one per type: the engine allocates and clears 8 KiB per
    pattern of a ruleset for every new session, and per-type sinks (two patterns each) were
    most of the patterns of every stratum but the first.

    ``session#open`` fires once per session on the params fact. durable-rules 2.0.28 leaves a
    session's action context uninitialised until an action runs, and ``delete_state`` then
    frees garbage (heap corruption seen under valgrind); one action per session avoids that.
    """
    any_type = {"$or": [{DISCRIMINATOR: t} for t in fact_types]}
    return {"sink#": {"all": [{"x": any_type}, {"y": {DISCRIMINATOR: "__never__"}}],
                      "run": "sink#"},
            "session#open": {"all": [{"x": {DISCRIMINATOR: SESSION_FACT}}], "run": "sink#"}}


class LiteralTooLong(ValueError):
    """A string of a rule is longer than the engine compares whole."""


def _check_strings(lowered: Any) -> None:
    """Raise ValueError when a string of a lowered rule (a literal, a ``$mt`` pattern, a
    name) or of an action's literals is longer than the engine compares whole (16-bit
    lengths, see ``encode.ENGINE_STRING_BYTES``): it would match what merely starts alike."""
    stack = [lowered]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        elif isinstance(item, str):
            problem = string_problem(item, ENGINE_STRING_BYTES)
            if problem:
                raise LiteralTooLong(f"a rule literal is a {problem}; the engine would "
                                     "compare only its start")


def lower_to_durable(state: CompileState) -> None:
    """One durable ruleset definition per stratum (probes one stratum before their rule)."""
    policy = state.policy
    assert policy is not None
    top = max(state.strata.values(), default=1)
    rulesets: list[dict[str, Any]] = [{} for _ in range(top)]
    for rule in policy.rules:
        k = state.strata[rule.id] - 1
        try:
            lowered = lower_rule(rule)
            if rule.negatives:  # stratify never puts such a rule first
                assert k >= 1, f"rule {rule.id} with 'none' in the first stratum"
                probes = lower_probes(rule)
                _check_strings(probes)
                rulesets[k - 1].update(probes)
            _check_strings(lowered)
            _check_strings([a.args for a in rule.actions])
            rulesets[k].update(lowered)
        except ValueError as exc:
            advice = "" if isinstance(exc, LiteralTooLong) else "; split the rule"
            state.error(codes.RULE_UNSUPPORTED, f"{exc}{advice}", rule.loc, rule.pointer,
                        rule.id)
    kinds = sorted(state.fact_types) + [NEG_OK]
    for k, ruleset in enumerate(rulesets, start=1):
        ruleset.update(sink_rules(kinds))
        if len(ruleset) > MAX_ENGINE_RULES:
            state.error(codes.RULE_LIMIT_ERROR, f"stratum {k} needs {len(ruleset)} engine rules; "
                        f"the engine takes at most {MAX_ENGINE_RULES}", policy.header_loc)
    state.lowered = rulesets


def _pattern_type(condition: dict[str, Any]) -> str | None:
    """The fact type a lowered pattern's condition requires (see :func:`lower_pattern`)."""
    parts = condition.get("$and", [condition])
    for part in parts if isinstance(parts, list) else []:
        if isinstance(part, dict) and isinstance(part.get(DISCRIMINATOR), str):
            return str(part[DISCRIMINATOR])
    return None


def types_matched(ruleset: dict[str, Any]) -> frozenset[str] | None:
    """The fact types some rule of a lowered ruleset can match (sinks aside), or None when a
    pattern does not name its type. A session needs no other fact: one no rule matches
    changes nothing but costs the engine its parsing and storage."""
    types: set[str] = set()
    for name, rule in ruleset.items():
        if name.startswith("sink#"):
            continue
        patterns = rule.get("all", rule.get("any"))
        if not isinstance(patterns, list):
            return None
        for pattern in patterns:
            found = [_pattern_type(c) for c in pattern.values() if isinstance(c, dict)]
            if len(found) != 1 or found[0] is None:
                return None
            types.add(found[0])
    return frozenset(types)


def values_read(rulesets: list[dict[str, Any]]) -> frozenset[str]:
    """Every name the lowered definitions hold, as a key or, in a join, as a value: the
    fact fields whose own value some rule can read (tested, compared, joined on or checked
    for presence). A field only its companions stand for (``x`` of ``x__len``) is not one."""
    names: set[str] = set()
    stack: list[Any] = list(rulesets)
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            names.update(key for key in item if isinstance(key, str))
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str):
            names.add(item)
    return frozenset(names)


def with_companion_fields(names: frozenset[str]) -> frozenset[str]:
    """``names`` and the field each companion among them belongs to (``x`` for ``x__t`` or
    ``x__ag_key``: the part before any ``__``)."""
    out = set(names)
    for name in names:
        at = name.find("__", 1)
        while at > 0:
            out.add(name[:at])
            at = name.find("__", at + 1)
    return frozenset(out)


MAX_ENGINE_RULES = 4000
"""durable-rules refuses a ruleset of 4096 rules or more (error 106)."""
MAX_CONSTANTS_PER_FIELD = 500
"""durable-rules hangs with more than 511 distinct constants tested on one field."""


def check_engine_limits(state: CompileState) -> None:
    """Reject policies the engine would hang on: too many distinct constants per field, or
    too many list-item tests on one field over all rules."""
    policy = state.policy
    assert policy is not None
    seen: dict[tuple[str, str], set[str]] = {}
    items: dict[tuple[str, str], int] = {}
    crossing: dict[tuple[str, str], tuple[Rule, Any]] = {}
    first: dict[tuple[str, str], tuple[Rule, Any]] = {}
    for rule in policy.rules:
        for pattern in rule.patterns:
            for atom in atoms(pattern.where):
                if isinstance(atom.operand, Ref):
                    continue
                key = (pattern.fact, atom.field)
                literals = OPERATORS[atom.op].content_values(atom.operand)
                if literals:
                    seen.setdefault(key, set()).update(repr(v) for v in literals)
                    first.setdefault(key, (rule, atom))
                if atom.op in ITEM_TEST_OPS and isinstance(atom.operand, (list, tuple)):
                    before = items.get(key, 0)
                    items[key] = before + len(atom.operand)
                    if before <= MAX_CONSTANTS_PER_FIELD < items[key]:
                        crossing[key] = (rule, atom)  # name the rule that crosses the limit
    for key in sorted(set(seen) | set(crossing)):
        values = seen.get(key, set())
        if len(values) > MAX_CONSTANTS_PER_FIELD:
            rule, atom = first[key]
            state.error(codes.RULE_UNSUPPORTED, f"{key[0]}.{key[1]} is compared with "
                        f"{len(values)} distinct values; the engine takes at most "
                        f"{MAX_CONSTANTS_PER_FIELD}", atom.loc, atom.pointer, rule.id)
        elif key in crossing:
            rule, atom = crossing[key]
            state.error(codes.RULE_UNSUPPORTED, f"{key[0]}.{key[1]} is searched for list items "
                        f"{items[key]} times over all rules; the engine takes at most "
                        f"{MAX_CONSTANTS_PER_FIELD}", atom.loc, atom.pointer, rule.id)


ITEM_TEST_OPS = frozenset({"contains_any"})
"""Operators lowered to per-item list tests (``$iany``/``$iall``): the engine does not share
equal item tests between rules, so they count with multiplicity toward the hang limit
(300 copies of one rule testing 3 items hang classify; 600 copies of an equality do not)."""


PASSES: tuple[tuple[str, Pass], ...] = (
    ("check_engine_limits", check_engine_limits), ("lower_to_durable", lower_to_durable))
"""The backend's compiler passes, run after the policy's own."""
