"""Aggregation (spec 6.2): one formal row per physical coordinate of every ok cell.

The ``kv_seed_regime`` column and the choice of which cells are usable come from the verdicts
only. The rank artifacts are read for what verdicts do not carry: ``wall_time`` (the latency),
``context_clamped`` and the point objects (for sample selection), and the run identity; the
plan and the collector provenance give the identity columns. Stamps, skip reasons, engine
blocks and cache groups are never looked at here: a different policy gives different rows.
Error cells are reported and left out; every other row is kept, ``fake_fallback`` included.
"""
from __future__ import annotations

from dataclasses import dataclass

from typing import Any, Iterable, Sequence

from kvrules import api
from kvrules.artifacts.discover import CellRef, discover
from kvrules.artifacts.load import load_cell
from kvrules.artifacts.model import CellEvidence
from kvrules.consumers import selection
from kvrules.consumers.codes import DUPLICATE_CELL, ROW_EVIDENCE_MISSING
from kvrules.consumers.rows import Row, Rows
from kvrules.diagnostics import Diagnostic, KvrulesUsageError, evidence_error
from kvrules.verdicts.model import CellVerdict, PolicyIdentity, Report

_MISSING = object()


@dataclass(frozen=True)
class AggregatedCell:
    """A cell whose rows are in the table."""

    campaign: str
    cell_id: str
    rows: int

    def to_dict(self) -> dict[str, Any]:
        return {"campaign": self.campaign, "cell_id": self.cell_id, "rows": self.rows}


@dataclass(frozen=True)
class LeftOut:
    """A cell left out of the rows, with why: its evidence errors or an aggregation error.

    ``errors`` keep their ``file`` relative to ``campaign``, as in the classify report.
    """

    campaign: str
    cell_id: str
    errors: tuple[Diagnostic, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"campaign": self.campaign, "cell_id": self.cell_id,
                "errors": [e.to_dict() for e in self.errors]}


@dataclass(frozen=True)
class Aggregation:
    """The formal rows of ok cells and the cells that were left out."""

    rows: Rows
    cells: tuple[AggregatedCell, ...]
    left_out: tuple[LeftOut, ...]

    @property
    def exit_code(self) -> int:
        """0 when every cell gave rows, 1 when some cell was left out."""
        return 1 if self.left_out else 0

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "aggregation", "policy": self.rows.policy.to_dict(),
                "rows": self.rows.table.num_rows, "cells": [c.to_dict() for c in self.cells],
                "left_out": [c.to_dict() for c in self.left_out]}


def aggregate_paths(paths: Sequence[str], policy: api.Policy, plan: str | None = None,
                    run: api.Run = api.Run()) -> Aggregation:
    """Classify ``paths`` with ``policy`` on ``run`` and aggregate the verdicts
    (``kvrules aggregate``)."""
    return aggregate(run.classify(paths, policy, plan), plan=plan)


def aggregate(report: Report, plan: str | None = None) -> Aggregation:
    """The formal rows of a classification report (live, or read back with ``from_dict``).

    Each cell's evidence is found again under ``cell.campaign`` (give ``plan`` for single
    cell folders, as to classify). A cell id met twice keeps its first input.
    """
    return aggregate_cells(report.cells, report.policy, plan)


def aggregate_cells(cells: Iterable[CellVerdict], policy: PolicyIdentity,
                    plan: str | None = None) -> Aggregation:
    """:func:`aggregate` over any verdicts, e.g. cells classified with different parameters."""
    refs = _Refs(plan)
    rows: list[Row] = []
    done: list[AggregatedCell] = []
    left: list[LeftOut] = []
    seen: dict[str, str] = {}
    for cell in cells:
        errors = list(cell.errors) if cell.status != "ok" else []
        if not errors and cell.cell_id in seen:
            errors = [_duplicate(cell, seen[cell.cell_id])]
        if not errors:
            cell_rows, errors = cell_table(cell, load_cell(refs.get(cell), keep_results=True))
        if errors:
            left.append(LeftOut(cell.campaign, cell.cell_id, tuple(errors)))
            continue
        seen[cell.cell_id] = cell.campaign
        rows.extend(cell_rows)
        done.append(AggregatedCell(cell.campaign, cell.cell_id, len(cell_rows)))
    return Aggregation(Rows.from_pylist(rows, policy), tuple(done), tuple(left))


def cell_table(cell: CellVerdict, ev: CellEvidence) -> tuple[list[Row], list[Diagnostic]]:
    """The rows of one ok cell, or the errors that leave it out (never both)."""
    columns, errors = _cell_columns(ev)
    samples, missing = selection.samples(cell, ev)
    errors += missing
    if errors:
        return [], errors
    rows: list[Row] = []
    for coordinate, group in selection.by_coordinate(samples):
        chosen = selection.select(group)
        if chosen is None:
            errors.append(selection.collision(coordinate, group, ev))
            continue
        point = chosen.point
        rows.append({**columns, "workload_kind": point.point_type,
                     "batch_size": point.batch_size,
                     "total_prefill_tokens": point.total_prefill_tokens,
                     "total_kv_read_tokens": point.total_kv_read_tokens,
                     "kv_seed_regime": point.kv_seed_regime,
                     "latency_ms": 1000.0 * max(chosen.wall_times)})
    return ([], errors) if errors else (rows, [])


