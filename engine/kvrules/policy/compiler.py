"""The policy compiler: an ordered tuple of named passes over a CompileState.

``load_yaml → validate_schema → build_model → resolve_names → check_types → stratify``,
then the backend's passes (engine limits, lowering). Each pass appends diagnostics; the
driver stops at a gate when anything failed, so a policy that compiles is one the runtime
can evaluate safely. ``kvrules rules check`` runs the same passes and prints the diagnostics.
"""
from __future__ import annotations

import difflib
import hashlib
from dataclasses import dataclass, field
from functools import lru_cache
from importlib.abc import Traversable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable

from kvrules.diagnostics import Diagnostic, KvrulesUsageError, sort_diagnostics
from kvrules.policy import codes, decisions, operators
from kvrules.policy.catalogue import base_catalogue
from kvrules.policy.evaluate import atoms
from kvrules.policy.extends import Layer, Sources, read_layers, resolve_extends
from kvrules.policy.model import (BUILTIN_FACTS, DERIVED_COMMON_FIELDS, Loc, Policy, Ref,
                                  Rule)
from kvrules.policy.decisions import parse_decisions
from kvrules.policy.parse import Located, parse_header, parse_rule
from kvrules.policy.yamlpos import (YamlSyntaxError, decode_rule_file, load_with_positions,
                                    position_of)
from kvrules.resources import RULE_FILE_SUFFIXES, load_schema, rules_dir

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator

TEMPLATE_FIELDS = ("message", "reason")


@dataclass
class CompileState:
    """Everything the passes read and write."""

    source: str
    files: dict[str, str]
    docs: dict[str, tuple[Any, dict[str, tuple[int, int]]]] = field(default_factory=dict)
    policy: Policy | None = None
    fact_types: dict[str, dict[str, str]] = field(default_factory=dict)
    strata: dict[str, int] = field(default_factory=dict)
    lowered: Any = None
    """What the backend made of the rules (opaque here)."""
    diagnostics: list[Diagnostic] = field(default_factory=list)
    read_errors: dict[str, YamlSyntaxError] = field(default_factory=dict)
    layers: list[Layer] = field(default_factory=list)
    """The policy directories of an ``extends`` chain, base first (one without it)."""
    skipped: set[tuple[str, int]] = field(default_factory=set)
    """(file, index) of base rules an extending policy overrides or disables."""
    unvalidated: set[str] = field(default_factory=set)
    """Rule files the schema did not check (too large to be worth it): never parsed."""
    quarantined: set[str] = field(default_factory=set)
    """Rule files set aside for a YAML or schema error of their own, so the later passes
    still check the other files (the policy as a whole stays invalid)."""

    def error(self, code: str, message: str, loc: Loc, pointer: str = "",
              rule: str | None = None, severity: str = "error") -> None:
        self.diagnostics.append(Diagnostic(file=loc[0], line=loc[1], column=loc[2],
                                           message=message, code=code, pointer=pointer,
                                           rule=rule, severity=severity))  # type: ignore[arg-type]

    @property
    def failed(self) -> bool:
        return any(d.severity == "error" for d in self.diagnostics)


def load_yaml(state: CompileState) -> None:
    """Parse every file, keeping positions; a syntax error names its line and column."""
    for name, text in sorted(state.files.items()):
        try:
            if name in state.read_errors:
                raise state.read_errors[name]
            state.docs[name] = load_with_positions(text)
        except YamlSyntaxError as exc:
            state.error(exc.code, str(exc), (name, exc.line, exc.column))
    _check_rule_count(state)


def _check_rule_count(state: CompileState) -> None:
    """Refuse a policy with more than MAX_POLICY_RULES rules before any costly pass."""
    counted = [(name, _rules_in(doc)) for name, (doc, _) in sorted(state.docs.items())
               if isinstance(doc, dict)]
    total = sum(n for _, n in counted)
    if total <= MAX_POLICY_RULES:
        return
    name, _ = max(counted, key=lambda c: c[1])
    line, col = position_of(state.docs[name][1], "/rules")
    state.error(codes.RULE_LIMIT_ERROR, f"the policy has {total} rules; kvrules takes at most "
                f"{MAX_POLICY_RULES}", (name, line, col), "/rules")


