"""schemas/report.schema.json and report-record.schema.json against hand-built reports."""
from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from verdict_samples import (POLICY, dense_cell, jsonl_records, mixed_report, record_validator,
                             report_validator)

from kvrules.resources import load_schema
from kvrules.verdicts.model import Report
from kvrules.verdicts.render import iter_jsonl, render_json

REPO_SCHEMAS = Path(__file__).resolve().parents[1] / "schemas"


def mixed() -> dict[str, Any]:
    return json.loads(render_json(mixed_report()))


def errors_of(doc: dict[str, Any]) -> list[str]:
    return sorted(e.message for e in report_validator().iter_errors(doc))


@pytest.mark.parametrize("name", ["report.schema.json", "report-record.schema.json"])
def test_shipped_schema_is_valid_draft_2020_12_and_matches_the_repo(name: str) -> None:
    schema = load_schema(name)
    Draft202012Validator.check_schema(schema)
    assert schema == json.loads((REPO_SCHEMAS / name).read_text(encoding="utf-8"))


@pytest.mark.parametrize("report", [mixed_report(), Report(policy=POLICY, cells=())],
                         ids=["ok-d9-and-error-cells", "no-cells"])
def test_hand_built_reports_validate(report: Report) -> None:
    assert errors_of(json.loads(render_json(report))) == []


def _set(doc: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A copy of ``doc`` with the value at ``a/0/b`` replaced (``...`` deletes it)."""
    out = copy.deepcopy(doc)
    *parents, last = path.split("/")
    target: Any = out
    for key in parents:
        target = target[int(key)] if isinstance(target, list) else target[key]
    if value is ...:
        del target[last]
    else:
        target[int(last) if isinstance(target, list) else last] = value
    return out


BROKEN = {
    "summary missing": ("summary", ...),
    "unknown cell status": ("cells/0/status", "fine"),
    "ok cell with errors": ("cells/0/errors", [{"code": "artifact_invalid", "message": "m",
                                                "file": "f", "pointer": ""}]),
    "error cell without errors": ("cells/2/errors", []),
    "error cell with eligible points count": ("cells/2/points_eligible", 1),
    "ok cell without dense_synthetic_kv": ("cells/0/dense_synthetic_kv", ...),
    "eligible dense with a failed condition": (
        "cells/0/dense_synthetic_kv/failed", [{"id": "D9", "reason": "r"}]),
    "failed condition that is not a D id": (
        "cells/1/dense_synthetic_kv/failed/0/id", "sliding_window"),
    "cell without points": ("cells/0/points", ...),
    "error without pointer": ("cells/2/errors/0/pointer", ...),
    "pointer not a JSON pointer": ("cells/2/errors/0/pointer", "kvwarm"),
    "error point with a regime": ("cells/2/points/0/kv_seed_regime", "fake_fallback"),
    "eligible error point": ("cells/2/points/0/eligible", True),
    "ok point without regime": ("cells/0/points/0/kv_seed_regime", None),
    "ok point not decided by a rule": ("cells/0/points/0/decided_by", None),
    "point with a string batch size": ("cells/0/points/0/batch_size", "4"),
    "point with a boolean token count": ("cells/0/points/0/total_kv_read_tokens", True),
    "benchmark ids start at 1": ("cells/0/points/0/benchmark_id", 0),
    "unknown point type": ("cells/0/points/0/point_type", "mixed"),
    "wrong record kind": ("cells/0/points/0/kind", "cell"),
    "digest is not sha256": ("policy/digest", "md5:abc"),
    "negative count": ("summary/counts/fake_fallback", -1),
}


@pytest.mark.parametrize("path,value", BROKEN.values(), ids=BROKEN.keys())
def test_broken_reports_do_not_validate(path: str, value: Any) -> None:
    assert errors_of(_set(mixed(), path, value)) != []


def test_more_fields_may_be_added() -> None:
    doc = _set(mixed(), "cells/0/points/0/latency_hint", 1.5)
    assert errors_of(_set(doc, "cells/0/campaign_label", "x")) == []


def test_every_jsonl_record_validates() -> None:
    report = mixed_report()
    validator = record_validator()
    records = jsonl_records("".join(iter_jsonl(report.policy, report.cells)))
    assert [list(validator.iter_errors(r)) for r in records] == [[]] * len(records)


@pytest.mark.parametrize("record", [
    {"kind": "cell"},
    {"kind": "row", "cell_id": "x"},
    {**dense_cell().to_dict(with_points=False), "status": "error"},
    {"kind": "report", "kvrules_version": "0.1.0"},
    {"kind": "summary", "cells": 1},
], ids=["cell-without-fields", "unknown-kind", "error-cell-without-errors", "header-no-policy",
        "summary-without-totals"])
def test_broken_jsonl_records_do_not_validate(record: dict[str, Any]) -> None:
    assert list(record_validator().iter_errors(record)) != []


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        return [v for k, v in node.items() if k == "$ref"] + [
            r for k, v in node.items() if k != "$ref" for r in _refs(v)]
    if isinstance(node, list):
        return [r for v in node for r in _refs(v)]
    return []


@pytest.mark.parametrize("path", sorted(REPO_SCHEMAS.glob("*.schema.json")),
                         ids=lambda p: p.name)
def test_every_published_schema_resolves_on_its_own(path: Path) -> None:
    """Editors and other tools load one schema file: no reference may leave it."""
    schema = json.loads(path.read_text(encoding="utf-8"))
    for ref in _refs(schema):
        assert ref.startswith("#/"), f"{path.name}: {ref} leaves the file"
        node = schema
        for part in ref[2:].split("/"):
            node = node[part.replace("~1", "/").replace("~0", "~")]  # KeyError: dangling
    Draft202012Validator.check_schema(schema)


def test_the_record_schema_copies_the_report_schema_definitions_exactly() -> None:
    report = json.loads((REPO_SCHEMAS / "report.schema.json").read_text(encoding="utf-8"))
    record = json.loads((REPO_SCHEMAS / "report-record.schema.json").read_text(
        encoding="utf-8"))
    assert record["$defs"] == {k: v for k, v in report["$defs"].items() if k in record["$defs"]}
    used = {r.rsplit("/", 1)[-1] for r in _refs(record)}
    assert used == set(record["$defs"])
