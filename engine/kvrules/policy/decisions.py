"""Ordered decisions: "the first step that holds decides" as a construct of the language.

A rule file may hold a ``decisions:`` list next to ``rules:``. A decision names its subject
(the fact type decided about, bound in every step under its alias), what it decides
(``result: regime``) and its steps, in order; each step has conditions (``when``, like a
rule's, optional for an "otherwise" step), the value it decides (``then``) and a reason::

    decisions:
      - id: regime
        description: The formal regime of a point (spec 4.1).
        subject: point
        result: regime
        steps:
          - id: regime.step1_prefill
            description: "Step 1: a prefill point is n/a."
            when: [{fact: point, where: {point_type: prefill}}]
            then: n/a
            reason: "step 1: prefill point"
          - id: regime.step8_no_evidence
            description: "Step 8: otherwise fail closed."
            then: fake_fallback
            reason: "step 8: no evidence"

The compiler lowers a decision to ordinary rules (:func:`lower_decisions`, the pass after
``build_model``), so resolution, typing, stratification and the engine see nothing new:

* step ``k`` becomes a rule with the step's id, its patterns (the subject pattern first
  unless the step binds the subject alias itself) and one action deriving
  ``<id>_candidate {point: subject.id, step: k, regime: value}``;
* one rule ``<id>.first_matching_step`` decides the result from a candidate when no
  candidate of a lower step exists for the same subject (``decided_by`` is the step's id).

The order is therefore stratified negation, independent of the engine's firing order.
"""
from __future__ import annotations

from typing import Any, Callable

from kvrules.policy import codes
from kvrules.policy.catalogue import base_catalogue
from kvrules.policy.model import (BUILTIN_FACTS, CANDIDATE_SUFFIX, PICK_SUFFIX, SUBJECT_FIELD,
                                  Action, Atom, Decision, DecisionStep, Expr, Loc, Pattern,
                                  Policy, Ref, Rule)
from kvrules.policy.parse import Located, parse_operand, parse_pattern

RESULT_ACTIONS = {"regime": "regime"}
"""What a decision may decide → the action its lowered rule uses."""
PICK_ALIAS = "c"
ORDER_FIELD = "step"

Report = Callable[[str, str, Loc, str, str | None], None]
"""``report(code, message, loc, pointer, rule)``: how the lowering pass reports a problem."""


def parse_decisions(doc: Any, at: Located) -> list[Decision]:
    """Every decision of one schema-valid rule file."""
    raw = doc.get("decisions", []) if isinstance(doc, dict) else []
    return [parse_decision(d, f"/decisions/{i}", at) for i, d in enumerate(raw)]


def parse_decision(data: dict[str, Any], ptr: str, at: Located) -> Decision:
    steps = tuple(_parse_step(s, f"{ptr}/steps/{i}", at) for i, s in enumerate(data["steps"]))
    subject = data["subject"]
    return Decision(id=data["id"], description=data["description"], subject=subject,
                    alias=data.get("as", subject), result=data["result"], steps=steps,
                    loc=at.loc(ptr), pointer=ptr, file=at.file,
                    subject_loc=at.loc(f"{ptr}/subject"))


def _parse_step(data: dict[str, Any], ptr: str, at: Located) -> DecisionStep:
    patterns = tuple(parse_pattern(p, f"{ptr}/when/{i}", at)
                     for i, p in enumerate(data.get("when", [])))
    return DecisionStep(id=data["id"], description=data["description"], patterns=patterns,
                        value=parse_operand(data["then"]), reason=data["reason"],
                        loc=at.loc(ptr), pointer=ptr, file=at.file,
                        value_loc=at.loc(f"{ptr}/then"))


def lower_decisions(policy: Policy, report: Report) -> None:
    """Add each valid decision's rules and candidate fact to the policy (in file order)."""
    known = _known_facts(policy)
    seen: dict[str, Decision] = {}
    generated: list[Rule] = []
    for decision in policy.decisions:
        if not _decision_ok(policy, decision, known, seen, report):
            continue
        seen[decision.id] = decision
        policy.derived[decision.candidate_fact] = {
            decision.subject_field: "string", ORDER_FIELD: "integer", decision.result: "any"}
        generated += lower_decision(decision, policy, report)
    order = {name: i for i, name in enumerate(sorted(policy.files))}
    policy.rules = sorted(policy.rules + generated,
                          key=lambda r: (order.get(r.file, len(order)), r.loc[1]))


def _known_facts(policy: Policy) -> set[str]:
    return set(base_catalogue()) | set(BUILTIN_FACTS) | set(policy.derived) | {"params"}


def _decision_ok(policy: Policy, d: Decision, known: set[str], seen: dict[str, Decision],
                 report: Report) -> bool:
    """The decision's own header is sound (its steps are checked like rules later)."""
    if d.id in seen:
        first = seen[d.id]
        report(codes.RULE_DUPLICATE_ID, f"decision id '{d.id}' is already used at "
               f"{first.loc[0]}:{first.loc[1]}", d.loc, d.pointer, d.id)
        return False
    if d.candidate_fact in policy.derived:
        report(codes.RULE_DUPLICATE_ID, f"decision '{d.id}' generates the derived fact "
               f"'{d.candidate_fact}', which policy.derived already declares", d.loc,
               d.pointer, d.id)
        return False
    if d.subject not in known:
        report(codes.RULE_UNKNOWN_FACT, f"unknown fact type '{d.subject}' (the subject of "
               f"decision '{d.id}')", d.subject_loc, f"{d.pointer}/subject", d.id)
        return False
    if d.subject != SUBJECT_FIELD[d.result]:
        report(codes.RULE_UNSUPPORTED, f"a {d.result} decision decides about each "
               f"{SUBJECT_FIELD[d.result]}: use subject: {SUBJECT_FIELD[d.result]}, not "
               f"'{d.subject}'", d.subject_loc, f"{d.pointer}/subject", d.id)
        return False
    return True


