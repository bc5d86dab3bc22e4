"""``kvrules explain``: how a verdict was reached, from raw evidence, and why not otherwise.

The answer comes first: the verdict and its root cause (:mod:`kvrules.authoring.explain.causes`);
for a cell, its ineligible points grouped by that cause. Then the work, for a point:
the derivation of its regime (and eligibility) as a tree of fired rules down to
the extracted facts they read, each read field with its value and its place in the evidence
(file, JSON pointer); then, for every rule that could have decided another regime, the first
condition that stopped it and the value observed. For a cell: every condition of every
qualification group (D1-D9), on every rank, with the rule that failed it or, for each check
that held, the condition that kept it from firing.

Everything is computed from one classification identical to ``classify``'s and from the
reference semantics of conditions; nothing here decides anything.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from kvrules.artifacts.discover import discover
from kvrules.artifacts.load import load_cell
from kvrules.authoring.explain.causes import Cause, point_causes, subject_only
from kvrules.authoring.explain.cell import CellExplanation, PointsByCause, explain_cell
from kvrules.authoring.explain.joins import SessionFact, Traced, trace_cell, why_not
from kvrules.authoring.explain.phrases import fact_label, value_text
from kvrules.authoring.policyinfo import Decider, deciders
from kvrules.authoring.explain.rulefacts import Evidence, evidence_of, negation_text
from kvrules.authoring.explain.whynot import WhyNot, why_not_of
from kvrules.diagnostics import Diagnostic, KvrulesUsageError
from kvrules.facts.extract import extract_cell
from kvrules.policy.compiled import CompiledPolicy
from kvrules.policy.decisions import PICK_ALIAS, decision_of
from kvrules.policy.model import Rule
from kvrules.verdicts.model import PointVerdict


@dataclass(frozen=True)
class Step:
    """One fired rule of a derivation, ``depth`` levels below the verdict."""

    depth: int
    rule: str
    reason: str
    derived: str
    bound: tuple[tuple[str, str], ...]
    evidence: tuple[Evidence, ...]
    negations: tuple[str, ...]


@dataclass(frozen=True)
class PointExplanation:
    """One point's verdict and the rule that decided it, for ``kvrules explain``."""

    campaign: str
    cell_id: str
    benchmark_id: int
    status: str
    regime: str | None
    eligible: bool
    decided_by: str | None
    reason: str
    """The deciding step's reason (what the rules said when they decided)."""
    causes: tuple[Cause, ...]
    """For an ineligible point: each earlier step that would have given an eligible regime
    and what stopped it, the nearest first (the root cause)."""
    chain: tuple[Step, ...]
    why_not: tuple[WhyNot, ...]
    errors: tuple[Diagnostic, ...]


def explain_point(traced: Traced, benchmark_id: int) -> PointExplanation:
    """The chain to the point's verdict and the why-not of every other regime decider."""
    v = next(p for p in traced.verdict.points if p.benchmark_id == benchmark_id)
    cls = traced.class_of[benchmark_id]
    row = _row(traced, benchmark_id)
    mine = [d for d in traced.evaluation.derived if d.fields.get("point") == cls]
    eligible = [d for d in mine if d.type == "verdict_eligible"]  # its chain holds the regime's
    roots = eligible[:1] or [d for d in mine if d.type == "verdict_regime"][:1]
    if v.status == "error":  # the errors that concern this point or the whole cell
        roots = [d for d in traced.evaluation.derived if d.type == "evidence_error"
                 and _concerns(traced, d.fields.get("at_fact", ""), cls)]
    chain: list[Step] = []
    for root in roots:
        chain += derivation(traced, root.id, 0, {cls: row})
    why = _why_nots(traced, cls, row) if v.status == "ok" else []
    causes = point_causes(traced, cls, row, v.decided_by) \
        if v.status == "ok" and not v.eligible else ()
    reason = _decided_reason(traced, cls, v.decided_by)
    return PointExplanation(traced.cell.campaign, traced.cell.cell_id, benchmark_id, v.status,
                            v.kv_seed_regime, v.eligible, v.decided_by, reason, causes,
                            tuple(chain), tuple(why), shown_errors(traced))