def _duplicate(cell: CellVerdict, first: str) -> Diagnostic:
    return evidence_error(DUPLICATE_CELL, f"cell {cell.cell_id} was already aggregated from "
                          f"{first}; a cell gives its rows once", f"cells/{cell.cell_id}")


class _Refs:
    """Cell references of each campaign, discovered once per campaign."""

    def __init__(self, plan: str | None) -> None:
        self._plan = plan
        self._by_campaign: dict[str, dict[str, CellRef]] = {}

    def get(self, cell: CellVerdict) -> CellRef:
        if cell.campaign not in self._by_campaign:
            found = discover([cell.campaign], self._plan)
            self._by_campaign[cell.campaign] = {r.cell_id: r for r in found}
        ref = self._by_campaign[cell.campaign].get(cell.cell_id)
        if ref is None:
            raise KvrulesUsageError(f"{cell.campaign}: cell {cell.cell_id} of the verdicts "
                                    "is not there any more")
        return ref


def _cell_prefix(ev: CellEvidence) -> str:
    """The cell folder relative to the input: ``cells/<id>/`` of a campaign, else empty."""
    return f"cells/{ev.cell_id}/" if ev.cell_dir != ev.root else ""


def _pick(data: Any, pointer: str, typ: type) -> Any:
    """The value at a JSON pointer when it has type ``typ`` (bool is not an int), else missing."""
    node = data
    for key in pointer.split("/")[1:]:
        if isinstance(node, list) and key.isdigit() and int(key) < len(node):
            node = node[int(key)]
        elif isinstance(node, dict) and key in node:
            node = node[key]
        else:
            return _MISSING
    if not isinstance(node, typ) or (typ is int and isinstance(node, bool)):
        return _MISSING
    return node


Source = tuple[str, Any, str, str, type]
"""``(column, document data, file, JSON pointer, expected type)`` of one identity column."""


def _cell_columns(ev: CellEvidence) -> tuple[Row, list[Diagnostic]]:
    """Identity columns from the plan, the provenance and rank 0; a diagnostic per gap."""
    if ev.plan is None or ev.plan_cell is None:
        return {}, [evidence_error(ROW_EVIDENCE_MISSING, "the formal rows need the collection "
                                   "plan (give a single cell folder --plan FILE)",
                                   _cell_prefix(ev) or ".")]
    row: Row = {"cell_id": ev.cell_id, "cp": ev.plan_cell.get("topology", {}).get("cp", 1)}
    errors = []
    for column, data, file, pointer, typ in _plan_sources(ev) + _run_sources(ev):
        value = _pick(data, pointer, typ)
        if value is _MISSING:
            errors.append(evidence_error(
                ROW_EVIDENCE_MISSING, f"the formal rows need {column}: no {typ.__name__} at "
                f"{pointer}", file, pointer))
        row[column] = value
    return row, errors


def _plan_sources(ev: CellEvidence) -> list[Source]:
    """Plan-level and cell-level columns of the collection plan (``cp`` defaults to 1)."""
    assert ev.plan is not None
    data, file, at = ev.plan.data, ev.plan.relpath, f"/cells/{ev.plan_cell_index}"
    out: list[Source] = [(c, data, file, f"/{key}", str) for c, key in (
        ("model_path", "model_path"), ("system", "system"), ("backend", "backend"),
        ("source_plan_sha256", "sha256"))]
    out.append(("parallel_strategy", data, file, f"{at}/parallel_strategy", str))
    out += [(k, data, file, f"{at}/topology/{k}", int)
            for k in ("tp", "pp", "dp", "moe_tp", "moe_ep")]
    out += [(k, data, file, f"{at}/execution_identity/{k}", str)
            for k in ("model_config_sha256", "execution_profile", "engram_residency",
                      "input_modality")]
    return out


def _run_sources(ev: CellEvidence) -> list[Source]:
    """Run identity columns: collector provenance (any pod: they agree) and rank 0."""
    out: list[Source] = []
    if ev.provenance:
        prov = ev.provenance[0]
        out += [("backend_version", prov.data, prov.relpath, "/runtime/backend_version", str),
                ("collector_attempt_id", prov.data, prov.relpath, "/attempt_id", str)]
    else:
        where = f"{_cell_prefix(ev)}raw/*/collector-provenance.json"
        out += [("backend_version", {}, where, "/runtime/backend_version", str),
                ("collector_attempt_id", {}, where, "/attempt_id", str)]
    rank0 = ev.ranks[0]
    out += [("runtime_run_id", rank0.data, rank0.relpath, "/run_id", str),
            ("runtime_grid_digest", rank0.data, rank0.relpath, "/grid_digest", str)]
    return out