def lower_decision(d: Decision, policy: Policy, report: Report) -> list[Rule]:
    """The step rules, then the rule that takes the first step's candidate."""
    rules = [lower_step(d, k, step, policy, report) for k, step in enumerate(d.steps, 1)]
    return rules + [pick_rule(d)]


def lower_step(d: Decision, k: int, step: DecisionStep, policy: Policy,
               report: Report) -> Rule:
    """Step ``k``: its conditions (subject bound) → a candidate of order ``k``."""
    patterns = subject_patterns(d, step, report)
    values = {d.subject_field: Ref(d.alias, "id"), ORDER_FIELD: k, d.result: step.value}
    action = Action("derive", {"fact": d.candidate_fact, "set": values},
                    f"{step.pointer}/then", step.value_loc)
    return Rule(id=step.id, description=step.description, patterns=patterns,
                actions=(action,), reason=step.reason, loc=step.loc, pointer=step.pointer,
                file=step.file)


def subject_patterns(d: Decision, step: DecisionStep, report: Report) -> tuple[Pattern, ...]:
    """The step's patterns with the subject bound: a positive pattern under the subject's
    alias is the subject itself (it must be of the subject's type); otherwise the subject
    comes first, unconstrained."""
    own = [p for p in step.patterns if not p.negated and p.alias == d.alias]
    for p in own:
        if p.fact != d.subject:
            report(codes.RULE_DUPLICATE_ALIAS, f"alias '{d.alias}' is the subject of decision "
                   f"'{d.id}' (a {d.subject} fact), not a {p.fact}; name it with 'as:'",
                   p.loc, p.pointer, step.id)
    if own:
        return step.patterns
    subject = Pattern(fact=d.subject, alias=d.alias, where=None, negated=False,
                      pointer=step.pointer, loc=step.loc)
    return (subject,) + step.patterns


def check_values(policy: Policy, report: Report) -> None:
    """Literal results are in the policy's vocabulary (refs are resolved like any ref).
    Run with name resolution, after lowering, so it never hides the other findings."""
    for d in lowered_decisions(policy):
        if d.result != "regime" or not policy.regimes:
            continue
        for step in d.steps:
            if not isinstance(step.value, Ref) and step.value not in policy.regimes:
                report(codes.RULE_VOCABULARY_ERROR, f"regime '{step.value}' is not in "
                       "policy.regimes", step.value_loc, f"{step.pointer}/then", step.id)


def pick_rule(d: Decision) -> Rule:
    """A candidate decides when no candidate of a lower step exists for its subject."""
    c, cand, subj = PICK_ALIAS, d.candidate_fact, d.subject_field
    loc, ptr = d.loc, d.pointer
    earlier = Expr("and", (
        Expr("atom", atom=Atom(subj, "eq", Ref(c, subj), pointer=ptr, loc=loc)),
        Expr("atom", atom=Atom(ORDER_FIELD, "lt", Ref(c, ORDER_FIELD), pointer=ptr, loc=loc))))
    patterns = (Pattern(cand, c, None, False, ptr, loc),
                Pattern(cand, cand, earlier, True, ptr, loc))
    args = {subj: Ref(c, subj), "value": Ref(c, d.result), "decided_by": Ref(c, "by")}
    action = Action(RESULT_ACTIONS[d.result], args, ptr, loc)
    return Rule(id=d.pick_rule, description=f"The first step of decision '{d.id}' that holds "
                "decides.", patterns=patterns, actions=(action,),
                reason=f"{d.result} {{{c}.{d.result}}} decided by {{{c}.by}}", loc=loc,
                pointer=ptr, file=d.file)


def cycle_message(policy: Policy, rule_id: str) -> str | None:
    """A negation cycle through a decision's order, in the author's words (None otherwise)."""
    d = decision_of(policy, rule_id)
    if d is None or rule_id != d.pick_rule:
        return None
    return (f"decision '{d.id}' depends on its own result: a step reads a fact derived from "
            f"the {d.result} it decides, so no order of its steps exists")


def decision_of(policy: Policy, rule_id: str) -> Decision | None:
    """The decision a rule was generated from (a step or the pick rule), if any."""
    for d in policy.decisions:
        if rule_id == d.pick_rule or d.position(rule_id) is not None:
            return d
    return None


def _lowered_from(rule: Rule, d: Decision | DecisionStep) -> bool:
    return rule.file == d.file and rule.loc == d.loc and rule.pointer == d.pointer


def lowered_decisions(policy: Policy) -> list[Decision]:
    """The decisions the lowering pass turned into rules (a refused header is not)."""
    return [d for d in policy.decisions
            if any(r.id == d.pick_rule and _lowered_from(r, d) for r in policy.rules)]


def is_pick_rule(policy: Policy, rule_id: str) -> bool:
    """A generated rule no author wrote (it takes a decision's first step)."""
    return any(rule_id == d.pick_rule for d in lowered_decisions(policy))


def step_rules(policy: Policy) -> list[tuple[Decision, int, Rule]]:
    """(decision, position, lowered rule) of every step that was lowered, in order."""
    out = []
    for d in lowered_decisions(policy):
        for k, step in enumerate(d.steps, 1):
            rule = next((r for r in policy.rules if r.id == step.id and _lowered_from(r, step)),
                        None)
            if rule is not None:
                out.append((d, k, rule))
    return out