def _row(traced: Traced, benchmark_id: int) -> Any:
    return next(r.fact for r in traced.cell.points if r.benchmark_id == benchmark_id)


def _decided_reason(traced: Traced, cls: str, decided_by: str | None) -> str:
    """The reason the deciding rule gave for this point's class."""
    return next((e.reason for e in traced.evaluation.events
                 if e.rule == decided_by and cls in e.points), "")


def shown_errors(traced: Traced) -> tuple[Diagnostic, ...]:
    """The cell's errors with their files relative to the current directory."""
    return tuple(replace(e, file=traced.shown_path(e.file)) for e in traced.verdict.errors)


def _concerns(traced: Traced, fact_id: str, cls: str) -> bool:
    fact = traced.by_id(fact_id)
    return fact_id == cls or fact is None or fact.type != "point"


def derivation(traced: Traced, fact_id: str, depth: int,
               substitute: dict[str, Any]) -> list[Step]:
    """The fired rule that derived ``fact_id``, then (indented) whatever it bound."""
    event = next((e for e in traced.evaluation.events if fact_id in e.derived), None)
    if event is None:
        return []
    rule = traced.cp.rules[event.rule]
    bound = dict(event.bindings)
    derived = traced.by_id(fact_id)
    d = decision_of(traced.cp.policy, rule.id)
    if d is not None and rule.id == d.pick_rule and PICK_ALIAS in bound:
        return _decided(traced, d.id, derived, derivation(traced, bound[PICK_ALIAS], depth,
                                                          substitute), substitute)
    shown = tuple((alias, _name(traced, fid, substitute)) for alias, fid in event.bindings)
    step = Step(depth, rule.id, event.reason, _fact_text(traced, derived, substitute), shown,
                tuple(evidence_of(traced, rule, bound, substitute)),
                _negations(rule))
    out = [step]
    for alias, fid in event.bindings:
        fact = traced.by_id(fid)
        if fact is not None and fact.by is not None:
            out += derivation(traced, fid, depth + 1, substitute)
    return out


def _decided(traced: Traced, decision: str, result: SessionFact | None, steps: list[Step],
             substitute: dict[str, Any]) -> list[Step]:
    """A decision's generated pick rule is not shown: its step decided, because no earlier
    step held (the order itself is the reason)."""
    if not steps or result is None:
        return steps
    subject = next((v for k, v in result.fields.items() if k not in ("id", "by", "value",
                                                                     "decided_by")), "")
    what = f"decides {value_text(result.fields.get('value'))}"
    order = f"no earlier step of decision '{decision}' holds for " \
        f"{_name(traced, str(subject), substitute)}"
    return [replace(steps[0], derived=what, negations=(order,))] + steps[1:]


def _negations(rule: Rule) -> tuple[str, ...]:
    """The ``none`` conditions a fired rule relied on."""
    return tuple(negation_text(rule))


def _name(traced: Traced, fact_id: str, substitute: dict[str, Any]) -> str:
    """A session fact by name (``point 2``, ``rank 0``); a point class as the point itself."""
    if fact_id in substitute:
        f = substitute[fact_id]
        return fact_label(f.type, f.fields)
    fact = traced.by_id(fact_id)
    return fact_label(fact.type, fact.fields) if fact is not None and fact.by is None \
        else fact_id


def _fact_text(traced: Traced, fact: SessionFact | None, substitute: dict[str, Any]) -> str:
    """``verdict_eligible (point: point 2)``: fields naming a fact show it by name."""
    if fact is None:
        return ""
    inner = ", ".join(
        f"{k}: {_name(traced, v, substitute)}" if k in ("point", "at_fact") and isinstance(v, str)
        else f"{k}: {value_text(v)}" for k, v in fact.fields.items() if k not in ("id", "by"))
    return f"{fact.type} ({inner})"


def _why_nots(traced: Traced, cls: str, row: Any) -> list[WhyNot]:
    winners = {e.rule for e in traced.evaluation.events if cls in e.points}
    out = []
    for d in deciders(traced.cp.policy):
        if d.rule.id in winners:
            decided_by = _decided_by(traced, cls)
            if d.rule.id != decided_by:
                out.append(WhyNot(d.rule.id, _proposal(d), "outranked",
                                  f"held, but an earlier step decided ({decided_by})"))
            continue
        blocker = why_not(traced, d.rule, subject_only(d.subject, cls))
        out.append(why_not_of(traced, d.rule, _proposal(d), blocker, {cls: row}))
    return out


