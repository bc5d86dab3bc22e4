"""Text and JSON for ``kvrules explain``: pure functions of the explanation values.

Every explanation answers first (the verdict and its root cause, with the evidence
location) and then shows its work; ``fails`` keeps only what failed.
"""
from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any, Sequence

from kvrules.authoring.explain.causes import Cause
from kvrules.authoring.explain.point import PointExplanation, Step, ranges
from kvrules.authoring.explain.cell import CellExplanation, GroupExplanation, PointsByCause
from kvrules.authoring.explain.rulefacts import Evidence
from kvrules.authoring.explain.whynot import WhyNot
from kvrules.diagnostics import Diagnostic


SHOWN_CHARS = 160
"""Longest value text shown in a line (whole blocks are facts now); JSON keeps it all."""


def shown(value: Any) -> str:
    """A value as JSON text, cut to SHOWN_CHARS with a marker when longer."""
    text = json.dumps(value, ensure_ascii=False, default=repr)
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS - 1] + "…"


def evidence_line(e: Evidence, indent: str) -> str:
    """``rank 0 kvwarm: skip_reason = "flag_off"  (file#/kvwarm/skip_reason)``."""
    value = f"= {shown(e.value)}" if e.present else "is absent"
    where = f"  ({e.file}#{e.pointer})" if e.file else "  (policy parameter)" \
        if e.fact == "params" else ""
    return f"{indent}{e.fact}: {e.field} {value}{where}"


def _error_text(e: Diagnostic) -> str:
    return f"{e.code}: {e.message} ({e.location()})"


def answer_lines(label: str, status: str, regime: str | None, eligible: bool,
                 reason: str, causes: Sequence[Cause],
                 errors: Sequence[Diagnostic]) -> list[str]:
    """``point 1: fake_fallback, not eligible: <root cause> (<where>)`` and, indented, the
    rest of that cause (a qualification's other failed conditions)."""
    if status == "error":
        head = f"{label}: error: the cell is in error"
        if not errors:
            return [head]
        return [f"{head}: {_error_text(errors[0])}"] + [f"  {_error_text(e)}"
                                                        for e in errors[1:]]
    if eligible:
        return [f"{label}: {regime}, eligible: {reason}"]
    if not causes or not causes[0].held:  # no eligible step came near: the decider says why
        return [f"{label}: {regime}, not eligible: {reason}"]
    first = causes[0]
    return [f"{label}: {regime}, not eligible: {first.text()}"] + [
        f"  {c.text()}" for c in first.conditions[1:]]


def point_answer(x: PointExplanation) -> list[str]:
    return answer_lines(f"point {x.benchmark_id}", x.status, x.regime, x.eligible, x.reason,
                        x.causes, x.errors)


def _step_lines(s: Step) -> list[str]:
    pad = "  " * (s.depth + 1)
    lines = [f"{pad}{s.rule}: {s.reason}"]
    if s.derived:
        lines.append(f"{pad}  => {s.derived}")
    lines += [f"{pad}  because {n}" for n in s.negations]
    lines += [evidence_line(e, pad + "  ") for e in s.evidence]
    return lines


def _why_not_lines(w: WhyNot, indent: str = "  ") -> list[str]:
    head = f"{indent}{w.rule}" + (f" ({w.proposes})" if w.proposes else "")
    return [f"{head}: {w.detail}"] + [evidence_line(e, indent + "    ") for e in w.evidence]


def _cause_lines(c: Cause, indent: str = "  ") -> list[str]:
    """An eligible step that did not hold, and everything that stopped it."""
    lines = [f"{indent}{c.step} ({c.regime}): {c.detail}"]
    lines += [f"{indent}    {k.text()}" for k in c.conditions]
    return lines + [evidence_line(e, indent + "    ") for e in c.evidence]


