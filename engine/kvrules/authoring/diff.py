"""``kvrules diff``: what a policy change does to a real corpus, point by point.

Both policies classify the same evidence with the ordinary classifier; points are matched by
(campaign, cell, benchmark_id) and compared on status, regime and eligibility. Changes are
grouped by (old → new) with counts, and each group names the responsible rules: the rule
that decided each side (``decided_by``), or the rules that raised the cell's errors.
"""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, replace
from typing import Any, Sequence

from kvrules import api
from kvrules.diagnostics import KvrulesUsageError
from kvrules.verdicts.model import CellVerdict, PointVerdict, PolicyIdentity, Report

Key = tuple[str, str, int]


@dataclass(frozen=True)
class Outcome:
    """What a policy made of one point."""

    status: str
    regime: str | None
    eligible: bool
    errors: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        if self.status == "error":
            return f"error ({', '.join(self.errors)})"
        return f"{self.regime} ({'eligible' if self.eligible else 'not eligible'})"


@dataclass(frozen=True)
class PointChange:
    """One reported point whose verdict differs between the two policies."""

    campaign: str
    cell_id: str
    benchmark_id: int
    old: Outcome
    new: Outcome
    old_by: str
    new_by: str


@dataclass(frozen=True)
class ChangeGroup:
    """All points that went from one outcome to another, and which rules did it."""

    old: str
    new: str
    count: int
    rules: tuple[tuple[str, str, int], ...]
    points: tuple[PointChange, ...]


@dataclass(frozen=True)
class CorpusDiff:
    """What changes from the base policy to the head policy over a corpus, by group."""

    base: PolicyIdentity
    head: PolicyIdentity
    cells: int
    points: int
    groups: tuple[ChangeGroup, ...]
    sources: tuple[str, str] = ("", "")

    @property
    def changed(self) -> int:
        return sum(g.count for g in self.groups)

    def exit_code(self, fail_on_change: bool) -> int:
        """1 when something changed and the caller asked to fail on change, else 0."""
        return 1 if fail_on_change and self.changed else 0


def parse_params(items: Sequence[str]) -> dict[str, bool]:
    """``k=true`` / ``k=false`` pairs (policy parameters are booleans)."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or value.lower() not in ("true", "false") or not key:
            raise KvrulesUsageError(f"parameter {item!r}: expected NAME=true or NAME=false")
        out[key] = value.lower() == "true"
    return out


def _points(report: Report) -> dict[Key, tuple[PointVerdict, CellVerdict]]:
    return {(c.campaign, c.cell_id, p.benchmark_id): (p, c)
            for c in report.cells for p in c.points}


def _outcome(p: PointVerdict, c: CellVerdict) -> tuple[Outcome, str]:
    if p.status == "error":
        codes = tuple(sorted({e.code for e in c.errors}))
        rules = sorted({e.rule for e in c.errors if e.rule}) or ["(evidence)"]
        return Outcome("error", None, False, codes), ", ".join(rules)
    return Outcome(p.status, p.kv_seed_regime, p.eligible), p.decided_by or "-"


def diff_reports(base: Report, head: Report) -> CorpusDiff:
    """Every point whose status, regime or eligibility differs, grouped by (old → new)."""
    old, new = _points(base), _points(head)
    changes = []
    for key in sorted(set(old) | set(new)):
        if key not in old or key not in new:
            raise KvrulesUsageError(f"point {key} is classified by one policy only")
        (o, o_by), (n, n_by) = _outcome(*old[key]), _outcome(*new[key])
        if o != n:
            changes.append(PointChange(*key, o, n, o_by, n_by))
    return CorpusDiff(base.policy, head.policy, len(base.cells), len(old), _group(changes))


def _group(changes: list[PointChange]) -> tuple[ChangeGroup, ...]:
    buckets: dict[tuple[str, str], list[PointChange]] = {}
    for ch in changes:
        buckets.setdefault((ch.old.label, ch.new.label), []).append(ch)
    groups = []
    for (old, new), members in buckets.items():
        rules = Counter((m.old_by, m.new_by) for m in members)
        ordered = tuple((a, b, n) for (a, b), n in sorted(rules.items(),
                                                           key=lambda x: (-x[1], x[0])))
        groups.append(ChangeGroup(old, new, len(members), ordered, tuple(members)))
    return tuple(sorted(groups, key=lambda g: (-g.count, g.old, g.new)))


def diff_corpus(paths: Sequence[str], base: api.Policy, head: api.Policy,
                plan: str | None = None, run: api.Run = api.Run()) -> CorpusDiff:
    """Classify ``paths`` under both policies on ``run`` and compare."""
    return _diff_classified(paths, base, head, plan, run)[0]


def _diff_classified(paths: Sequence[str], base: api.Policy, head: api.Policy,
                     plan: str | None, run: api.Run) -> tuple[CorpusDiff, Report]:
    """The diff and the head policy's report it was computed from."""
    old = run.classify(paths, base, plan)
    new = run.classify(paths, head, plan)
    d = diff_reports(old, new)
    return replace(d, sources=(base.source or "rules", head.source or "rules")), new