def _rules_in(doc: dict[str, Any]) -> int:
    """Rules of one (not yet validated) file: its rules, and the rules its decisions
    lower to (one per step plus one)."""
    rules = doc.get("rules")
    count = len(rules) if isinstance(rules, list) else 0
    decisions = doc.get("decisions")
    for d in decisions if isinstance(decisions, list) else []:
        steps = d.get("steps") if isinstance(d, dict) else None
        count += 1 + (len(steps) if isinstance(steps, list) else 0)
    return count


MAX_POLICY_RULES = 3000
"""Most rules one policy may hold, checked before any later pass (bounds their cost)."""


@lru_cache(maxsize=1)
def _rules_validator() -> "Draft202012Validator":
    from jsonschema import Draft202012Validator  # only when compiling: a cached policy
    return Draft202012Validator(load_schema("rules.schema.json"))  # never needs it


def _json_pointer(path: Any) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)


def validate_schema(state: CompileState) -> None:
    """Check each file against schemas/rules.schema.json before anything is compiled.

    A file holding more rules than a policy may is not worth validating (and may be slow
    to): it is marked unvalidated and never parsed. Every other file is validated, whatever
    the others hold, so no shape the schema did not accept reaches the parser."""
    from jsonschema.exceptions import best_match
    for name, (data, positions) in sorted(state.docs.items()):
        if data is None:
            continue
        if isinstance(data, dict) and _rules_in(data) > MAX_POLICY_RULES:
            state.unvalidated.add(name)
            continue
        for top in sorted(_rules_validator().iter_errors(data), key=lambda e: list(e.path)):
            err = best_match([top])  # the most specific location inside oneOf/anyOf branches
            ptr = _json_pointer(err.absolute_path)
            rule = _rule_id_at(data, list(err.absolute_path))
            line, col = position_of(positions, ptr)
            state.error(codes.RULE_SCHEMA_ERROR, _schema_message(top, err), (name, line, col),
                        ptr, rule)


NOISE = ("type", "required", "anyOf", "oneOf", "$ref", "minProperties", "maxProperties")


def _schema_message(top: Any, err: Any) -> str:
    """The schema's own words, preferring the telling reason over 'not valid under any'."""
    where = _json_pointer(err.absolute_path) or "/"
    hints = sorted((c for c in _leaves(top) if c.validator not in NOISE),
                   key=lambda c: (-len(c.absolute_path), c.message))
    return f"{where}: {hints[0].message if hints else err.message}"


def _leaves(err: Any) -> list[Any]:
    if not err.context:
        return [err]
    return [leaf for c in err.context for leaf in _leaves(c)]


def _rule_id_at(data: Any, path: list[Any]) -> str | None:
    """The id of the rule (or decision step, or decision) a schema error is inside."""
    if len(path) >= 4 and path[0] == "decisions" and path[2] == "steps":
        return _id_of(data, path[:4]) or _id_of(data, path[:2])
    if len(path) >= 2 and path[0] in ("rules", "decisions"):
        return _id_of(data, path[:2])
    return None


def _id_of(data: Any, path: list[Any]) -> str | None:
    try:
        for key in path:
            data = data[key]
        rid = data.get("id")
        return rid if isinstance(rid, str) else None
    except (IndexError, KeyError, AttributeError, TypeError):
        return None


def build_model(state: CompileState) -> None:
    """Build the Policy: exactly one header, then every rule in file order."""
    if state.unvalidated & set(state.docs):  # never parse what the schema did not check
        return
    headers = [(n, d) for n, (d, _) in sorted(state.docs.items())
               if isinstance(d, dict) and "policy" in d]
    if len(headers) != 1:
        where = headers[1][0] if len(headers) > 1 else state.source
        state.error(codes.RULE_HEADER_ERROR, f"expected exactly one 'policy:' header, "
                    f"found {len(headers)}", (where, 1, 1))
        return
    name, data = headers[0]
    state.policy = parse_header(data["policy"], Located(name, state.docs[name][1]))
    for fname, (doc, positions) in sorted(state.docs.items()):
        at = Located(fname, positions)
        for i, raw in enumerate((doc or {}).get("rules", []) if isinstance(doc, dict) else []):
            if (fname, i) not in state.skipped:
                state.policy.rules.append(parse_rule(raw, f"/rules/{i}", at))
        state.policy.decisions += parse_decisions(doc, at)
    state.policy.files = dict(state.files)


def lower_decisions(state: CompileState) -> None:
    """Ordered decisions become ordinary rules (see :mod:`kvrules.policy.decisions`)."""
    if state.policy is not None:
        decisions.lower_decisions(state.policy, lambda code, message, loc, pointer, rule:
                                  state.error(code, message, loc, pointer, rule))


