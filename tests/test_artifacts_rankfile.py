"""msgspec decodes a usual rank file only where it provably agrees with the reference path.

``decode_usual`` may refuse any file; when it answers, its fields and result columns must be
exactly what ``decode_json`` and the rank schema's checks give for the same bytes (same
values, same types), and the reference path must have found no duplicate key.
"""
from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvrules.artifacts import load, rankfile
from kvrules.artifacts.discover import discover
from kvrules.artifacts.jsonio import decode_document
from kvrules.artifacts.load import RANK_SCHEMA, load_cell
from kvrules.artifacts.model import ResultColumns
from kvrules.artifacts.rankfile import decode_usual
from kvrules.artifacts.validate import fields_vouched, validate
from kvrules.diagnostics import ARTIFACT_INVALID, ARTIFACT_UNREADABLE

from fuzz import mutations
from fuzz.mutations import Pairs, Raw, dumps
from test_artifacts_json_fast import typed

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE_RANKS = sorted((ROOT / "examples").rglob("benchmark*.json"))
BASE = json.loads(EXAMPLE_RANKS[0].read_bytes())


def columns_of(columns: ResultColumns) -> Any:
    """Every column with every value tagged by its type."""
    return typed([list(column) for column in vars(columns).values()])


def without_results(data: dict[str, Any]) -> Any:
    return typed({k: v for k, v in data.items() if k != "results"})


def assert_agrees(raw: bytes) -> bool:
    """When ``decode_usual`` answers for ``raw``, the reference agrees; True if it answered."""
    got = decode_usual(raw)
    if got is None:
        return False
    fields, results, columns = got
    reference, diag = decode_document(raw, "r.json")
    assert diag is None, diag  # (a duplicate key, an unreadable file: never vouched for)
    assert reference is not None
    assert typed(fields) == without_results(reference)
    assert columns_of(columns) == columns_of(ResultColumns.read(reference["results"]))
    if fields_vouched({**fields, "results": results}, RANK_SCHEMA):
        assert validate(reference, RANK_SCHEMA, "r.json", ARTIFACT_INVALID) is None
    return True


