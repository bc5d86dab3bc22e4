"""orjson decodes evidence only where it provably agrees with the standard library.

``decode_json`` must give exactly what ``json.loads`` with kvrules' hooks gives (same
values, same types, same errors), whatever the bytes: duplicate keys, escaped colons, huge
integers, non-finite tokens, BOMs and other encodings all take the standard path.
"""
from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvrules.artifacts import jsonio
from kvrules.artifacts.jsonio import DuplicateKeyError, decode_json


def stdlib(raw: bytes) -> Any:
    return json.loads(raw, parse_constant=jsonio._parse_constant,
                      object_pairs_hook=jsonio._object)


def outcome(decode: Any, raw: bytes) -> tuple[str, Any]:
    try:
        return "ok", typed(decode(raw))
    except DuplicateKeyError as exc:
        return "duplicate", exc.key
    except (ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError
        return "error", type(exc).__name__


def typed(value: Any) -> Any:
    """``value`` with every scalar tagged by its type (1, 1.0 and True differ)."""
    if isinstance(value, dict):
        return ("dict", [(k, typed(v)) for k, v in value.items()])
    if isinstance(value, list):
        return ("list", [typed(v) for v in value])
    return (type(value).__name__, repr(value))


EDGE_CASES = [
    b'{"a": 1, "a": 2}', b'{"a": {"b": 1, "b": "x:y"}}', b'{"a:": 1, "a:": 1}',
    b'{"a\\u003a": 1, "a:": 2}', b'{"a\\u003A": 1}', b'{"k": "\\u003a"}',
    b'[18446744073709551615]', b'[18446744073709551616]', b'[-9223372036854775808]',
    b'[-9223372036854775809]', b'[1733212345678901234]', b'[123456789012345678901234567890]',
    b'{"x": "12345678901234567890123"}', b'[0.12345678901234567890123]', b'[1e400]',
    b'[-1e400]', b'[NaN]', b'[Infinity, -Infinity]', b'\xef\xbb\xbf{"a": 1}',
    '{"a": "é"}'.encode("utf-16"), '{"a": 1}'.encode("utf-32"), b'{"a": "\xed\xa0\x80"}',
    b'{"a": "\\ud800"}', b'{"a": "\\ud83d\\ude00"}', b'{"a": "\xff"}', b'[1,]', b'{"a" : 1}',
    b'01', b'1.', b'"\t"', b'[' * 2000 + b']' * 2000, b'[' * 300 + b']' * 300, b'{"a":' * 300 + b'1' + b'}' * 300, b'', b' ', b'{"a": -0, "b": -0.0}',
    b'{"a": 1E+2, "b": 1.5e-7, "c": 5e-324}', b'{"": {"": ""}}', b'[true, false, null]',
    b'[123456789012345678901234567890, "e+"]', b'{"a": 1e+300, "b": 18446744073709551616}',
    b'{"a": 1e16, "b": 9223372036854775807}', b'[-9223372036854775809, 9.9e15]',
]


@pytest.mark.parametrize("raw", EDGE_CASES, ids=range(len(EDGE_CASES)))
def test_edge_cases_agree_with_the_standard_library(raw: bytes) -> None:
    assert outcome(decode_json, raw) == outcome(stdlib, raw)


def test_duplicates_are_still_refused_and_plain_files_take_the_fast_path() -> None:
    with pytest.raises(DuplicateKeyError):
        decode_json(b'{"results": [{"point": {"batch_size": 4, "batch_size": 8}}]}')
    plain = b'{"results": [{"point": {"batch_size": 4}, "kv_seed_regime": "skip:x"}]}'
    assert jsonio._fast_decode(plain) is not jsonio._DISAGREES


scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(1 << 70), 1 << 70),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8),
    st.sampled_from([":", "a:b", "::", '"', "\\", "\u003a", "\ud7ff", "\U0001f600"]))
documents = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4),
    st.dictionaries(st.sampled_from(["a", "b", "a:", ":", "k"]), inner, max_size=4)),
    max_leaves=20)


@st.composite
def raw_json(draw: st.DrawFn) -> bytes:
    """Valid JSON, then maybe one textual change: a duplicated member, an escaped colon,
    a non-finite token, a BOM, a truncation or another encoding."""
    text = json.dumps(draw(documents), ensure_ascii=draw(st.booleans()),
                      indent=draw(st.sampled_from([None, 1])))
    change = draw(st.sampled_from(["none", "dup", "escape", "nan", "bom", "cut", "utf16"]))
    if change == "dup" and text.startswith("{") and len(text) > 2:
        text = '{"a": 1, ' + text[1:] if '"a"' in text else '{"a": 0, "a": 1, ' + text[1:]
    elif change == "escape":
        text = text.replace(":", "\\u003a", 1) if '":' not in text else text.replace(
            '":', '\\u003a":', 1)
    elif change == "nan":
        text = f"[{text}, NaN]"
    elif change == "cut" and text:
        text = text[: draw(st.integers(0, len(text) - 1))]
    raw = text.encode("utf-8", "surrogatepass")
    if change == "bom":
        raw = b"\xef\xbb\xbf" + raw
    elif change == "utf16":
        raw = text.encode("utf-16", "surrogatepass")
    return raw


@settings(max_examples=400, deadline=None, derandomize=True)
@given(raw_json())
def test_any_document_decodes_as_the_standard_library_decodes_it(raw: bytes) -> None:
    assert outcome(decode_json, raw) == outcome(stdlib, raw)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.integers(0, 10 ** 30), st.integers(1, 30), st.integers(-330, 310))
def test_long_decimals_round_like_the_standard_library(digits: int, point: int,
                                                        exponent: int) -> None:
    text = str(digits).rjust(point + 1, "0")
    raw = f"[{text[:-point]}.{text[-point:]}e{exponent}]".encode()
    assert outcome(decode_json, raw) == outcome(stdlib, raw)