def render_diff_html(paths: Sequence[str], base: api.Policy, head: api.Policy,
                     plan: str | None = None,
                     run: api.Run = api.Run()) -> tuple[CorpusDiff, str]:
    """The diff and the ``kvrules report`` page of the head policy with the changes marked."""
    from kvrules.consumers import report  # plotly is needed for this format only
    report.plotly_js()
    d, new = _diff_classified(paths, base, head, plan, run)
    changes = {(p.campaign, p.cell_id, p.benchmark_id): report.Change(
        p.old.label, p.new.label, p.old_by, p.new_by) for g in d.groups for p in g.points}
    return d, report.diff_html(new, head, base, changes, diff_dict(d), plan)


def _identity(p: PolicyIdentity) -> str:
    params = " ".join(f"{k}={json.dumps(v)}" for k, v in sorted(p.parameters.items()))
    return f"{p.name} {p.version} {p.digest[:19]}... {params}".rstrip()


def render_diff_text(d: CorpusDiff) -> str:
    """Both policies, the totals, then each (old → new) group with its rules and points."""
    lines = [f"base: {d.sources[0]}: {_identity(d.base)}",
             f"head: {d.sources[1]}: {_identity(d.head)}",
             f"{d.cells} cells, {d.points} points compared: {d.changed} changed"]
    for g in d.groups:
        lines += ["", f"{g.old} -> {g.new}: {g.count} point{'s' if g.count != 1 else ''}"]
        lines += [f"  rules: {a} -> {b} ({n})" for a, b, n in g.rules]
        cells: dict[tuple[str, str], list[int]] = {}
        for p in g.points:
            cells.setdefault((p.campaign, p.cell_id), []).append(p.benchmark_id)
        lines += [f"  {camp} {cell}: points {', '.join(map(str, ids))}"
                  for (camp, cell), ids in cells.items()]
    return "\n".join(lines) + "\n"


def diff_dict(d: CorpusDiff) -> dict[str, Any]:
    def point(p: PointChange) -> dict[str, Any]:
        return {"campaign": p.campaign, "cell_id": p.cell_id, "benchmark_id": p.benchmark_id,
                "old": p.old.label, "new": p.new.label, "old_by": p.old_by, "new_by": p.new_by}
    return {"base": {"source": d.sources[0], **d.base.to_dict()},
            "head": {"source": d.sources[1], **d.head.to_dict()}, "cells": d.cells,
            "points": d.points, "changed": d.changed,
            "groups": [{"old": g.old, "new": g.new, "count": g.count,
                        "rules": [{"old": a, "new": b, "count": n} for a, b, n in g.rules],
                        "points": [point(p) for p in g.points]} for g in d.groups]}


def render_diff_json(d: CorpusDiff) -> str:
    return json.dumps(diff_dict(d), indent=2, ensure_ascii=False) + "\n"
