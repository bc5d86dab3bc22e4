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


def embedded(page: str) -> dict[str, Any]:
    """The JSON document a report page embeds (exactly one data element)."""
    found = _DATA.findall(page)
    assert len(found) == 1
    data: dict[str, Any] = json.loads(found[0])
    return data


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
