"""The engine is given each stratum's facts as JSON written once per evaluation.

``session._batch`` composes a stratum's ``assert_facts`` text from each fact's JSON written
once, and the JSON shim writes compact text through orjson where it can: the engine must
read exactly the values ``json.dumps`` of the facts with their session id gives (what
durable-rules wrote itself), in the same order, with no number in a notation it refuses.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvrules.backend.durable import host, session

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


POLICY_FILES = Path(__file__).parent / "files"
OTHER_POLICIES = ("policies/clean", "policies/rule_ambiguous_regime",
                  "policies/rule_unreachable_step", "extends/strict-dense")
"""Policies that compile, with other rules and strata than the shipped one."""

EVALUATIONS = """
import json, sys
from pathlib import Path
from kvrules import api
from kvrules.artifacts.discover import discover
from kvrules.backend.durable import session
from kvrules.pipeline import prepare
from kvrules.workers import extract_ref

every, files, policies = sys.argv[1] == "every", Path(sys.argv[2]), sys.argv[3:]
if every:  # as before: every fact known so far, written by durable-rules itself
    session._batch = lambda ctx, sid, matched: [dict(f, sid=sid) for f in ctx.encoded]
out = []
for name in policies:
    cp = (api.load_policy() if name == "shipped" else api.load_policy(files / name)).compiled
    assert any(m is not None for m in session._types_matched(cp))
    for ref in discover([files.parent.parent / "examples", files / "determinism"]):
        cell = prepare(cp, extract_ref(ref))
        if cell.to_engine:
            ev = session.evaluate(cp, cell.facts)
            assert ev.events
            out.append(repr((ev.derived, ev.events, ev.failures)))
