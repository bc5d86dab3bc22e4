"""Shared by the report tests: read the embedded document back, build the test corpora."""
from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
_DATA = re.compile(r'<script type="application/json" id="kvrules-data">(.*?)</script>', re.S)


def raw_embedded(page: str) -> dict[str, Any]:
    """The JSON document a report page embeds (exactly one data element), packed."""
    found = _DATA.findall(page)
    assert len(found) == 1
    data: dict[str, Any] = json.loads(found[0])
    return data


def embedded(page: str) -> dict[str, Any]:
    """The report document a page embeds, expanded as report.js expands it."""
    return expand(raw_embedded(page))


def example_paths() -> list[str]:
    """Every bundled example campaign, in name order."""
    return [str(p) for p in sorted(EXAMPLES.iterdir()) if p.is_dir()]


def _corpus_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("kvrules_bench_corpus",
                                                  ROOT / "benchmarks" / "corpus.py")
    assert spec is not None and spec.loader is not None
    if spec.name in sys.modules:
        return sys.modules[spec.name]
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it runs
    spec.loader.exec_module(module)
    return module


def diverse_corpus(root: Path, cells: int = 12, ranks: int = 2, points: int = 20) -> list[str]:
    """A generated multi-cell corpus (benchmarks/corpus.py, shape ``diverse``)."""
    _corpus_module().generate(root, "diverse", cells, ranks, points)
    return [str(p) for p in sorted(root.iterdir()) if p.is_dir()]


def expand(doc: dict[str, Any]) -> dict[str, Any]:
    """The embedded (packed) document back as the report document: what report.js does."""
    strings, fields = doc["strings"], doc["point_fields"]
    is_string = set(doc["string_fields"])
    cells = []
    for cell in doc["cells"]:
        points = [{f: strings[v] if f in is_string and v is not None else v
                   for f, v in zip(fields, values)} for values in cell["points"]]
        for i, change in cell["point_changes"]:
            points[i]["change"] = change
        rows = []
        for row in cell["rows"]:
            if not isinstance(row, list):
                rows.append(row)
                continue
            p = points[row[0]]
            rows.append({"point": row[0], "workload_kind": p["point_type"],
                         "batch_size": p["batch_size"],
                         "total_prefill_tokens": p["total_prefill_tokens"],
                         "total_kv_read_tokens": p["total_kv_read_tokens"],
                         "latency_ms": row[1], "kv_seed_regime": strings[row[2]],
                         "benchmark_id": p["benchmark_id"], "native_regime": p["native_regime"],
                         "eligible": p["eligible"], "decided_by": p["decided_by"],
                         "changed": "change" in p, **({"change": p["change"]} if "change" in p
                                                      else {})})
        rest = {k: v for k, v in cell.items() if k != "point_changes"}
        cells.append({**rest, "points": points, "rows": rows})
    meta = ("encoding", "point_fields", "string_fields", "strings")
    return {**{k: v for k, v in doc.items() if k not in meta}, "cells": cells}
