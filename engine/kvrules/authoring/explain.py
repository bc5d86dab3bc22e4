"""``kvrules explain``: how a verdict was reached, from raw evidence, and why not otherwise.

For a point: the derivation of its regime (and eligibility) as a tree of fired rules down to
the extracted facts they read, each read field with its value and its place in the evidence
(file, JSON pointer); then, for every rule that could have decided another regime, the first
condition that stopped it and the value observed. For a cell: every condition of every
qualification group (D1-D9), on every rank, with the rule that failed it or, for each check
that held, the condition that kept it from firing.

Everything is computed from one classification identical to ``classify``'s and from the
reference semantics of conditions; nothing here decides anything.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvrules.artifacts.discover import discover
from kvrules.artifacts.load import load_cell
from kvrules.authoring.explain_cell import CellExplanation, explain_cell
from kvrules.authoring.joins import SessionFact, Traced, trace_cell, why_not
from kvrules.authoring.policyinfo import Decider, deciders
from kvrules.authoring.rulefacts import Evidence, evidence_of, negation_text
from kvrules.authoring.whynot import WhyNot, why_not_of
from kvrules.diagnostics import Diagnostic, KvrulesUsageError
from kvrules.facts.extract import extract_cell
from kvrules.policy.compiled import CompiledPolicy
from kvrules.policy.decisions import decision_of
from kvrules.policy.model import Rule


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
    campaign: str
    cell_id: str
    benchmark_id: int
    status: str
    regime: str | None
    eligible: bool
    decided_by: str | None
    chain: tuple[Step, ...]
    why_not: tuple[WhyNot, ...]
    errors: tuple[Diagnostic, ...]


def explain_point(traced: Traced, benchmark_id: int) -> PointExplanation:
    """The chain to the point's verdict and the why-not of every other regime decider."""
    v = next(p for p in traced.verdict.points if p.benchmark_id == benchmark_id)
    cls = traced.class_of[benchmark_id]
    row = next(r.fact for r in traced.cell.points if r.benchmark_id == benchmark_id)
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
    return PointExplanation(traced.cell.campaign, traced.cell.cell_id, benchmark_id, v.status,
                            v.kv_seed_regime, v.eligible, v.decided_by, tuple(chain),
                            tuple(why), traced.verdict.errors)


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
    shown = tuple((alias, substitute[fid].id if fid in substitute else fid)
                  for alias, fid in event.bindings)
    step = Step(depth, rule.id, event.reason, _fact_text(derived, substitute), shown,
                tuple(evidence_of(traced, rule, bound, substitute)),
                _negations(traced, rule))
    out = [step]
    for alias, fid in event.bindings:
        fact = traced.by_id(fid)
        if fact is not None and fact.by is not None:
            out += derivation(traced, fid, depth + 1, substitute)
    return out


def _negations(traced: Traced, rule: Rule) -> tuple[str, ...]:
    """The ``none`` conditions a fired rule relied on; for a decision, the order itself."""
    d = decision_of(traced.cp.policy, rule.id)
    if d is not None and rule.id == d.pick_rule:
        return (f"no earlier step of decision '{d.id}' holds for this {d.subject}",)
    return tuple(negation_text(rule))


def _fact_text(fact: SessionFact | None, substitute: dict[str, Any]) -> str:
    """``candidate {point: 'p2', step: 7, ...}`` (a point class shown as the point itself)."""
    if fact is None:
        return ""
    fields = {k: substitute[v].id if isinstance(v, str) and v in substitute else v
              for k, v in fact.fields.items() if k not in ("id", "by")}
    inner = ", ".join(f"{k}: {v!r}" for k, v in fields.items())
    return f"{fact.type} {{{inner}}}"


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
        blocker = why_not(traced, d.rule, _subject_only(d, cls))
        out.append(why_not_of(traced, d.rule, _proposal(d), blocker, {cls: row}))
    return out


def _decided_by(traced: Traced, cls: str) -> str | None:
    return next((p.decided_by for p in traced.verdict.points
                 if traced.class_of[p.benchmark_id] == cls), None)


def _proposal(d: Decider) -> str:
    """What the decider would decide (a step's id already says where it stands)."""
    return str(d.regime)


def _subject_only(d: Decider, cls: str) -> Any:
    return lambda p, f: p.alias != d.subject or p.negated or f.id == cls


def load_traced(path: str, cell_id: str, policy: CompiledPolicy,
                plan: str | None = None) -> Traced:
    """One cell of a campaign (or a cell folder), classified with everything kept."""
    refs = discover([path], plan)
    chosen = [r for r in refs if r.cell_id == cell_id]
    if not chosen:
        known = ", ".join(r.cell_id for r in refs) or "none"
        raise KvrulesUsageError(f"no cell '{cell_id}' under {path} (cells: {known})")
    return trace_cell(policy, extract_cell(load_cell(chosen[0])))


def explain(path: str, cell_id: str, point: int | None, policy: CompiledPolicy,
            plan: str | None = None) -> PointExplanation | CellExplanation:
    """The point's explanation, or the cell's (qualifications on every rank)."""
    traced = load_traced(path, cell_id, policy, plan)
    if point is None:
        return explain_cell(traced)
    ids = [p.benchmark_id for p in traced.verdict.points]
    if point not in ids:
        raise KvrulesUsageError(f"cell '{cell_id}' has no point {point} (benchmark ids: "
                                f"{_ranges(ids) or 'none'})")
    return explain_point(traced, point)


def _ranges(ids: list[int]) -> str:
    """``1-12, 15`` for a sorted list of ids."""
    out: list[str] = []
    for i in sorted(ids):
        if out and out[-1].split("-")[-1] == str(i - 1):
            out[-1] = f"{out[-1].split('-')[0]}-{i}"
        else:
            out.append(str(i))
    return ", ".join(out)