print(json.dumps(out))
"""


def _evaluations(path: str, policies: tuple[str, ...], **env: str) -> list[str]:
    done = subprocess.run([sys.executable, "-c", EVALUATIONS, path, str(POLICY_FILES),
                           *policies], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **env})
    assert done.returncode == 0, done.stderr[-2000:]
    out: list[str] = json.loads(done.stdout)
    return out


@pytest.mark.parametrize("policies", [("shipped",), OTHER_POLICIES])
def test_sessions_of_matched_facts_written_once_evaluate_as_every_fact_did(
        policies: tuple[str, ...]) -> None:
    """Each stratum's session gets only the fact types its rules match, as JSON written once;
    the engine derives exactly what it derived from every fact, written by durable-rules
    (each way in its own process, one after another policy)."""
    filtered = _evaluations("matched", policies)
    assert len(filtered) >= 8 * len(policies)
    assert filtered == _evaluations("every", policies)


@pytest.mark.parametrize("policies", [("shipped",), OTHER_POLICIES])
def test_what_the_engine_derives_does_not_depend_on_freed_memory(
        policies: tuple[str, ...]) -> None:
    """durable-rules reads a fact's JSON text after the call that asserted it. Were the text
    freed by then (as it was), a join's outcome would depend on what reused the memory: the
    same cell lost its ``config_bound_requires_real_kv`` error when only the length of PATH
    changed. Python's debug allocator overwrites freed memory at once, so reading after
    free would derive otherwise here every time, on any machine."""
    expected = _evaluations("matched", policies)
    for way in ("matched", "every"):
        assert _evaluations(way, policies, PYTHONMALLOC="debug") == expected, way


def test_a_pattern_without_a_fact_type_gives_a_session_every_fact() -> None:
    from kvrules.backend.durable.lower import types_matched
    typed = {"r": {"all": [{"a": {"fact_": "cell"}},
                           {"b": {"$and": [{"fact_": "point"}, {"x": 1}]}}], "run": "r"},
             "sink#rank": {"all": [{"x": {"fact_": "rank"}}], "run": "sink#"}}
    assert types_matched(typed) == {"cell", "point"}
    untyped = dict(typed, q={"all": [{"c": {"$or": [{"fact_": "a"}, {"fact_": "b"}]}}],
                             "run": "q"})
    assert types_matched(untyped) is None


def test_one_sink_per_stratum_handles_every_fact_type_and_no_other() -> None:
    """durable-rules refuses a fact no pattern matches; each stratum has one sink rule (two
    patterns, whatever the number of fact types: the engine clears 8 KiB per pattern for
    every session) that takes a fact of any catalogue type, and nothing else."""
    from kvrules import api
    from kvrules.backend.durable.lower import NEG_OK

    cp = api.load_policy().compiled
    kinds = sorted(cp.fact_types) + [NEG_OK]
    names = session.ruleset_names(cp)
    for name, definition in zip(names, cp.lowered):
        sinks = [rule for rule in definition if rule.startswith("sink#")]
        assert sinks == ["sink#"] and len(definition["sink#"]["all"]) == 2
        sid = str(next(session._SIDS))
        bare = [{"fact_": kind, "id": f"t:{kind}", "sid": sid} for kind in kinds]
        engine = host.host()
        session._CURRENT.append(session._Context(cp))  # for rules a bare fact fires
        try:
            with host.texts_kept():
                engine.assert_facts(name, [{"fact_": "params", "id": "t:open", "sid": sid}])
                for fact in bare:  # each alone: one refused fact would hide the others
                    engine.assert_fact(name, fact)
                with pytest.raises(Exception) as refused:
                    engine.assert_fact(name, {"fact_": "no_such_type", "id": "t:x", "sid": sid})
                assert type(refused.value).__name__ == "MessageNotHandledException"
        finally:
            session._CURRENT.pop()
            engine.delete_state(name, sid)


def _agreement_by_text(name: str, items: list[object]) -> dict[str, int]:
    """``encode.agreement`` as first written: items agree on a key when the JSON type and
    canonical text of their values are equal (or all lack it)."""
    from kvrules.backend.durable.encode import AGREE_SUFFIX
    from kvrules.facts.jsontypes import canonical, value_type

    if not all(isinstance(i, dict) for i in items):
        return {name + AGREE_SUFFIX: 0}
    out = {name + AGREE_SUFFIX: 1}
    for key in sorted({k for i in items for k in i if isinstance(k, str)}):  # type: ignore
        seen = {(value_type(i[key]), canonical(i[key])) if key in i else None  # type: ignore
                for i in items}
        out[f"{name}{AGREE_SUFFIX}_{key}"] = 1 if len(seen) == 1 else 0
    return out


confusable = st.one_of(st.sampled_from([0, 1, -0.0, 0.0, 1.0, True, False, None, "1", "",
                                         2**63, 2**63 + 1, [1], [True], {"a": 1}, {"a": 1.0}]),
                       scalars)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(st.dictionaries(st.sampled_from("abc"), confusable, max_size=3),
                          confusable), max_size=4))
def test_agreement_flags_are_those_of_the_values_json_type_and_text(items: list[object]) -> None:
    """Values of a plain class are compared as themselves, not written out: the flags are
    still exactly those of comparing JSON types and canonical texts (1 vs True vs 1.0,
    0.0 vs -0.0, 2**63 as bigint)."""
    from kvrules.backend.durable.encode import agreement
    assert agreement("views", items) == _agreement_by_text("views", items)


definitions = st.recursive(
    st.one_of(scalars, st.sampled_from([float("nan"), float("inf"), (1, "a"), 2**64])),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.text(max_size=4), inner, max_size=3)),
    max_leaves=10)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=4), definitions, max_size=4))
def test_a_ruleset_definition_is_copied_whole_and_apart(definition: dict[str, object]) -> None:
    """durable-rules edits the definition it registers: it gets a copy equal to the policy's
    (by JSON round trip where that is exact, deepcopy where not: NaN, tuples, big integers)
    that shares no container with it."""
    import copy
    copied = host._copied(definition)
    assert repr(copied) == repr(copy.deepcopy(definition))  # NaN != NaN: compare the text

    def containers(value: object) -> list[int]:
        if isinstance(value, dict):
            return [id(value)] + [i for v in value.values() for i in containers(v)]
        if isinstance(value, list):
            return [id(value)] + [i for v in value for i in containers(v)]
        return []
    assert not set(containers(copied)) & set(containers(definition))


# --- fields no rule reads are left out ------------------------------------------------------

def _example_cells() -> list[tuple[str, list]]:
    """Every bundled example cell's facts, as the engine worker is given them."""
    from kvrules import api
    from kvrules.artifacts.discover import discover
    from kvrules.pipeline import prepare
    from kvrules.workers import extract_ref
    from helpers import EXAMPLES
    cp = api.load_policy().compiled
    cells = []
    for ref in discover(sorted(str(p) for p in EXAMPLES.iterdir() if p.is_dir()), None):
        prepared = prepare(cp, extract_ref(ref))
        if prepared.to_engine:
            cells.append((ref.cell_id, prepared.facts))
    return cells


