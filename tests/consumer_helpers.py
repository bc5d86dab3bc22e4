"""Fixture builders for the consumer tests: real campaign folders and real published tables.

Campaigns are copies of the bundled examples, renamed or given new points by editing their
JSON files, so aggregation and publication read exactly what the CLI would read.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from helpers import copy_example, dump, load, only_cell, pod_dir

from kvrules import api
from kvrules.consumers.aggregate import Aggregation, aggregate_paths
from kvrules.resources import rules_dir

LLAMA = "fpm-llama31-8b-decode-tp1"
QWEN = "fpm-qwen3-30b-a3b-decode-tp2"
MOE = "moe-tp-approved-skip"
LEGACY = "legacy-no-warmup-block"
SLIDING = "dense-sliding-window"
TABLE = Path("h200_sxm/vllm/0.11.2")
PARQUET = TABLE / "fpm_forward_perf.parquet"
RECORD = TABLE / "fpm_forward_perf.metadata.json"
_POLICIES: dict[tuple[str | None, bool], api.Policy] = {}


def policy(rules: str | None = None, dense: bool = True) -> api.Policy:
    """A compiled policy, cached per test session (compiling costs ~0.1 s)."""
    key = (rules, dense)
    if key not in _POLICIES:
        _POLICIES[key] = api.load_policy(rules, None if dense else {"dense_synthetic_kv": False})
    return _POLICIES[key]


def renamed(tmp_path: Path, example: str, cell_id: str, dest: str | None = None) -> Path:
    """A copy of ``example`` whose only cell is called ``cell_id`` (folder, plan, provenance)."""
    campaign = copy_example(tmp_path, example, dest or f"{example}-{cell_id}")
    cell = only_cell(campaign)
    plan = load(campaign / "collection-plan.json")
    plan["cells"][0]["cell_id"] = cell_id
    dump(campaign / "collection-plan.json", plan)
    for prov in cell.rglob("collector-provenance.json"):
        data = load(prov)
        data["cell_id"] = cell_id
        dump(prov, data)
    cell.rename(cell.parent / cell_id)
    return campaign


def rank_file(campaign: Path, rank: int = 0) -> Path:
    return pod_dir(campaign) / ("benchmark.json" if rank == 0 else f"benchmark_dp{rank}.json")


def result(benchmark_id: int, kind: str = "decode", batch: int = 4, prefill: int = 0,
           kv: int = 128, native: str | None = "fake_fallback",
           reasons: tuple[str, ...] = ("capture", "kvwarm_fake_fallback"), wall: float = 0.01,
           dp_rank: int = 0, **point_fields: Any) -> dict[str, Any]:
    """One rank result: a point with one FPM."""
    point = {"point_type": kind, "benchmark_id": benchmark_id, "batch_size": batch,
             "total_prefill_tokens": prefill, "total_kv_read_tokens": kv,
             "sample_reasons": list(reasons), **point_fields}
    out: dict[str, Any] = {"point": point,
                           "fpms": [{"counter_id": benchmark_id, "dp_rank": dp_rank,
                                     "wall_time": wall}]}
    if native is not None:
        out["kv_seed_regime"] = native
    return out


def set_results(campaign: Path, results: list[dict[str, Any]], rank: int = 0) -> None:
    """Replace the results of one rank artifact (iteration groups are not read by kvrules)."""
    path = rank_file(campaign, rank)
    data = load(path)
    data["results"] = results
    data.pop("iteration_groups", None)
    dump(path, data)


def make_prefill(campaign: Path) -> None:
    """Turn the campaign's only cell into a prefill cell (plan workload kind)."""
    plan = load(campaign / "collection-plan.json")
    plan["cells"][0]["workload_kind"] = "prefill"
    dump(campaign / "collection-plan.json", plan)


def aggregated(paths: list[Path], pol: api.Policy | None = None) -> Aggregation:
    return aggregate_paths([str(p) for p in paths], pol or policy())


def published(root: Path, paths: list[Path], pol: api.Policy | None = None) -> Any:
    """Aggregate ``paths`` and publish them into ``root``; the publish must succeed."""
    from kvrules.consumers.publish import publish
    result = publish(aggregated(paths, pol).rows, root)
    assert result.errors == (), result.errors
    return result


def record(root: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((root / RECORD).read_text(encoding="utf-8"))
    return data


def write_record(root: Path, data: dict[str, Any]) -> None:
    (root / RECORD).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def policy_copy(tmp_path: Path, name: str = "rules") -> Path:
    """A copy of the shipped policy directory to edit."""
    target = tmp_path / name
    shutil.copytree(str(rules_dir()), target,
                    ignore=shutil.ignore_patterns("__pycache__", "__init__.py"))
    return target


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new), encoding="utf-8")

