"""Build variants of the bundled dense examples in tmp_path and classify them.

A variant is the base example in one producer format plus edits given as
``(file, JSON pointer, value)``; ``file`` is ``bench`` (rank 0 artifact), ``plan`` or
``prov``. Tests then assert whole verdicts (regimes, error codes, failed conditions).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from helpers import copy_example, only_cell, pod_dir, set_at

from kvrules import api
from kvrules.verdicts.model import CellVerdict

FORMATS = {"stamp": "dense-legacy-stamp-format", "native": "dense-native-skip-format"}
DENSE = "skip:dense_model_content_insensitive"
DELETE = object()
Edit = tuple[str, str, Any]

_POLICY: dict[tuple[str, bool], api.Policy] = {}


def policy(dense: bool = True, rules: str | None = None) -> api.Policy:
    """Compile once per test session (the default policy, optionally with D1 off)."""
    key = (rules or "", dense)
    if key not in _POLICY:
        _POLICY[key] = api.load_policy(rules, {"dense_synthetic_kv": dense})
    return _POLICY[key]


def files(campaign: Path) -> dict[str, Path]:
    pod = pod_dir(campaign)
    return {"bench": pod / "benchmark.json", "plan": campaign / "collection-plan.json",
            "prov": pod / "collector-provenance.json", "cell": only_cell(campaign)}


def variant(tmp_path: Path, fmt: str, edits: Iterable[Edit] = (), name: str = "v") -> Path:
    """Copy the base example of ``fmt`` and apply edits (DELETE removes the key)."""
    campaign = copy_example(tmp_path, FORMATS.get(fmt, fmt), dest=name)
    paths = files(campaign)
    for file, pointer, value in edits:
        if value is DELETE:
            set_at(paths[file], pointer)
        else:
            set_at(paths[file], pointer, value)
    return campaign


def classify(campaign: Path, **kwargs: Any) -> CellVerdict:
    """The single cell verdict of a campaign."""
    report = api.classify([str(campaign)], kwargs.pop("pol", None) or policy(), **kwargs)
    (cell,) = report.cells
    return cell


def regimes(cell: CellVerdict) -> list[str | None]:
    return [p.kv_seed_regime for p in cell.points]


def error_codes(cell: CellVerdict) -> list[str]:
    return sorted({e.code for e in cell.errors})


def failed(cell: CellVerdict) -> list[str]:
    return sorted({f.id for f in cell.qualifications["dense_synthetic_kv"].failed})