def resolve_names(state: CompileState) -> None:
    """Fact types, fields, aliases, rule ids and vocabulary all resolve."""
    policy = state.policy
    assert policy is not None
    types = {n: dict(t.fields) for n, t in base_catalogue().items()}
    types["params"] = {n: p.type for n, p in policy.parameters.items()}
    for n, fields in BUILTIN_FACTS.items():
        types[n] = {**fields, **DERIVED_COMMON_FIELDS}
    for n, fields in policy.derived.items():
        types[n] = {**fields, **DERIVED_COMMON_FIELDS}
    for n in types:
        types[n].setdefault("id", "string")
    state.fact_types = types
    seen: dict[str, Rule] = {}
    for rule in policy.rules:
        if rule.id in seen:
            state.error(codes.RULE_DUPLICATE_ID, f"rule id '{rule.id}' is already used at "
                        f"{seen[rule.id].loc[0]}:{seen[rule.id].loc[1]}", rule.loc,
                        rule.pointer, rule.id)
        seen.setdefault(rule.id, rule)
        _resolve_rule(state, rule)
    decisions.check_values(policy, lambda code, message, loc, pointer, rule:
                           state.error(code, message, loc, pointer, rule))


UNKNOWN = ""
"""The fact type of an alias whose pattern names an unknown fact: its fields are not
checked again, so a fact typo is one finding, not one per use of its alias."""
UNRESOLVED = "*"
"""Bound (to UNKNOWN) in a rule with an unknown fact: its aliases are not reported as
unbound either (a typo in ``fact: rnak`` leaves the alias ``rank`` unbound)."""


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest known name, or nothing."""
    close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


def _resolve_rule(state: CompileState, rule: Rule) -> None:
    bound: dict[str, str] = {}
    for pattern in rule.patterns:
        if pattern.fact not in state.fact_types:
            state.error(codes.RULE_UNKNOWN_FACT, f"unknown fact type '{pattern.fact}'"
                        + did_you_mean(pattern.fact, state.fact_types),
                        pattern.loc, pattern.pointer, rule.id)
            bound.setdefault(UNRESOLVED, UNKNOWN)
            if not pattern.negated:
                bound.setdefault(pattern.alias, UNKNOWN)
            continue
        env = dict(bound)
        env.setdefault(pattern.alias, pattern.fact)  # a field may be compared with its own fact
        if not pattern.negated:
            if pattern.alias in bound:
                state.error(codes.RULE_DUPLICATE_ALIAS, f"alias '{pattern.alias}' is bound "
                            "twice; name one with 'as:'", pattern.loc, pattern.pointer, rule.id)
            bound[pattern.alias] = pattern.fact
        fields = state.fact_types[pattern.fact]
        for atom in atoms(pattern.where):
            if atom.field not in fields:
                state.error(codes.RULE_UNKNOWN_FIELD, f"fact '{pattern.fact}' has no field "
                            f"'{atom.field}'" + did_you_mean(atom.field, fields),
                            atom.loc, atom.pointer, rule.id)
            if isinstance(atom.operand, Ref):
                _check_ref(state, rule, atom.operand, env, atom.loc, atom.pointer)
    if not rule.positives:
        state.error(codes.RULE_UNSUPPORTED, "a rule needs at least one positive pattern",
                    rule.loc, rule.pointer, rule.id)
    for action in rule.actions:
        _resolve_action(state, rule, action, bound)
    _check_template(state, rule, rule.reason, bound, rule.loc, rule.pointer + "/reason")


def _check_ref(state: CompileState, rule: Rule, ref: Ref, bound: dict[str, str], loc: Loc,
               ptr: str) -> None:
    if ref.alias not in bound:
        if UNRESOLVED not in bound:
            state.error(codes.RULE_UNKNOWN_ALIAS, f"'{ref.alias}' is not bound by an earlier "
                        "positive pattern" + did_you_mean(ref.alias, bound), loc, ptr,
                        rule.id)
    elif bound[ref.alias] != UNKNOWN and ref.field not in state.fact_types[bound[ref.alias]]:
        fields = state.fact_types[bound[ref.alias]]
        state.error(codes.RULE_UNKNOWN_FIELD, f"fact '{bound[ref.alias]}' has no field "
                    f"'{ref.field}'" + did_you_mean(ref.field, fields), loc, ptr, rule.id)


def _resolve_action(state: CompileState, rule: Rule, action: Any, bound: dict[str, str]) -> None:
    policy = state.policy
    assert policy is not None
    args = action.args
    if action.kind == "derive":
        if args["fact"] not in policy.derived:
            state.error(codes.RULE_UNKNOWN_FACT, f"derived fact '{args['fact']}' is not "
                        "declared under policy.derived" + did_you_mean(args["fact"],
                                                                       policy.derived),
                        action.loc, action.pointer, rule.id)
            return
        declared = policy.derived[args["fact"]]
        for name, value in args.get("set", {}).items():
            if name not in declared:
                state.error(codes.RULE_UNKNOWN_FIELD, f"derived fact '{args['fact']}' has no "
                            f"field '{name}'" + did_you_mean(name, declared),
                            action.loc, action.pointer, rule.id)
            if isinstance(value, Ref):
                _check_ref(state, rule, value, bound, action.loc, action.pointer)
    for value in args.values():
        if isinstance(value, Ref):
            _check_ref(state, rule, value, bound, action.loc, action.pointer)
    if action.kind == "error" and policy.error_codes and args["code"] not in policy.error_codes:
        state.error(codes.RULE_VOCABULARY_ERROR, f"error code '{args['code']}' is not in "
                    "policy.error_codes", action.loc, action.pointer, rule.id)
    if action.kind in ("fail", "qualify") and args["group"] not in policy.qualifications:
        state.error(codes.RULE_VOCABULARY_ERROR, f"qualification group '{args['group']}' is "
                    "not declared under policy.qualifications"
                    + did_you_mean(args["group"], policy.qualifications),
                    action.loc, action.pointer, rule.id)
    elif action.kind == "fail":
        _check_condition(state, rule, action)
    value = args.get("value")
    if action.kind == "regime" and not isinstance(value, Ref) and policy.regimes \
            and value not in policy.regimes:
        state.error(codes.RULE_VOCABULARY_ERROR, f"regime '{value}' is not in policy.regimes",
                    action.loc, action.pointer, rule.id)
    for key in TEMPLATE_FIELDS:
        if isinstance(args.get(key), str):
            _check_template(state, rule, args[key], bound, action.loc, action.pointer)


def _check_condition(state: CompileState, rule: Rule, action: Any) -> None:
    """A ``fail`` names a condition its group declares (when the group declares any)."""
    assert state.policy is not None
    group, condition = action.args["group"], action.args["condition"]
    declared = state.policy.qualifications[group].get("conditions") or {}
    if declared and condition not in declared:
        state.error(codes.RULE_VOCABULARY_ERROR, f"condition '{condition}' is not declared "
                    f"under policy.qualifications.{group}.conditions (declared: "
                    f"{', '.join(declared)})",
                    action.loc, action.pointer + "/condition", rule.id)


def template_refs(template: str) -> list[Ref]:
    """``{alias.field}`` placeholders of a reason or message template."""
    import re
    return [Ref(a, f) for a, f in re.findall(r"\{([a-z][a-z0-9_]*)\.([a-z][a-z0-9_]*)\}",
                                             template)]


def _check_template(state: CompileState, rule: Rule, template: str, bound: dict[str, str],
                    loc: Loc, ptr: str) -> None:
    for ref in template_refs(template):
        _check_ref(state, rule, ref, bound, loc, ptr)


def check_types(state: CompileState) -> None:
    """Operators and literals fit the declared field types; unsupported negations rejected.

    What fits is each operator's own declaration (:mod:`kvrules.policy.operators`)."""
    policy = state.policy
    assert policy is not None
    for rule in policy.rules:
        for pattern in rule.patterns:
            fields = state.fact_types.get(pattern.fact, {})
            for atom in atoms(pattern.where):
                is_ref = isinstance(atom.operand, Ref)
                shape = operators.operand_problem(atom.op, atom.operand, is_ref)
                if shape:
                    state.error(codes.RULE_TYPE_ERROR, shape, atom.loc, atom.pointer, rule.id)
                    continue
                kind = fields.get(atom.field)
                if kind is not None:
                    problem = operators.type_problem(atom.op, atom.field, kind, atom.operand,
                                                     is_ref)
                    if problem:
                        state.error(codes.RULE_TYPE_ERROR, problem, atom.loc, atom.pointer,
                                    rule.id)
                if atom.negated and operators.negation_problem(atom.op, is_ref):
                    state.error(codes.RULE_UNSUPPORTED, f"'{atom.describe()}' cannot be "
                                "negated", atom.loc, atom.pointer, rule.id)