def render_point_text(x: PointExplanation, fails: bool = False) -> str:
    """The answer, then how it was decided (a tree down to the evidence) and why not
    otherwise; with ``fails`` only the answer and the eligible steps that did not hold."""
    decided = f", decided by {x.decided_by}" if x.decided_by else ""
    lines = point_answer(x) + ["", f"{x.campaign}: cell {x.cell_id}, point "
                                   f"{x.benchmark_id}{decided}"]
    if fails:
        if x.causes:
            lines += ["", "eligible regimes not reached:"]
            lines += [line for c in x.causes for line in _cause_lines(c)]
        return "\n".join(lines) + "\n"
    lines += ["", "how:"]
    for s in x.chain:
        lines += _step_lines(s)
    if x.status == "error":
        lines += ["", "errors:"] + [f"  {_error_text(e)}" for e in x.errors]
    else:
        lines += ["", "why not:"] + [line for w in x.why_not for line in _why_not_lines(w)]
    return "\n".join(lines) + "\n"


def _group_lines(g: GroupExplanation, fails: bool) -> list[str]:
    state = "eligible" if g.eligible else f"not eligible (failed: {', '.join(g.failed)})" \
        if g.failed else "not eligible"
    lines = [f"{g.group}: {state}"]
    current = None
    for row in g.rows:
        if fails and row.holds:
            continue
        if row.condition != current:
            lines.append(f"  {row.condition} {row.description}".rstrip())
            current = row.condition
        lines.append(f"    {row.scope}: {'holds' if row.holds else 'FAILED'}")
        for c in row.checks:
            if fails and not c.fired:
                continue
            mark = "fired" if c.fired else "did not fire"
            lines.append(f"      {c.rule} {mark}: {c.detail}")
            lines += [evidence_line(e, "        ") for e in c.evidence]
    return lines


def _points_label(points: Sequence[int]) -> str:
    return f"point{'s' if len(points) > 1 else ''} {ranges(list(points))}"


def cell_answer(x: CellExplanation) -> list[str]:
    """The cell's status, its errors, and every ineligible point grouped by cause."""
    if x.status == "error":
        return answer_lines(f"cell {x.cell_id}", x.status, None, False, "", (), x.errors)
    lines: list[str] = []
    for g in x.points:
        lines += answer_lines(_points_label(g.points), "ok", g.regime, False, g.reason,
                              g.causes, ())
    return lines or [f"cell {x.cell_id}: every point is eligible"]


def render_cell_text(x: CellExplanation, fails: bool = False) -> str:
    """The answer, then every qualification condition by scope (cell, rank N); with
    ``fails`` only the conditions that failed and the rules that failed them."""
    lines = cell_answer(x) + ["", f"{x.campaign}: cell {x.cell_id}: {x.status}"]
    for g in x.groups:
        lines += [""] + _group_lines(g, fails)
    return "\n".join(lines) + "\n"


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def _points_json(g: PointsByCause) -> dict[str, Any]:
    return {**asdict(g), "answer": answer_lines(_points_label(g.points), "ok", g.regime,
                                                False, g.reason, g.causes, ())}


def render_explanation_json(x: PointExplanation | CellExplanation) -> str:
    """The explanation as one JSON document (``kind`` is ``point`` or ``cell``); ``answer``
    holds the first lines of the text, ``causes`` the root cause as data."""
    data = asdict(x)
    data["errors"] = [e.to_dict() for e in x.errors]
    if isinstance(x, PointExplanation):
        doc = {"kind": "point", "answer": point_answer(x), **data}
    else:
        data["points"] = [_points_json(g) for g in x.points]
        doc = {"kind": "cell", "answer": cell_answer(x), **data}
    return json.dumps(_jsonable(doc), indent=2, ensure_ascii=False) + "\n"


def render_explanation_text(x: PointExplanation | CellExplanation, fails: bool = False) -> str:
    return render_point_text(x, fails) if isinstance(x, PointExplanation) \
        else render_cell_text(x, fails)
