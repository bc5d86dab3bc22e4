"""Hand-built verdicts for renderer, schema and CLI tests (no policy, no artifacts needed).

The three cells mirror bundled examples: a dense cell whose two points qualify, a dense cell
that fails D9, and a two-rank cell in error (``dp_warmup_disagreement``).
"""
from __future__ import annotations

import json
from typing import Any

from jsonschema import Draft202012Validator

from kvrules.diagnostics import evidence_error
from kvrules.resources import load_schema
from kvrules.verdicts.model import (CellVerdict, FailedCondition, PointVerdict, PolicyIdentity,
                                    Qualification, Report)

DENSE = "skip:dense_model_content_insensitive"
CELL = "fpm-llama31-8b-decode-tp1"
CELL_DP2 = "fpm-llama31-8b-decode-tp1-dp2"
POLICY = PolicyIdentity("kv_seed", "dense_full_attention_v1", "sha256:" + "0123456789abcdef" * 4,
                        {"dense_synthetic_kv": True})


def point(cell_id: str, benchmark_id: int, regime: str | None,
          native: str | None = "fake_fallback") -> PointVerdict:
    """A decode point; ``regime=None`` makes it a point of an error cell."""
    ok = regime is not None
    return PointVerdict(
        cell_id=cell_id, benchmark_id=benchmark_id, point_type="decode", batch_size=4,
        total_prefill_tokens=0, total_kv_read_tokens=128 * benchmark_id, native_regime=native,
        kv_seed_regime=regime, eligible=ok and regime != "fake_fallback",
        status="ok" if ok else "error", decided_by="final.regime" if ok else None,
        trace=("warmup.dense_skip", "final.regime") if ok else (),
        reasons=("The cell is dense-eligible and the point is stamped fake.",) if ok else ())


def dense_cell(campaign: str = "examples/dense-legacy-stamp-format") -> CellVerdict:
    return CellVerdict(campaign=campaign, cell_id=CELL, workload_kind="decode", status="ok",
                       errors=(), qualifications={"dense_synthetic_kv": Qualification(True)},
                       points=(point(CELL, 1, DENSE), point(CELL, 2, DENSE)))


def sliding_window_cell() -> CellVerdict:
    failed = (FailedCondition("D9", "rank 0 group 0 is SlidingWindowSpec"),)
    return CellVerdict(campaign="examples/dense-sliding-window", cell_id=CELL,
                       workload_kind="decode", status="ok", errors=(),
                       qualifications={"dense_synthetic_kv": Qualification(False, failed)},
                       points=(point(CELL, 1, "fake_fallback", DENSE),
                               point(CELL, 2, "fake_fallback", DENSE)))


def error_cell() -> CellVerdict:
    error = evidence_error(
        "dp_warmup_disagreement", "rank 1 kvwarm differs from rank 0",
        f"cells/{CELL_DP2}/raw/{CELL_DP2}-worker-0/benchmark_dp1.json", "/kvwarm/skip_reason")
    return CellVerdict(campaign="examples/dp2-peer-ineligible", cell_id=CELL_DP2,
                       workload_kind="decode", status="error", errors=(error,),
                       qualifications={},
                       points=(point(CELL_DP2, 1, None), point(CELL_DP2, 2, None)))


def mixed_report() -> Report:
    return Report(policy=POLICY, cells=(dense_cell(), sliding_window_cell(), error_cell()))


def dense_report() -> Report:
    return Report(policy=POLICY, cells=(dense_cell(),))


def report_validator() -> Draft202012Validator:
    """Validator of the whole ``--format json`` document (the shipped schema)."""
    return Draft202012Validator(load_schema("report.schema.json"))


def record_validator() -> Draft202012Validator:
    """Validator of one ``--format jsonl`` record: the record schema alone, no registry."""
    return Draft202012Validator(load_schema("report-record.schema.json"))


def jsonl_records(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines()]


def report_dict_from_jsonl(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Rebuild the json document from jsonl records (points precede their cell)."""
    header, *body, summary = records
    cells, pending = [], []
    for record in body:
        if record["kind"] == "point":
            pending.append(record)
        else:
            cells.append({**record, "points": pending})
            pending = []
    assert not pending, "points after the last cell"
    return {"kvrules_version": header["kvrules_version"], "policy": header["policy"],
            "cells": cells, "summary": summary}