def stratify(state: CompileState) -> None:
    """Assign each rule a stratum so every ``none`` sees complete facts (no negation cycles).

    A rule with ``none`` comes at least two strata after the producers of its negated facts
    (the backend tests its patterns in the stratum before it, which must then see them
    complete). A stratum that no rule occupies is then closed up (:func:`_closed_up`)."""
    policy = state.policy
    assert policy is not None
    producers: dict[str, list[str]] = {}
    for rule in policy.rules:
        for action in rule.actions:
            producers.setdefault(action.produces, []).append(rule.id)
    strata = {r.id: 1 for r in policy.rules}
    limit = 2 * len(policy.rules) + 3
    changed = True
    while changed:
        changed = False
        for rule in policy.rules:
            need = 1
            pos = [strata[p] for pat in rule.positives for p in producers.get(pat.fact, [])]
            neg = [strata[p] for pat in rule.negatives for p in producers.get(pat.fact, [])]
            if pos:
                need = max(need, max(pos))
            if rule.negatives:
                need = max(need, (max(pos) if pos else 0) + 1, (max(neg) if neg else 0) + 2)
            if need > strata[rule.id]:
                strata[rule.id] = need
                changed = True
                if need > limit:
                    state.error(codes.RULE_NEGATION_CYCLE,
                                decisions.cycle_message(policy, rule.id) or f"rule "
                                f"'{rule.id}' depends on itself through 'none'", rule.loc,
                                rule.pointer, rule.id)
                    return
    state.strata = _closed_up(strata, {r.id for r in policy.rules if r.negatives})


