"""A hand-written check of rank ``results`` items: the hot loop of the whole artifact stage.

A benchmark corpus holds ~200k results; fastjsonschema spends about as long on them as
``json.load`` spends decoding them, which alone would eat the 2x time budget. This loop is a
*sound under-approximation* of ``$defs/result`` in ``rank.schema.json``: when it returns
True the items are valid under the schema; when it returns False nothing is concluded and
the reference validator decides (and produces the precise error). Integers are exact JSON
integers (``type(x) is int``: not ``1.0``, not ``true``), as in the strict reference
validator of :mod:`.validate`. Keep it in step with the schema; the hypothesis
test ``test_results_fast_path_is_sound`` guards that.
"""
from __future__ import annotations

from typing import Any

_POINT_TYPES = ("prefill", "decode")
_COUNTS_MIN = (("benchmark_id", 1), ("batch_size", 0), ("total_prefill_tokens", 0),
               ("total_kv_read_tokens", 0))


def results_ok(results: Any) -> bool:
    """True only if every item satisfies ``$defs/result`` (False means "ask the schema")."""
    if type(results) is not list:
        return False
    for result in results:
        if type(result) is not dict or not _point_ok(result.get("point")):
            return False
        if "kv_seed_regime" in result:
            regime = result["kv_seed_regime"]
            if regime is not None and (type(regime) is not str or not regime):
                return False
        fpms = result.get("fpms")
        if type(fpms) is not list or len(fpms) != 1:
            return False
        fpm = fpms[0]
        if type(fpm) is not dict:
            return False
        for name in ("counter_id", "dp_rank"):
            if name in fpm and type(fpm[name]) is not int:
                return False
        wall = fpm.get("wall_time")
        if type(wall) is not float and type(wall) is not int or not wall > 0:
            return False
    return True


def _point_ok(point: Any) -> bool:
    """``$defs/point``: exact types (``type(x) is int`` also rules out booleans)."""
    if type(point) is not dict or point.get("point_type") not in _POINT_TYPES:
        return False
    for name, low in _COUNTS_MIN:
        value = point.get(name)
        if type(value) is not int or value < low:
            return False
    if "sample_reasons" in point:
        reasons = point["sample_reasons"]
        if reasons is not None:
            if type(reasons) is not list:
                return False
            for reason in reasons:
                if type(reason) is not str:
                    return False
    return True
