"""Synthetic benchmark corpora built from the bundled example campaigns.

Two shapes:

* ``few``: four evidence shapes repeated (dense legacy stamps, dense native skips, a
  warm-eligible cell with real and fake points, an approved moe_tp skip). Cells of one shape
  differ only in their ids and latencies, so the cross-cell memo evaluates each shape once.
* ``diverse``: every cell differs in what the rules read (tensor-parallel size, data-parallel
  ranks, backend version, cache kind, evidence format, model), so the memo helps little.

The corpus is a folder of campaigns, each a collection plan plus one folder per cell, the
way a collector writes them. Generation is deterministic for a given seed.
"""
from __future__ import annotations

import copy
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SHAPES = ("few", "diverse")


@dataclass(frozen=True)
class Template:
    """One example campaign's plan, first cell, rank-0 artifact and provenance."""

    name: str
    plan: dict[str, Any]
    artifact: dict[str, Any]
    provenance: dict[str, Any]


def _read(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def load_template(example: str) -> Template:
    """The pieces of ``examples/<example>`` a generated cell is cloned from."""
    root = EXAMPLES / example
    plan = _read(root / "collection-plan.json")
    cell_id = plan["cells"][0]["cell_id"]
    pod = root / "cells" / cell_id / "raw" / f"{cell_id}-worker-0"
    return Template(example, plan, _read(pod / "benchmark.json"),
                    _read(pod / "collector-provenance.json"))


@dataclass(frozen=True)
class CellShape:
    """What one generated cell looks like to the rules."""

    template: str
    stamps: str = "template"  # template | native | warm
    tp: int | None = None
    ranks: int = 2
    vllm: str | None = None
    cache: str = "full"  # full | sliding | wrapped


FEW = (CellShape("dense-legacy-stamp-format"), CellShape("dense-native-skip-format"),
       CellShape("dense-legacy-stamp-format", stamps="warm"),
       CellShape("moe-tp-approved-skip"))


def diverse_shape(i: int) -> CellShape:
    """Cell ``i`` of the diverse corpus: every cell reads differently to the rules."""
    template = ("dense-legacy-stamp-format", "dense-native-skip-format",
                "moe-tp-approved-skip")[i % 3]
    return CellShape(template, stamps="warm" if i % 7 == 3 else "template",
                     tp=(1, 2, 4, 8)[(i // 3) % 4], ranks=1 + (i // 12) % 2,
                     vllm=f"0.11.{i}", cache=("full", "full", "sliding", "wrapped")[(i // 5) % 4])


def _result(template: dict[str, Any], bid: int, shape: CellShape,
            rng: random.Random) -> dict[str, Any]:
    result = copy.deepcopy(template)
    point = result["point"]
    point.update(benchmark_id=bid, batch_size=1 + (bid - 1) % 64,
                 total_kv_read_tokens=128 * (1 + (bid - 1) // 64))
    if shape.stamps == "warm":
        real = bid % 3 != 0
        point["sample_reasons"] = ["capture", "kvwarm_real_kv" if real else "kvwarm_fake_fallback"]
        result["kv_seed_regime"] = "real_kv" if real else "fake_fallback"
    for fpm in result.get("fpms", []):
        fpm["wall_time"] = round(0.005 + rng.random() / 100, 6)
    return result


def _cache_groups(groups: list[Any], cache: str) -> list[Any]:
    groups = copy.deepcopy(groups)
    if cache == "sliding":
        groups[0].update(type="SlidingWindowSpec", sliding_window=4096)
    elif cache == "wrapped":
        groups = [{"type": "UniformTypeKVCacheSpecs", "specs": groups}]
    return groups


def _artifact(t: Template, rank: int, shape: CellShape, points: int,
              rng: random.Random) -> dict[str, Any]:
    art = copy.deepcopy({k: v for k, v in t.artifact.items() if k != "results"})
    art["dp"] = {"rank": rank, "size": shape.ranks}
    engine = art["engine"]
    engine["parallel"].update(data_parallel_size=shape.ranks, data_parallel_rank=rank)
    if shape.tp is not None:
        engine["parallel"]["tensor_parallel_size"] = shape.tp
    if shape.vllm is not None:
        engine["versions"]["vllm"] = shape.vllm
    engine["kv_cache"]["groups"] = _cache_groups(engine["kv_cache"]["groups"], shape.cache)
    if shape.stamps == "warm":
        art["kvwarm"].update(warm_eligible=True, skip_reason=None)
    template = t.artifact["results"][0]
    art["results"] = [_result(template, b, shape, rng) for b in range(1, points + 1)]
    return art


def _plan_cell(t: Template, cell_id: str, shape: CellShape) -> dict[str, Any]:
    cell = copy.deepcopy(t.plan["cells"][0])
    cell["cell_id"] = cell_id
    cell["topology"]["dp"] = shape.ranks
    if shape.tp is not None:
        cell["topology"]["tp"] = shape.tp
        if cell["topology"].get("moe_tp", 1) != 1:
            cell["topology"]["moe_tp"] = shape.tp
    return cell


def _write_cell(root: Path, t: Template, cell_id: str, shape: CellShape, points: int,
                rng: random.Random) -> None:
    for rank in range(shape.ranks):
        pod = root / "cells" / cell_id / "raw" / f"{cell_id}-worker-{rank}"
        pod.mkdir(parents=True, exist_ok=True)
        name = "benchmark.json" if rank == 0 else f"benchmark_dp{rank}.json"
        art = _artifact(t, rank, shape, points, rng)
        (pod / name).write_text(json.dumps(art), encoding="utf-8")
        provenance = copy.deepcopy(t.provenance)
        provenance["cell_id"] = cell_id
        if shape.vllm is not None and isinstance(provenance.get("runtime"), dict):
            provenance["runtime"]["backend_version"] = shape.vllm
        (pod / "collector-provenance.json").write_text(json.dumps(provenance), encoding="utf-8")


def generate(root: Path, shape: str = "few", cells: int = 200, ranks: int = 2,
             points: int = 500, seed: int = 7) -> Path:
    """Write a corpus of ``cells`` cells (``ranks`` ranks where the shape does not say,
    ``points`` points per rank) under ``root``: one campaign per template."""
    if shape not in SHAPES:
        raise ValueError(f"unknown corpus shape {shape!r} (known: {', '.join(SHAPES)})")
    rng = random.Random(seed)
    templates: dict[str, Template] = {}
    plans: dict[str, dict[str, Any]] = {}
    for i in range(cells):
        cell = FEW[i % len(FEW)] if shape == "few" else diverse_shape(i)
        if shape == "few":
            cell = CellShape(cell.template, cell.stamps, cell.tp, ranks, cell.vllm, cell.cache)
        key = f"{cell.template}-{cell.stamps}" if shape == "few" else cell.template
        t = templates.setdefault(cell.template, load_template(cell.template))
        plan = plans.setdefault(key, {**copy.deepcopy(t.plan), "cells": []})
        campaign = root / key
        cell_id = f"{t.plan['cells'][0]['cell_id']}-{i:04d}"
        plan["cells"].append(_plan_cell(t, cell_id, cell))
        _write_cell(campaign, t, cell_id, cell, points, rng)
    for key, plan in plans.items():
        (root / key / "collection-plan.json").write_text(json.dumps(plan, indent=1),
                                                         encoding="utf-8")
    return root
