"""A usual rank file decoded straight into its fields and result columns, with msgspec.

Most of a rank file is its ``results``: thirty members each, of which kvrules reads eight.
The reference path decodes every member into dicts (:func:`~.jsonio.decode_json`), proves
no key was given twice, then checks the eight column by column
(:func:`~.fastpath.result_columns`); here msgspec decodes ``results`` into typed structs
that check the rank schema's types and bounds as they are built, in half the time.

Like :mod:`.fastpath` this is a *sound under-approximation*: when :func:`decode_usual`
answers, the fields and columns are exactly what the reference path gives for the same
bytes, and that path finds no duplicate key; None concludes nothing, and the reference
path decides (and reports). A result member no producer is known to write, or of another
type than producers write, is refused here rather than skipped: every member is then
decoded and counted, which is how a duplicate key is seen (:func:`_no_member_dropped`).
"""
from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import UNSET, Meta, Raw, UnsetType

from kvrules.artifacts.fastpath import one_per_value
from kvrules.artifacts.jsonio import ESCAPED_COLONS, decode_json
from kvrules.artifacts.model import ABSENT, ResultColumns

_NUMBER = int | float
"""A number kvrules does not read (an integer stays one: small ones are shared, not built)."""


class _Scheduled(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """A measurement's ``scheduled_requests`` (counted, not read)."""

    num_prefill_requests: _NUMBER
    sum_prefill_tokens: _NUMBER
    var_prefill_length: _NUMBER
    sum_prefill_kv_tokens: _NUMBER
    num_decode_requests: _NUMBER
    sum_decode_kv_tokens: _NUMBER
    var_decode_kv_tokens: _NUMBER


class _Queued(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """A measurement's ``queued_requests`` (counted, not read)."""

    num_prefill_requests: _NUMBER
    sum_prefill_tokens: _NUMBER
    var_prefill_length: _NUMBER
    num_decode_requests: _NUMBER
    sum_decode_kv_tokens: _NUMBER
    var_decode_kv_tokens: _NUMBER


class _Point(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """``$defs/point``, and the members producers add to it."""

    point_type: Literal["prefill", "decode"]
    benchmark_id: Annotated[int, Meta(ge=1)]
    batch_size: Annotated[int, Meta(ge=0)]
    total_prefill_tokens: Annotated[int, Meta(ge=0)]
    total_kv_read_tokens: Annotated[int, Meta(ge=0)]
    expected_cudagraph_mode: str | None
    expected_capture_size: _NUMBER | None
    padding_tokens: _NUMBER | None
    sample_reasons: tuple[str, ...] | None | UnsetType = UNSET


class _Measurement(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """``$defs/fpm``, and the members producers add to it (an integer wall time stays an
    integer: the reference decodes ``5`` as 5, not 5.0)."""

    wall_time: Annotated[int, Meta(gt=0)] | Annotated[float, Meta(gt=0)]
    counter_id: int
    dp_rank: int
    version: _NUMBER
    worker_id: str
    scheduled_requests: _Scheduled
    queued_requests: _Queued


class _Result(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """``$defs/result``."""

    point: _Point
    fpms: Annotated[list[_Measurement], Meta(min_length=1, max_length=1)]
    kv_seed_regime: Annotated[str, Meta(min_length=1)] | None | UnsetType = UNSET


_MEMBERS_ALWAYS = 2 + 8 + 7 + 7 + 6
"""Members every decoded result has: its own two required ones, and all of its point's but
``sample_reasons``, its measurement's and the two request counts'."""

_MEMBERS = msgspec.json.Decoder(dict[str, Raw])
_RESULTS = msgspec.json.Decoder(list[_Result])
_ENCODER = msgspec.json.Encoder()


def decode_usual(raw: bytes) -> tuple[dict[str, Any], list[Any], ResultColumns] | None:
    """The rank document ``raw`` holds but its ``results``, those as structs (to stand in
    for the list where the document's own fields are checked) and their columns; None when
    this decoder cannot vouch for the reference path's answer."""
    if b"\\" in raw and any(escape in raw for escape in ESCAPED_COLONS):
        return None
    try:
        members = _MEMBERS.decode(raw)
        results = _RESULTS.decode(members.pop("results"))
        others = _ENCODER.encode(members)  # the other members' text, as it is in ``raw``
        fields = decode_json(others)
    except (msgspec.DecodeError, KeyError, ValueError, RecursionError, MemoryError):
        return None  # (a DuplicateKeyError or JSONDecodeError of decode_json is a
        # ValueError too: the reference path reports them)
    regimes = one_per_value([result.kv_seed_regime for result in results])
    reasons = [result.point.sample_reasons for result in results]
    if not _no_member_dropped(raw, others, results, regimes, reasons):
        return None
    return fields, results, _columns(results, regimes, reasons)


def _no_member_dropped(raw: bytes, others: bytes, results: list[_Result],
                       regimes: list[Any], reasons: list[Any]) -> bool:
    """No object of ``raw`` names a key twice (a decoder keeps only the last).

    Outside strings every colon of JSON text separates one object member, and no colon is
    escaped (:func:`decode_usual` refused those), so ``raw`` has as many colons as members
    plus the colons inside its strings. Its other members are ``others`` (one per distinct
    key, their values as they are in ``raw``, each proved whole by
    :func:`~.jsonio.decode_json`), ``results`` is one more, and each result has exactly the
    members its struct holds (an unknown one is refused, a required one must be there), so
    a sum that reaches ``raw``'s count leaves no member out."""
    expected = others.count(b":") + 1 + _MEMBERS_ALWAYS * len(results)
    expected += len(results) - regimes.count(UNSET) + len(results) - reasons.count(UNSET)
    expected += _colons_in(regimes) + _colons_in(reasons)
    measurements = [result.fpms[0] for result in results]
    expected += _colons_in([measurement.worker_id for measurement in measurements])
    expected += _colons_in([result.point.expected_cudagraph_mode for result in results])
    return expected == raw.count(b":")


def _colons_in(column: list[Any]) -> int:
    """Colons inside the strings of a column of strings, string tuples, None and UNSET."""
    colons = 0
    for value in set(column):
        text = "".join(value) if type(value) is tuple else value
        if type(text) is str and ":" in text:
            colons += text.count(":") * column.count(value)
    return colons


def _columns(results: list[_Result], regimes: list[Any], reasons: list[Any]) -> ResultColumns:
    """What :func:`~.fastpath.result_columns` gathers, from the structs: the absent marker
    for a result without ``kv_seed_regime``, None for a point without ``sample_reasons``,
    and one list per distinct reasons (as there)."""
    points = [result.point for result in results]
    lists = {listed: list(listed) for listed in set(reasons) if type(listed) is tuple}
    return ResultColumns(
        one_per_value([point.point_type for point in points]),
        [point.benchmark_id for point in points],
        [result.fpms[0].wall_time for result in results],
        [point.batch_size for point in points],
        [point.total_prefill_tokens for point in points],
        [point.total_kv_read_tokens for point in points],
        [ABSENT if regime is UNSET else regime for regime in regimes],
        list(map(lists.get, reasons)))