@pytest.mark.parametrize("path", EXAMPLE_RANKS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_bundled_rank_file_is_decoded_as_the_reference_does(path: Path) -> None:
    """The producers' files take this path (else it would save nothing) and agree."""
    assert assert_agrees(path.read_bytes())


def _text(value: Any) -> bytes:
    return dumps(value).encode()


def _first_results(n: int, layout: str = "middle") -> dict[str, Any]:
    """A bundled rank document with ``n`` results (its own, repeated and numbered on), and
    ``results`` its first, a middle or its last member."""
    data = copy.deepcopy(BASE)
    pool = data.pop("results")
    results = [copy.deepcopy(pool[i % len(pool)]) for i in range(n)]
    for i, result in enumerate(results):
        result["point"]["benchmark_id"] = i + 1
    items = list(data.items())
    at = {"first": 0, "middle": len(items) // 2, "last": len(items)}[layout]
    return dict([*items[:at], ("results", results), *items[at:]])


LAYOUTS = ["first", "middle", "last"]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_each_layout_is_answered(layout: str) -> None:
    assert assert_agrees(_text(_first_results(4, layout)))
    assert assert_agrees(json.dumps(_first_results(4, layout), separators=(",", ":")).encode())


def test_results_last_is_found_without_decoding_the_document_around_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Producers write ``results`` last: that layout takes the shorter way, the others not."""
    monkeypatch.setattr(rankfile, "_results_anywhere", lambda raw: None)
    assert assert_agrees(_text(_first_results(3, "last")))
    assert decode_usual(_text(_first_results(3, "middle"))) is None
    assert decode_usual(_text({"probe": {"results": []}, **_first_results(3, "last")})) \
        is None


@pytest.mark.parametrize("prefix", [
    {"probe": {"results": []}}, {"probe": {"results": [{"point": 1}]}},
    {"probe": "results"}, {"probe": ["results"]}, {"probe": 'the "results" below'},
    {"results_seen": 2},
])
def test_results_named_before_the_member_still_agrees(prefix: dict[str, Any]) -> None:
    """A ``"results"`` in the text before the member (a nested key, a string) is not taken
    for it; the file is still answered, the same as the reference."""
    data = {**prefix, **_first_results(3, "last")}
    assert list(data)[0] in prefix and assert_agrees(_text(data))


@pytest.mark.parametrize("broken", [
    lambda raw: raw.replace(b',\n  "results"', b'\n  "results"'),  # no comma before it
    lambda raw: raw.replace(b'"results": [', b'"results" [', 1),
    lambda raw: raw.rstrip()[:-1], lambda raw: raw + b"}", lambda raw: raw + b" x",
    lambda raw: raw.replace(b'"results"', b'"results":', 1),
])
def test_text_around_the_last_member_that_is_not_json_is_refused(broken: Any) -> None:
    raw = broken(_text(_first_results(3, "last")))
    assert raw != _text(_first_results(3, "last"))
    assert decode_document(raw, "r.json")[1] is not None
    assert decode_usual(raw) is None


@pytest.mark.parametrize("first", ['"results"', '"re\\u0073ults"'])
def test_results_twice_at_the_top_is_refused(first: str) -> None:
    """Also when the first is written with an escape (not found as ``"results"``)."""
    data = _first_results(2, "last")
    raw = _text(Pairs([("FIRST", []), *data.items()])).replace(b'"FIRST"', first.encode())
    assert decode_usual(raw) is None
    assert decode_document(raw, "r.json")[1] is not None


@pytest.mark.parametrize("edit, why", [
    (lambda d: d["results"][0]["fpms"][0].__setitem__(
        "scheduled_requests", Pairs([("num_prefill_requests", 1),
                                     ("num_prefill_requests", 2)])),
     "a duplicate key where kvrules reads nothing"),
    (lambda d: d["results"][1]["point"].__setitem__("extra", {"a": 1}), "an unknown member"),
    (lambda d: d["results"][0].__setitem__("kv_seed_regime", "skip\\u003ax"),
     "an escaped colon"),
    (lambda d: d["results"][0]["point"].__setitem__("batch_size", Raw("4.0")),
     "an integral float where an integer belongs"),
    (lambda d: d["results"][0]["fpms"][0].__setitem__("wall_time", Raw("1e400")),
     "a wall time beyond a float"),
    (lambda d: d["results"][0]["fpms"][0].__setitem__("wall_time", Raw("NaN")),
     "a non-finite token"),
    (lambda d: d["results"].append(Raw('{"point": "\\ud800"}')), "a lone surrogate"),
])
def test_what_it_cannot_vouch_for_is_left_to_the_reference(edit: Any, why: str) -> None:
    data = _first_results(3)
    edit(data)
    raw = _text(data).replace(b'"skip\\\\u003ax"', b'"skip\\u003ax"')
    assert decode_usual(raw) is None, why


@pytest.mark.parametrize("where, value", [
    ((0, "point", "benchmark_id"), 0), ((1, "point", "batch_size"), -1),
    ((0, "point", "total_prefill_tokens"), -1), ((0, "point", "total_kv_read_tokens"), True),
    ((0, "point", "point_type"), "Decode"), ((0, "point", "sample_reasons"), [1]),
    ((0, "point", "sample_reasons"), "capture"), ((0, "kv_seed_regime"), ""),
    ((0, "kv_seed_regime"), 7), ((0, "fpms"), []), ((0, "fpms", 0, "wall_time"), 0),
    ((0, "fpms", 0, "wall_time"), -0.0), ((0, "fpms", 0, "wall_time"), "1"),
    ((0, "fpms", 0, "counter_id"), None), ((0, "fpms", 0, "dp_rank"), 1.0),
    ((0, "point"), [1]), ((1,), "x"),
])
def test_a_result_the_schema_refuses_is_left_to_the_reference(where: tuple[Any, ...],
                                                              value: Any) -> None:
    data = _first_results(2)
    data["results"] = _edit(data["results"], where, "set", value)
    raw = _text(data)
    assert validate(json.loads(raw), RANK_SCHEMA, "r.json", ARTIFACT_INVALID) is not None
    assert decode_usual(raw) is None


@pytest.mark.parametrize("where", [(0, "point", "point_type"), (1, "point", "batch_size"),
                                   (0, "fpms", 0, "wall_time"), (1, "point")])
def test_a_result_missing_a_required_field_is_left_to_the_reference(
        where: tuple[Any, ...]) -> None:
    data = _first_results(2)
    data["results"] = _edit(data["results"], where, "drop", None)
    assert decode_usual(_text(data)) is None


@pytest.mark.parametrize("where", [(0, "kv_seed_regime"), (1, "point", "sample_reasons")])
def test_what_the_schema_lets_a_result_leave_out_is_still_answered(
        where: tuple[Any, ...]) -> None:
    """Absent ``kv_seed_regime`` and ``sample_reasons`` are counted as absent, not refused."""
    data = _first_results(3)
    data["results"] = _edit(data["results"], where, "drop", None)
    assert assert_agrees(_text(data))


def test_a_duplicate_top_level_key_is_seen() -> None:
    data = _first_results(2)
    raw = _text(Pairs([*data.items(), ("status", "complete")]))
    assert decode_usual(raw) is None
    assert decode_document(raw, "r.json")[1] is not None


def test_an_integer_wall_time_stays_an_integer() -> None:
    data = _first_results(2)
    data["results"][0]["fpms"][0]["wall_time"] = 5
    got = decode_usual(_text(data))
    assert got is not None and got[2].wall_times[0] == 5
    assert type(got[2].wall_times[0]) is int
    assert assert_agrees(_text(data))


def test_big_integers_and_strings_with_colons_agree() -> None:
    data = _first_results(3)
    data["results"][0]["point"]["benchmark_id"] = 1 << 70
    data["results"][1]["fpms"][0]["worker_id"] = "host:1:2"
    data["results"][2]["point"]["sample_reasons"] = ["a:b", "::"]
    data["run_id"] = "x:y"
    assert assert_agrees(_text(data))


# A result changed at random: values of every JSON type (and tokens only the standard library
# reads), members removed, added or given twice, at any depth; then the whole file.
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(1 << 70), 1 << 70),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=6),
    st.sampled_from(["", ":", "a:b", "prefill", "decode", "skip:dense_model_content_insensitive",
                     0, -1, 1, 0.0, 1.0, -0.5]),
    st.sampled_from([Raw("NaN"), Raw("1e400"), Raw("-0"), Raw("4.0"), Raw('"\\u003a"'),
                     Raw('"\\ud800"'), Raw("18446744073709551616")]))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3),
    st.dictionaries(st.sampled_from(["point_type", "a", "wall_time", ":"]), inner, max_size=3)),
    max_leaves=8)
RESULT_PATHS = [("point",), ("fpms",), ("kv_seed_regime",), ("fpms", 0),
                ("point", "point_type"), ("point", "benchmark_id"), ("point", "batch_size"),
                ("point", "total_prefill_tokens"), ("point", "total_kv_read_tokens"),
                ("point", "sample_reasons"), ("point", "sample_reasons", 0),
                ("point", "padding_tokens"), ("point", "new"), ("fpms", 0, "wall_time"),
                ("fpms", 0, "counter_id"), ("fpms", 0, "dp_rank"), ("fpms", 0, "worker_id"),
                ("fpms", 0, "scheduled_requests"), ("fpms", 0, "queued_requests", "new"),
                ("fpms", 0, "scheduled_requests", "var_prefill_length"), ("new",)]
TOP_KEYS = ["status", "valid", "dp", "run_id", "kvwarm", "new", "results"]


def _edit(node: Any, where: tuple[Any, ...], action: str, value: Any) -> Any:
    """``node`` with ``action`` (set, drop, twice) done at ``where`` if it still leads somewhere."""
    if not where:
        return value if action == "set" else node
    key, rest = where[0], where[1:]
    if isinstance(node, dict) and (key in node or (not rest and action == "set")):
        if rest:
            return {**node, key: _edit(node[key], rest, action, value)}
        if action == "drop":
            return {k: v for k, v in node.items() if k != key}
        if action == "twice":
            return Pairs([*node.items(), (key, value)])
        return {**node, key: value}
    if isinstance(node, list) and isinstance(key, int) and key < len(node):
        if not rest and action == "drop":
            return [v for i, v in enumerate(node) if i != key]
        return [_edit(v, rest, action, value) if i == key else v for i, v in enumerate(node)]
    return node


edits = st.lists(st.tuples(st.sampled_from(RESULT_PATHS),
                           st.sampled_from(["set", "set", "drop", "twice"]), values),
                 max_size=3)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(edits=edits, top=st.lists(st.tuples(st.sampled_from(TOP_KEYS),
                                           st.sampled_from(["set", "drop", "twice"]), values),
                                 max_size=2),
       position=st.integers(0, 2), layout=st.sampled_from(LAYOUTS))
def test_decode_usual_is_sound(edits: list[tuple[tuple[Any, ...], str, Any]],
                               top: list[tuple[str, str, Any]], position: int,
                               layout: str) -> None:
    data = _first_results(3, layout)
    result = data["results"][position]
    for where, action, value in edits:
        result = _edit(result, where, action, value)
    data["results"][position] = result
    document: Any = data
    for key, action, value in top:
        document = _edit(document, (key,), action, value)
    assert_agrees(_text(document))


def test_a_cell_loads_the_same_either_way(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Documents, columns and diagnostics of planned cells are the same with and without this
    decoder, and a duplicate key it leaves to the reference is still reported."""
    campaign = tmp_path / "c"
    shutil.copytree(ROOT / "examples" / "dense-native-skip-format", campaign)
    rank = sorted(campaign.rglob("benchmark*.json"))[-1]
    data = json.loads(rank.read_bytes())
    data["results"][0]["fpms"][0]["queued_requests"] = Pairs(
        [*data["results"][0]["fpms"][0]["queued_requests"].items(), ("num_decode_requests", 9)])
    rank.write_bytes(_text(data))

    def loaded() -> list[Any]:
        cells = [load_cell(ref) for ref in discover([str(campaign)])]
        return [(c.cell_id, [(d.relpath, typed(d.data), columns_of(d.result_columns()))
                             for d in c.ranks], c.diagnostics) for c in cells]

    fast = loaded()
    monkeypatch.setattr(load, "_usual_decoder", lambda: None)
    assert loaded() == fast
    diagnostics = [d for _, _, ds in fast for d in ds]
    assert any(d.code == ARTIFACT_UNREADABLE and "duplicate key" in d.message
               for d in diagnostics)


def _results_last_examples(root: Path) -> Path:
    """A copy of the bundled examples whose rank files hold ``results`` last, as producers
    write them (the bundled ones hold it in the middle)."""
    shutil.copytree(ROOT / "examples", root)
    for rank in root.rglob("benchmark*.json"):
        data = json.loads(rank.read_bytes())
        data["results"] = data.pop("results")
        rank.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return root


@pytest.mark.parametrize("layout", ["middle", "last"])
def test_fuzz_mutants_load_the_same_either_way(layout: str, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The campaign mutants of the fuzz harness (dropped keys, values of other types, a key
    given twice, truncation, other encodings, ...) load to the same documents, columns and
    diagnostics with this decoder and without it."""
    if layout == "last":
        monkeypatch.setattr(mutations, "EXAMPLES", _results_last_examples(tmp_path / "ex"))
    for index in range(30):
        mutant = mutations.build_mutant(2026, index, tmp_path, rules_share=0.0)
        refs = discover([str(mutant.folder)])

        def loaded() -> list[Any]:
            cells = [load_cell(ref) for ref in refs]
            return [(c.cell_id, [(d.relpath, typed(d.data), columns_of(d.result_columns()))
                                 for d in c.ranks], c.diagnostics) for c in cells]

        fast = loaded()
        with monkeypatch.context() as off:
            off.setattr(load, "_usual_decoder", lambda: None)
            assert loaded() == fast, mutant.descriptions
        mutations.remove_tree(mutant.folder)
