"""Text and JSON for ``kvrules explain``: pure functions of the explanation values."""
from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from kvrules.authoring.explain import PointExplanation, Step
from kvrules.authoring.explain_cell import CellExplanation, GroupExplanation
from kvrules.authoring.rulefacts import Evidence
from kvrules.authoring.whynot import WhyNot


SHOWN_CHARS = 160
"""Longest value text shown in a line (whole blocks are facts now); JSON keeps it all."""


def shown(value: Any) -> str:
    """A value as JSON text, cut to SHOWN_CHARS with a marker when longer."""
    text = json.dumps(value, ensure_ascii=False, default=repr)
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS - 1] + "…"


def evidence_line(e: Evidence, indent: str) -> str:
    """``warmup0.skip_reason = "flag_off"  (file#/kvwarm/skip_reason)``."""
    value = f"= {shown(e.value)}" if e.present else "is absent"
    where = f"  ({e.file}#{e.pointer})" if e.file else "  (policy parameter)" \
        if e.fact == "params" else ""
    return f"{indent}{e.fact}.{e.field} {value}{where}"


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


def render_point_text(x: PointExplanation) -> str:
    """The verdict, how it was decided (a tree down to the evidence), and why not otherwise."""
    verdict = (f"{x.regime}, {'eligible' if x.eligible else 'not eligible'}, decided by "
               f"{x.decided_by}") if x.status == "ok" else "error (the cell is in error)"
    lines = [f"{x.campaign}: cell {x.cell_id}, point {x.benchmark_id}", f"verdict: {verdict}",
             "", "how:"]
    for s in x.chain:
        lines += _step_lines(s)
    if x.status == "error":
        lines += ["", "errors:"] + [f"  {e.code}: {e.message} ({e.location()})"
                                    for e in x.errors]
    else:
        lines += ["", "why not:"] + [line for w in x.why_not for line in _why_not_lines(w)]
    return "\n".join(lines) + "\n"


def _group_lines(g: GroupExplanation) -> list[str]:
    state = "eligible" if g.eligible else f"not eligible (failed: {', '.join(g.failed)})" \
        if g.failed else "not eligible"
    lines = [f"{g.group}: {state}"]
    current = None
    for row in g.rows:
        if row.condition != current:
            lines.append(f"  {row.condition} {row.description}".rstrip())
            current = row.condition
        lines.append(f"    {row.scope}: {'holds' if row.holds else 'FAILED'}")
        for c in row.checks:
            mark = "fired" if c.fired else "did not fire"
            lines.append(f"      {c.rule} {mark}: {c.detail}")
            lines += [evidence_line(e, "        ") for e in c.evidence]
    return lines


def render_cell_text(x: CellExplanation) -> str:
    """Cell status and errors, then every qualification condition by scope (cell, rank N)."""
    lines = [f"{x.campaign}: cell {x.cell_id}: {x.status}"]
    lines += [f"  {e.code}: {e.message} ({e.location()})" for e in x.errors]
    for g in x.groups:
        lines += [""] + _group_lines(g)
    return "\n".join(lines) + "\n"


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def render_explanation_json(x: PointExplanation | CellExplanation) -> str:
    """The explanation as one JSON document (``kind`` is ``point`` or ``cell``)."""
    data = asdict(x)
    data["errors"] = [e.to_dict() for e in x.errors]
    doc = {"kind": "point" if isinstance(x, PointExplanation) else "cell", **data}
    return json.dumps(_jsonable(doc), indent=2, ensure_ascii=False) + "\n"


def render_explanation_text(x: PointExplanation | CellExplanation) -> str:
    return render_point_text(x) if isinstance(x, PointExplanation) else render_cell_text(x)