def _closed_up(strata: dict[str, int], negating: set[str] | frozenset[str] = frozenset()
               ) -> dict[str, int]:
    """The same order of strata without the ones no rule occupies (each costs the backend
    a session per cell). A rule's ``none`` stays correct: its patterns are tested in the
    stratum before it, and a stratum left empty produced nothing, so that one now sees the
    same facts, the last of them derived in that very session (which runs to quiescence
    before its tests are read).

    A rule with ``none`` (in ``negating``) never lands in the first stratum: its patterns are
    tested in the stratum before it. When every rule of the lowest occupied stratum negates
    only input facts (no producers), that stratum stays second, after an empty first one."""
    levels = sorted(set(strata.values()))
    first = 2 if any(strata[r] == levels[0] for r in negating) else 1 if levels else 1
    rank = {old: new for new, old in enumerate(levels, start=first)}
    return {rule: rank[k] for rule, k in strata.items()}


Pass = Callable[[CompileState], None]
PASSES: tuple[tuple[str, Pass], ...] = (
    ("load_yaml", load_yaml), ("validate_schema", validate_schema),
    ("resolve_extends", resolve_extends), ("build_model", build_model),
    ("lower_decisions", lower_decisions), ("resolve_names", resolve_names),
    ("check_types", check_types), ("stratify", stratify))
"""The engine-neutral passes. A backend appends its own (limits, lowering): see
:data:`kvrules.pipeline.PASSES`."""
GATES = {"resolve_extends", "build_model", "resolve_names", "lower_to_durable"}
"""Passes that need every earlier pass clean (they would trip over broken input)."""


def read_policy_files(source: str | Path | Traversable | None) -> tuple[str, dict[str, str]]:
    """Read ``*.yaml`` of a policy directory (default: the shipped policy), not subfolders."""
    label, files, _ = read_policy_sources(source)
    return label, files


def read_policy_sources(source: str | Path | Traversable | None
                        ) -> tuple[str, dict[str, str], dict[str, YamlSyntaxError]]:
    """Like :func:`read_policy_files`, plus the files that could not be read or decoded
    (size limit, byte-order mark, not UTF-8); their text is empty. With ``extends``, the
    files of every base policy are included (see :mod:`kvrules.policy.extends`)."""
    sources = read_policy_layers(source)
    return sources.label, sources.files, sources.errors


def read_policy_layers(source: str | Path | Traversable | None) -> Sources:
    """Every file of the policy and of the policies it extends, base layers first."""
    if source is None:
        root: Traversable | Path = rules_dir()
        label = "rules"
    elif not isinstance(source, (str, Path)):
        root, label = source, source.name
    else:
        path = Path(source)
        if not path.is_dir():
            raise KvrulesUsageError(f"policy directory not found: {source}")
        root, label = path, str(source)
    return read_layers(root, label, _read_directory)


