"""The engine is given each stratum's facts as JSON written once per evaluation.

``session._batch`` composes a stratum's ``assert_facts`` text from each fact's JSON written
once, and the JSON shim writes compact text through orjson where it can: the engine must
read exactly the values ``json.dumps`` of the facts with their session id gives (what
durable-rules wrote itself), in the same order, with no number in a notation it refuses.
"""
from __future__ import annotations

import json
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from kvrules.backend.durable import host, session
from kvrules.policy.compiled import CompiledPolicy

scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70),
                    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=12))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)),
    max_leaves=8)
names = st.one_of(st.sampled_from(["sid", "id", "fact_", "x__t"]), st.text(max_size=6))
facts = st.lists(st.dictionaries(names, values, max_size=5), max_size=6)


def _context(encoded: list[dict[str, object]]) -> session._Context:
    ctx = session._Context.__new__(session._Context)
    ctx.encoded = encoded
    ctx.texts = []
    return ctx


def _pairs(text: str) -> object:
    """The document with every object as its list of pairs (order and repeats kept)."""
    return json.loads(text, object_pairs_hook=list)


BARE_EXPONENT = re.compile(r'"(?:[^"\\]|\\.)*"|(?<![\d.])(-?\d+)[eE]')


def _bare_exponents(text: str) -> list[str]:
    """Numbers written ``1e-05`` (no fraction): the engine refuses them."""
    return [m.group(1) for m in BARE_EXPONENT.finditer(text) if m.group(1) is not None]


@settings(max_examples=300, deadline=None)
@given(facts, facts)
def test_batch_text_is_what_the_engine_would_have_read(first: list[dict[str, object]],
                                                       later: list[dict[str, object]]) -> None:
    ctx = _context(list(first))
    for sid, added in (("7", []), ("12", later)):  # a later stratum sees derived facts too
        ctx.encoded.extend(added)
        batch = session._batch(ctx, sid)
        expected = [dict(f, sid=sid) for f in ctx.encoded]
        assert list(batch) == expected
        text = host._JsonShim.dumps(batch, ensure_ascii=False)
        assert _pairs(text) == _pairs(json.dumps(expected, ensure_ascii=False))
        assert _bare_exponents(text) == []


@settings(max_examples=300, deadline=None)
@given(values)
def test_every_text_given_to_the_engine_reads_as_the_standard_module_writes_it(
        value: object) -> None:
    text = host._JsonShim.dumps(value, ensure_ascii=False)
    assert _pairs(text) == _pairs(json.dumps(value, ensure_ascii=False))
    assert _bare_exponents(text) == []


def test_exponent_floats_are_rewritten_in_a_batch_as_in_one_document() -> None:
    ctx = _context([{"a": 1e-05, "s": "1e-05"}, {"b": [2.5e+16]}])
    text = host._JsonShim.dumps(session._batch(ctx, "3"), ensure_ascii=False)
    assert json.loads(text) == [{"a": 1e-05, "s": "1e-05", "sid": "3"},
                                {"b": [2.5e+16], "sid": "3"}]
    assert "1.0e-05" in text and '"1e-05"' in text and "2.5e+16" in text


def test_engine_output_is_read_as_the_standard_module_reads_it() -> None:
    for text in ['{"a": 1, "b": [1.5, -0, "x"]}', '{"big": 123456789012345678901234567890}',
                 '{"s": "\\ud800"}', '{"k": 1, "k": 2}']:
        assert host._JsonShim.loads(text) == json.loads(text)


def test_a_real_policy_evaluates_the_same_with_batches_written_once(monkeypatch) -> None:
    from kvrules import api
    from kvrules.artifacts.discover import discover
    from kvrules.pipeline import prepare
    from kvrules.workers import extract_ref
    from tests.helpers import EXAMPLES

    cp: CompiledPolicy = api.load_policy().compiled
    cells = [prepare(cp, extract_ref(ref)) for ref in discover([EXAMPLES])]
    batched = [session.evaluate(cp, cell.facts) for cell in cells]
    monkeypatch.setattr(session, "_batch",
                        lambda ctx, sid: [dict(f, sid=sid) for f in ctx.encoded])
    plain = [session.evaluate(cp, cell.facts) for cell in cells]
    assert len(cells) >= 8 and all(ev.events for ev in plain)
    assert [(e.derived, e.events, e.failures) for e in batched] == \
        [(e.derived, e.events, e.failures) for e in plain]
