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
decoded and counted, which is how a duplicate key is seen (:func:`_colons_expected`).
"""
from __future__ import annotations

import re
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
_WHITESPACE = b" \t\n\r"
_RESULTS_KEY = re.compile(rb'"results"[ \t\n\r]*:[ \t\n\r]*\[')
_DECODE_ERRORS = (msgspec.DecodeError, ValueError, RecursionError, MemoryError)
"""What decoding may raise (a DuplicateKeyError or JSONDecodeError of decode_json is a
ValueError too): the reference path reports it."""


def decode_usual(raw: bytes) -> tuple[dict[str, Any], list[Any], ResultColumns] | None:
    """The rank document ``raw`` holds but its ``results``, those as structs (to stand in
    for the list where the document's own fields are checked) and their columns; None when
    this decoder cannot vouch for the reference path's answer."""
    if b"\\" in raw and any(escape in raw for escape in ESCAPED_COLONS):
        return None
    split = _results_last(raw) or _results_anywhere(raw)
    if split is None:
        return None
    fields, others, results = split
    points = [result.point for result in results]
    regimes = one_per_value([result.kv_seed_regime for result in results], {UNSET: ABSENT})
    distinct_regimes = set(regimes)
    reasons = [point.sample_reasons for point in points]
    distinct_reasons = set(reasons)
    colons = _colons_expected(others, results, points, (regimes, distinct_regimes),
                              (reasons, distinct_reasons))
    if colons != raw.count(b":"):  # some object named a key twice
        return None
    lists: dict[Any, list[str]] = {listed: list(listed) for listed in distinct_reasons
                                   if type(listed) is tuple}
    return fields, results, ResultColumns(
        one_per_value([point.point_type for point in points]),
        [point.benchmark_id for point in points],
        [result.fpms[0].wall_time for result in results],
        [point.batch_size for point in points],
        [point.total_prefill_tokens for point in points],
        [point.total_kv_read_tokens for point in points],
        regimes, list(map(lists.get, reasons)))


def _colons_expected(others: bytes, results: list[_Result], points: list[_Point],
                     regimes: tuple[list[Any], set[Any]],
                     reasons: tuple[list[Any], set[Any]]) -> int:
    """The colons of the rank file when no object of it names a key twice (a decoder
    keeps only the last of two): then, and only then, its count equals the file's.

    Outside strings every colon of JSON text separates one object member, and no colon is
    escaped (:func:`decode_usual` refused those), so the file holds as many colons as
    members plus the colons inside its strings. The document's other members are those of
    ``others`` (each key once, each value as it is in the file, proved whole by
    :func:`~.jsonio.decode_json`), ``results`` is one more, and each result has exactly
    the members its struct holds (an unknown one is refused, a required one must be there).
    ``regimes`` and ``reasons`` are columns with their distinct values."""
    colons = others.count(b":") + 1 + _MEMBERS_ALWAYS * len(results)
    colons += _present(*regimes, ABSENT) + _present(*reasons, UNSET)
    colons += _colons_in(*regimes) + _colons_in(*reasons)
    for column in ([result.fpms[0].worker_id for result in results],
                   [point.expected_cudagraph_mode for point in points]):
        colons += _colons_in(column, set(column))
    return colons


def _results_last(raw: bytes) -> tuple[dict[str, Any], bytes, list[_Result]] | None:
    """:func:`_results_anywhere` where ``results`` is the document's last member, as
    producers write it, without decoding the document around the results array first.

    The first ``"results"`` of the text is taken for the member when the text before it,
    closed by ``}``, is a JSON object without ``results`` and the text after it is
    ``: [...] }``: then ``raw`` is exactly that object with ``results`` added (the text
    before ends after a member value of the document: closing it there made an object).
    Else None, and at most a misplaced array was decoded."""
    found = _RESULTS_KEY.search(raw)
    if found is None:
        return None
    before = raw[:found.start()].rstrip(_WHITESPACE)
    tail = raw[-64:]
    end = tail.rstrip(_WHITESPACE)
    if not before.endswith((b",", b"{")) or not end[:-1].rstrip(_WHITESPACE).endswith(b"]") \
            or not end.endswith(b"}"):
        return None
    others = (before[:-1] if before.endswith(b",") else before) + b"}"
    close = len(raw) - len(tail) + len(end) - 1  # the document's closing brace
    try:
        fields = decode_json(others)
        if type(fields) is not dict or "results" in fields:
            return None
        return fields, others, _RESULTS.decode(memoryview(raw)[found.end() - 1:close])
    except _DECODE_ERRORS:
        return None


def _results_anywhere(raw: bytes) -> tuple[dict[str, Any], bytes, list[_Result]] | None:
    """The document's members but ``results``, the same as JSON text (each key once, each
    value as it is in ``raw``), and its results; None when it holds no such document."""
    try:
        members = _MEMBERS.decode(raw)
        results = members.pop("results", None)
        if results is None:
            return None
        others = _ENCODER.encode(members)
        fields = decode_json(others)
        return fields, others, _RESULTS.decode(results)
    except _DECODE_ERRORS:
        return None


def _present(column: list[Any], distinct: Any, absent: Any) -> int:
    """How many values of ``column`` are not ``absent``."""
    return len(column) - (column.count(absent) if absent in distinct else 0)


def _colons_in(column: list[Any], distinct: Any) -> int:
    """Colons inside the strings of ``column`` (strings, string tuples, None, UNSET or the
    absent marker), whose distinct values are ``distinct``."""
    colons = 0
    for value in distinct:
        text = "".join(value) if type(value) is tuple else value
        if type(text) is str and ":" in text:
            colons += text.count(":") * column.count(value)
    return colons
