"""read_json and schema validation in isolation: decoding, markers, fast/precise agreement."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from helpers import EXAMPLES
from kvrules.artifacts.fastpath import result_columns, results_ok
from kvrules.artifacts.jsonio import pointer
from kvrules.artifacts.load import read_json
from kvrules.artifacts.model import NonFiniteNumber, ResultColumns
from kvrules.artifacts.validate import strict_validator, validate
from kvrules.diagnostics import ARTIFACT_INVALID, ARTIFACT_UNREADABLE, Diagnostic, evidence_error
from kvrules.resources import load_schema

RANK_EXAMPLE = next(EXAMPLES.glob("dense-legacy-stamp-format/cells/*/raw/*/benchmark.json"))


def test_read_json_object(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    path.write_bytes(b'\xef\xbb\xbf{"a": [1, NaN, -Infinity]}')
    assert read_json(path, "a.json") == (
        {"a": [1, NonFiniteNumber("NaN"), NonFiniteNumber("-Infinity")]}, None)


def test_read_json_directory_is_unreadable(tmp_path: Path) -> None:
    data, diag = read_json(tmp_path, "dir.json")
    assert data is None
    assert diag is not None and (diag.code, diag.file) == (ARTIFACT_UNREADABLE, "dir.json")
    assert diag.message.startswith("cannot read file: ")


def test_read_json_syntax_error_has_position(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    path.write_text('{"a": 1,}')
    assert read_json(path, "x/a.json") == (None, Diagnostic(
        file="x/a.json", line=1, column=9, code=ARTIFACT_UNREADABLE,
        message="not valid JSON: Expecting property name enclosed in double quotes"))


def test_pointer_escaping() -> None:
    assert pointer(["a/b", "c~d", 0, ""]) == "/a~1b/c~0d/0/"
    assert pointer([]) == ""


def test_validate_names_the_field() -> None:
    data = json.loads(RANK_EXAMPLE.read_text())
    assert validate(data, "rank.schema.json", "r.json", ARTIFACT_INVALID) is None
    data["results"][1]["fpms"][0]["wall_time"] = NonFiniteNumber("NaN")
    data["results"][0]["point"]["batch_size"] = -1
    assert validate(data, "rank.schema.json", "r.json", ARTIFACT_INVALID) == evidence_error(
        ARTIFACT_INVALID, "results[0].point.batch_size must be at least 0, got -1", "r.json",
        "/results/0/point/batch_size")


def test_shipped_schemas_are_valid_draft_2020_12() -> None:
    for name in ("rank", "plan", "provenance", "sidecar"):
        schema = load_schema(f"{name}.schema.json")
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        Draft202012Validator.check_schema(schema)


_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(-2, 2),
                     st.sampled_from([0.0, -0.0, 1.0, float("inf"), float("-inf")]),
                     st.sampled_from(["", "x", "rank", "decode"]),
                     st.sampled_from([NonFiniteNumber("NaN"), NonFiniteNumber("Infinity")]))
_VALUES = st.recursive(_SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=2), st.dictionaries(st.sampled_from(["a", "wall_time"]), inner,
                                                 max_size=2)), max_leaves=4)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node[:2]):
            out += _paths(value, (*prefix, i))
    return out


_BASE = json.loads(RANK_EXAMPLE.read_text())
_BASE.pop("engine")
_PATHS = [p for p in _paths(_BASE) if p]


@settings(max_examples=300, deadline=None)
@given(where=st.sampled_from(_PATHS), value=_VALUES)
def test_fast_and_precise_validators_agree(where: tuple[Any, ...], value: Any) -> None:
    """The compiled fast path must accept exactly what the reference validator accepts."""
    data = json.loads(json.dumps(_BASE))
    node = data
    for key in where[:-1]:
        node = node[key]
    node[where[-1]] = value
    fast = validate(data, "rank.schema.json", "r.json", ARTIFACT_INVALID)
    precise = list(strict_validator()(load_schema("rank.schema.json")).iter_errors(data))
    assert (fast is None) == (not precise)


_SCHEMA_KEYS = {"point", "point_type", "benchmark_id", "batch_size", "total_prefill_tokens",
                "total_kv_read_tokens", "sample_reasons", "kv_seed_regime", "fpms",
                "wall_time", 0, 1}
_RESULT_PATHS = [p[2:] for p in _PATHS
                 if p[:2] == ("results", 0) and len(p) > 2 and p[-1] in _SCHEMA_KEYS]


_EDITS = st.one_of(st.integers(-2, 3), st.floats(-2, 2), st.none(), st.booleans(),
                   st.sampled_from(["", "x", 0.0, -0.0, 1.0, float("inf"), NonFiniteNumber("NaN")]),
                   st.lists(st.one_of(st.none(), st.integers(0, 1), st.text(max_size=1)),
                            max_size=2),
                   _VALUES)


@settings(max_examples=500, deadline=None)
@example(edits=[(("kv_seed_regime",), "")], drop=[], others=())
@example(edits=[(("fpms", 0, "wall_time"), 0)], drop=[], others=(1,))
@example(edits=[(("point", "benchmark_id"), 0)], drop=[], others=(0,))
@example(edits=[(("point", "sample_reasons"), "capture")], drop=[], others=(0, 1))
@given(edits=st.lists(st.tuples(st.sampled_from(_RESULT_PATHS), _EDITS), max_size=2),
       drop=st.lists(st.sampled_from(_RESULT_PATHS), max_size=1),
       others=st.sampled_from([(), (0,), (1,), (0, 1)]))
def test_results_fast_path_is_sound(edits: list[tuple[tuple[Any, ...], Any]],
                                    drop: list[tuple[Any, ...]],
                                    others: tuple[int, ...]) -> None:
    """When the fast path accepts results, the schema must accept them too: one edited
    result alone, or among valid ones before or after it (the check runs by columns)."""
    result = json.loads(json.dumps(_BASE["results"][0]))
    for where, value in edits:
        _apply(result, where, lambda node, key, v=value: node.__setitem__(key, v))
    for where in drop:
        _apply(result, where, lambda node, key: node.__delitem__(key))
    results = [result]
    for position in others:
        results.insert(position, json.loads(json.dumps(_BASE["results"][0])))
    data = dict(_BASE, results=results)
    errors = list(strict_validator()(load_schema("rank.schema.json")).iter_errors(data))
    columns = result_columns(results)
    if columns is not None:
        assert errors == []
        assert columns == ResultColumns.read(results)  # what later checks read, unchanged


def test_gathered_columns_hold_each_distinct_string_once() -> None:
    """A decoder makes a new string per occurrence; the gathered point types, native regimes
    and sample reasons hold one object per distinct value (a worker's pickled cell then
    writes each once, not once per point), and the same values as the results."""
    results = json.loads(RANK_EXAMPLE.read_bytes())["results"] * 3  # copies share nothing:
    results = json.loads(json.dumps(results))  # decoded again, every string its own object
    columns = result_columns(results)
    assert columns is not None and columns == ResultColumns.read(results)
    for column in (columns.point_types, columns.kv_seed_regimes, columns.sample_reasons):
        distinct = {json.dumps(v) for v in column}
        assert len({id(v) for v in column}) == len(distinct), column[:3]
    assert len(results) > len({json.dumps(v) for v in columns.kv_seed_regimes})


def _apply(root: Any, where: tuple[Any, ...], action: Any) -> None:
    """Run ``action(parent, key)`` at a path if it still exists after earlier edits."""
    node = root
    try:
        for key in where[:-1]:
            node = node[key]
        node[where[-1]]
    except (KeyError, IndexError, TypeError):
        return
    if isinstance(node, (dict, list)):  # a string also indexes, but cannot be edited
        action(node, where[-1])


def test_results_fast_path_refusal_is_not_an_error() -> None:
    """A fast-path refusal the schema does not confirm is no error (an unchecked extra key
    of an odd type makes no difference; the hand loop is only an under-approximation)."""
    data = json.loads(json.dumps(_BASE))
    assert results_ok(data["results"])
    assert validate(data, "rank.schema.json", "r.json", ARTIFACT_INVALID) is None


def test_integral_float_is_not_an_integer() -> None:
    """Spec 2.1: ``4.0`` is not ``4``; both the fast path and the schema refuse it."""
    data = json.loads(json.dumps(_BASE))
    data["results"][0]["point"]["batch_size"] = 4.0
    assert not results_ok(data["results"])
    diag = validate(data, "rank.schema.json", "r.json", ARTIFACT_INVALID)
    assert diag is not None and diag.pointer == "/results/0/point/batch_size"