def _run(cp, facts, read_all: bool, monkeypatch) -> tuple:
    """An evaluation (what fired, on what, deriving what) and the engine batches' texts."""
    from kvrules.backend.durable import evaluate_in_process
    texts: list[str] = []
    batch = session._batch

    def recorded(ctx, sid, matched=None):
        out = batch(ctx, sid, matched)
        texts.append(out.text)
        return out
    with monkeypatch.context() as patch:
        patch.setattr(session, "_batch", recorded)
        if read_all:
            patch.setattr(session, "_fields_read", lambda cp: None)
        ev = evaluate_in_process(cp, facts)
    return ev.events, ev.derived, ev.failures, texts


def test_fields_no_rule_reads_never_reach_the_engine_and_change_no_evaluation(monkeypatch):
    """Every example cell evaluates to the same firings and derived facts whether the engine
    is given every field with every companion or only the names the lowered rules hold; and
    the names it is given are those (a point's benchmark_id, read by no rule, is left out).
    A field whose companions alone are read reaches the engine as those companions (a
    rank's ``engine`` block, whose type only is tested)."""
    from kvrules import api
    from kvrules.backend.durable.lower import values_read, with_companion_fields
    cp = api.load_policy().compiled
    valued = values_read(cp.lowered)
    read = with_companion_fields(valued)
    assert "engine" in read and "engine__t" in read and "engine" not in valued
    cells = _example_cells()
    assert len(cells) >= 5
    left_out = 0
    ranks = 0
    for cell_id, facts in cells:
        full = _run(cp, facts, True, monkeypatch)
        pruned = _run(cp, facts, False, monkeypatch)
        assert pruned[:3] == full[:3], cell_id
        assert pruned[0], cell_id  # rules fired: the comparison saw real work
        for text in pruned[3]:
            for fact in json.loads(text):
                assert set(fact) <= read | {"fact_", "id", "sid"}, cell_id
                if fact["fact_"] == "rank" and "engine__t" in fact:
                    assert "engine" not in fact, cell_id
                    ranks += 1
        left_out += sum(len(json.loads(a)[0]) - len(json.loads(b)[0])
                        for a, b in zip(full[3], pruned[3]))
        assert all('"benchmark_id"' not in text for text in pruned[3])
        assert any('"benchmark_id"' in text for text in full[3])
    assert left_out > 0
    assert ranks > 0


def test_the_fields_read_are_each_condition_field_and_the_field_of_each_companion():
    rulesets = [{"r": {"all": [{"p": {"$and": [{"fact_": "point"}, {"a__t": "string"},
                                               {"$nex": {"b": 1}}]}},
                               {"q": {"$and": [{"fact_": "warmup"},
                                               {"c": {"p": "d__n"}},
                                               {"$iany": {"views__ag_kind": {"$i": 1}}}]}}],
                       "run": "r"}}]
    from kvrules.backend.durable.lower import values_read, with_companion_fields
    read = with_companion_fields(values_read(rulesets))
    assert {"a", "a__t", "b", "c", "d", "d__n", "views", "views__ag_kind", "fact_"} <= read
    assert "e" not in read and "a__n" not in read
    valued = values_read(rulesets)
    assert {"a__t", "b", "c", "d__n", "views__ag_kind", "fact_"} <= valued
    assert not {"a", "d", "views"} & valued  # read only through their companions