def _read_directory(root: Traversable | Path, label: str
                    ) -> tuple[dict[str, str], dict[str, YamlSyntaxError]]:
    """``*.yaml`` of one policy directory, not subfolders."""
    files: dict[str, str] = {}
    errors: dict[str, YamlSyntaxError] = {}
    for entry in sorted(root.iterdir(), key=lambda e: e.name):
        if entry.is_file() and entry.name.endswith(RULE_FILE_SUFFIXES):
            name = f"{label}/{entry.name}"
            try:
                files[name] = decode_rule_file(_read_bounded(entry))
            except YamlSyntaxError as exc:
                files[name], errors[name] = "", exc
            except OSError as exc:
                files[name] = ""
                errors[name] = YamlSyntaxError(f"cannot read: {exc.strerror or exc}", 1, 1,
                                               codes.RULE_ENCODING_ERROR)
    if not files:
        raise KvrulesUsageError(f"no rule files (*.yaml) in {label}")
    return files, errors


def _read_bounded(entry: Path | Traversable) -> bytes:
    """At most MAX_FILE_BYTES + 1 bytes (enough to tell that a file is too large)."""
    from kvrules.policy.yamlpos import MAX_FILE_BYTES
    with entry.open("rb") as fh:
        return fh.read(MAX_FILE_BYTES + 1)


def run_passes(source: str | Path | Traversable | None,
               passes: tuple[tuple[str, Pass], ...] = PASSES) -> CompileState:
    """Run passes in order; stop at a gate when anything failed."""
    sources = read_policy_layers(source)
    state = CompileState(source=sources.label, files=sources.files, read_errors=sources.errors,
                         layers=sources.layers, diagnostics=list(sources.diagnostics))
    for name, fn in passes:
        if name == "resolve_extends":
            _quarantine(state)
        if name in GATES and _blocked(state, name):
            break
        fn(state)
        if name == "stratify" and not state.strata and state.policy and state.policy.rules:
            break
    state.diagnostics = list(dict.fromkeys(sort_diagnostics(state.diagnostics)))
    return state


def _quarantine(state: CompileState) -> None:
    """Set aside the files whose own YAML or schema is broken, when the policy header is in
    another file: one broken rule file then does not hide the findings in the others."""
    broken = {d.file for d in state.diagnostics if d.severity == "error"} | state.unvalidated
    if not broken or not broken <= set(state.docs) | set(state.read_errors):
        return
    kept = {n: d for n, d in state.docs.items() if n not in broken}
    if not any(isinstance(doc, dict) and "policy" in doc for doc, _ in kept.values()):
        return  # the header itself is broken: everything else would follow from that
    state.quarantined = broken
    state.docs = kept


def _blocked(state: CompileState, gate: str) -> bool:
    """Whether ``gate`` must not run: an error outside the quarantined files, or any error
    at all before lowering (a policy with a broken file never compiles)."""
    if not state.quarantined or gate not in QUARANTINE_GATES:
        return state.failed
    return any(d.severity == "error" and d.file not in state.quarantined
               for d in state.diagnostics)


QUARANTINE_GATES = {"resolve_extends", "build_model", "resolve_names"}
"""Gates that may run with quarantined files set aside (the checking passes)."""


def default_digest(source: str | Path | Traversable | None = None) -> str:
    """The digest a report records for a policy with its default parameters, without
    compiling it (``kvrules --version``); a policy with ``extends`` needs the compiler."""
    from kvrules.policy.extends import header_of
    sources = read_policy_layers(source)
    if len(sources.layers) != 1:
        raise ValueError("default_digest reads a policy without extends")
    found = header_of(sources.files, sources.layers[0].names)
    declared = (found[1].get("parameters") or {}) if found else {}
    return policy_digest(sources.files, {name: spec.get("default")
                                         for name, spec in declared.items()})


def policy_digest(files: dict[str, str], parameters: dict[str, Any]) -> str:
    """sha256 over file names, contents and parameter values: identifies a report's policy.

    ``files`` are every file of the resolved policy (base policies of ``extends`` included),
    ordered by base name and content so the directories' labels do not matter."""
    h = hashlib.sha256()
    for base, text in sorted((n.rsplit("/", 1)[-1], t) for n, t in files.items()):
        h.update(base.encode() + b"\0" + text.encode() + b"\0")
    for key in sorted(parameters):
        h.update(f"{key}={parameters[key]!r}\0".encode())
    return "sha256:" + h.hexdigest()