def _decided_by(traced: Traced, cls: str) -> str | None:
    return next((p.decided_by for p in traced.verdict.points
                 if traced.class_of[p.benchmark_id] == cls), None)


def _proposal(d: Decider) -> str:
    """What the decider would decide (a step's id already says where it stands)."""
    return str(d.regime)


def load_traced(path: str, cell_id: str | None, policy: CompiledPolicy,
                plan: str | None = None) -> Traced:
    """One cell of a campaign (or a cell folder), classified with everything kept; without
    ``cell_id`` the path must hold exactly one cell."""
    refs = discover([path], plan)
    known = ", ".join(r.cell_id for r in refs) or "none"
    if cell_id is None:
        if len(refs) != 1:
            raise KvrulesUsageError(f"{path} holds {len(refs)} cells: name one with --cell "
                                    f"(cells: {known})")
        chosen = refs
    else:
        chosen = [r for r in refs if r.cell_id == cell_id]
    if not chosen:
        raise KvrulesUsageError(f"no cell '{cell_id}' under {path} (cells: {known})")
    traced = trace_cell(policy, extract_cell(load_cell(chosen[0])))
    traced.root = str(chosen[0].root)
    return traced


def explain(path: str, cell_id: str | None, point: int | None, policy: CompiledPolicy,
            plan: str | None = None) -> PointExplanation | CellExplanation:
    """The point's explanation, or the cell's (every ineligible point by cause, then the
    qualifications on every rank)."""
    traced = load_traced(path, cell_id, policy, plan)
    if point is None:
        return explain_cell(traced, _ineligible_points(traced), shown_errors(traced))
    ids = [p.benchmark_id for p in traced.verdict.points]
    if point not in ids:
        raise KvrulesUsageError(f"cell '{traced.cell.cell_id}' has no point {point} "
                                f"(benchmark ids: {ranges(ids) or 'none'})")
    return explain_point(traced, point)


def _ineligible_points(traced: Traced) -> tuple[PointsByCause, ...]:
    """Every classified point that is not eligible, grouped by regime and root cause; the
    first point of a group stands for its evidence. Points of one class share a verdict, so
    their causes are found once."""
    by_class: dict[str, tuple[str, tuple[Cause, ...]]] = {}
    groups: dict[tuple[Any, ...], list[int]] = {}
    first: dict[tuple[Any, ...], tuple[PointVerdict, str, tuple[Cause, ...]]] = {}
    for p in sorted(traced.verdict.points, key=lambda p: p.benchmark_id):
        if p.status != "ok" or p.eligible:
            continue
        cls = traced.class_of[p.benchmark_id]
        if cls not in by_class:
            by_class[cls] = (_decided_reason(traced, cls, p.decided_by),
                             point_causes(traced, cls, _row(traced, p.benchmark_id),
                                          p.decided_by))
        reason, causes = by_class[cls]
        key = (p.kv_seed_regime, *cause_key(reason, causes))
        groups.setdefault(key, []).append(p.benchmark_id)
        first.setdefault(key, (p, reason, causes))
    return tuple(PointsByCause(tuple(ids), first[k][0].kv_seed_regime, first[k][0].decided_by,
                               first[k][1], first[k][2]) for k, ids in groups.items())


def cause_key(reason: str, causes: tuple[Cause, ...]) -> tuple[Any, ...]:
    """What the answer says is the cause: a qualification's failed conditions, a step's
    blocker, or (no eligible step came near) the deciding step's reason."""
    if not causes or not causes[0].held:
        return ("decided", reason)
    c = causes[0]
    if c.conditions:
        return ("qualification", tuple(k.text() for k in c.conditions))
    return ("step", c.step, c.detail)


def ranges(ids: list[int]) -> str:
    """``1-12, 15`` for a sorted list of ids."""
    out: list[str] = []
    for i in sorted(ids):
        if out and out[-1].split("-")[-1] == str(i - 1):
            out[-1] = f"{out[-1].split('-')[0]}-{i}"
        else:
            out.append(str(i))
    return ", ".join(out)
