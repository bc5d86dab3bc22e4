"""Generate a synthetic campaign for the benchmark from the bundled dense example.

Cells vary the way real campaigns do (both producer formats, tensor-parallel sizes, a few
disqualified cells and warm-eligible cells with real KV), so the engine sees many distinct
cell shapes, not one shape repeated.
"""
from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "dense-legacy-stamp-format"
CELL = "fpm-llama31-8b-decode-tp1"
POD = f"{CELL}-worker-0"


def _read(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _cell_shape(i: int) -> dict[str, Any]:
    """Deterministic variety: format, tp, and a disqualifier for some cells."""
    return {"native": i % 2 == 1, "tp": (1, 2, 4, 8)[(i // 2) % 4],
            "sliding": i % 17 == 0, "warm": i % 11 == 0}


def _result(template: dict[str, Any], bid: int, shape: dict[str, Any],
            rng: random.Random) -> dict[str, Any]:
    result = copy.deepcopy(template)
    point = result["point"]
    point.update(benchmark_id=bid, batch_size=1 + (bid - 1) % 64,
                 total_kv_read_tokens=128 * (1 + (bid - 1) // 64))
    if shape["warm"]:
        real = bid % 3 != 0
        point["sample_reasons"] = ["capture", "kvwarm_real_kv" if real else "kvwarm_fake_fallback"]
        result["kv_seed_regime"] = "real_kv" if real else "fake_fallback"
    elif shape["native"]:
        point["sample_reasons"] = ["capture"]
        result["kv_seed_regime"] = "skip:dense_model_content_insensitive"
    result["fpms"][0]["wall_time"] = round(0.005 + rng.random() / 100, 6)
    return result


def _rank(base: dict[str, Any], rank: int, ranks: int, shape: dict[str, Any],
          points: int, rng: random.Random) -> dict[str, Any]:
    art = copy.deepcopy(base)
    art["dp"] = {"rank": rank, "size": ranks}
    parallel = art["engine"]["parallel"]
    parallel.update(data_parallel_size=ranks, data_parallel_rank=rank,
                    tensor_parallel_size=shape["tp"])
    if shape["sliding"]:
        art["engine"]["kv_cache"]["groups"][0].update(type="SlidingWindowSpec",
                                                       sliding_window=4096)
    if shape["warm"]:
        art["kvwarm"].update(warm_eligible=True, skip_reason=None)
    template = base["results"][0]
    art["results"] = [_result(template, b, shape, rng) for b in range(1, points + 1)]
    return art


def generate(root: Path, cells: int = 200, ranks: int = 2, points: int = 500,
             seed: int = 7) -> Path:
    """Write ``cells`` cells of ``ranks`` rank artifacts of ``points`` points under ``root``."""
    rng = random.Random(seed)
    plan = _read(EXAMPLE / "collection-plan.json")
    base = _read(EXAMPLE / "cells" / CELL / "raw" / POD / "benchmark.json")
    provenance = _read(EXAMPLE / "cells" / CELL / "raw" / POD / "collector-provenance.json")
    template_cell, plan["cells"] = plan["cells"][0], []
    for i in range(cells):
        shape, cell_id = _cell_shape(i), f"fpm-bench-{i:04d}"
        plan_cell = copy.deepcopy(template_cell)
        plan_cell["cell_id"] = cell_id
        plan_cell["topology"].update(dp=ranks, tp=shape["tp"])
        plan["cells"].append(plan_cell)
        for rank in range(ranks):
            pod = root / "cells" / cell_id / "raw" / f"{cell_id}-worker-{rank}"
            pod.mkdir(parents=True, exist_ok=True)
            name = "benchmark.json" if rank == 0 else f"benchmark_dp{rank}.json"
            art = _rank(base, rank, ranks, shape, points, rng)
            (pod / name).write_text(json.dumps(art), encoding="utf-8")
            (pod / "collector-provenance.json").write_text(
                json.dumps(dict(provenance, cell_id=cell_id)), encoding="utf-8")
    (root / "collection-plan.json").write_text(json.dumps(plan, indent=1), encoding="utf-8")
    return root
