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


def results_ok(results: Any) -> bool:
    """True only if every item satisfies ``$defs/result`` (False means "ask the schema")."""
    if type(results) is not list:
        return False
    point_ok = _point_ok
    for result in results:
        if type(result) is not dict or not point_ok(result.get("point")):
            return False
        regime = result.get("kv_seed_regime")
        if regime is not None and (type(regime) is not str or not regime):
            return False  # (absent and null are both allowed)
        fpms = result.get("fpms")
        if type(fpms) is not list or len(fpms) != 1:
            return False
        fpm = fpms[0]
        if type(fpm) is not dict:
            return False
        if type(fpm.get("counter_id", 0)) is not int or type(fpm.get("dp_rank", 0)) is not int:
            return False
        wall = fpm.get("wall_time")
        if type(wall) is not float and type(wall) is not int or not wall > 0:
            return False
    return True


def _point_ok(point: Any) -> bool:
    """``$defs/point``: exact types (``type(x) is int`` also rules out booleans)."""
    if type(point) is not dict or point.get("point_type") not in _POINT_TYPES:
        return False
    get = point.get
    benchmark_id, batch_size = get("benchmark_id"), get("batch_size")
    prefill, kv_read = get("total_prefill_tokens"), get("total_kv_read_tokens")
    if (type(benchmark_id) is not int or type(batch_size) is not int
            or type(prefill) is not int or type(kv_read) is not int
            or benchmark_id < 1 or batch_size < 0 or prefill < 0 or kv_read < 0):
        return False
    reasons = get("sample_reasons")
    if reasons is not None:
        if type(reasons) is not list:
            return False
        for reason in reasons:
            if type(reason) is not str:
                return False
    return True
