"""kvrules.verdicts.render: whole outputs of the json, jsonl, table and diagnostic renderers."""
from __future__ import annotations

from dataclasses import replace

import json
import re
from typing import Iterator

import pytest
from verdict_samples import (CELL, DENSE, POLICY, dense_cell, dense_report, error_cell,
                             sliding_window_cell,
                             jsonl_records, mixed_report, report_dict_from_jsonl)

from kvrules.diagnostics import Diagnostic
from kvrules.verdicts.model import CellVerdict, Report
from kvrules.verdicts.render import (iter_jsonl, render_diagnostics, render_json,
                                     render_table)

# --- json --------------------------------------------------------------------------------

def test_json_is_the_spec_section_5_document() -> None:
    assert json.loads(render_json(dense_report())) == {
        "kvrules_version": "0.1.0",
        "policy": {"name": "kv_seed", "version": "dense_full_attention_v1",
                   "digest": POLICY.digest, "parameters": {"dense_synthetic_kv": True}},
        "cells": [{
            "kind": "cell", "campaign": "examples/dense-legacy-stamp-format", "cell_id": CELL,
            "workload_kind": "decode", "status": "ok", "errors": [],
            "dense_synthetic_kv": {"eligible": True, "failed": []},
            "counts": {DENSE: 2}, "points_total": 2, "points_eligible": 2, "trace": [],
            "points": [{
                "kind": "point", "cell_id": CELL, "benchmark_id": i, "point_type": "decode",
                "batch_size": 4, "total_prefill_tokens": 0, "total_kv_read_tokens": 128 * i,
                "native_regime": "fake_fallback", "kv_seed_regime": DENSE, "eligible": True,
                "status": "ok", "decided_by": "final.regime",
                "trace": ["warmup.dense_skip", "final.regime"],
                "reasons": ["The cell is dense-eligible and the point is stamped fake."]}
                for i in (1, 2)]}],
        "summary": {"kind": "summary", "cells": 1, "cells_error": 0, "points": 2,
                    "points_eligible": 2, "counts": {DENSE: 2}}}


def test_json_round_trips_through_report_from_dict() -> None:
    report = mixed_report()
    assert Report.from_dict(json.loads(render_json(report))) == report


def test_json_is_byte_deterministic_indented_and_newline_terminated() -> None:
    text = render_json(mixed_report())
    assert text == render_json(mixed_report())
    assert text.startswith('{\n  "kvrules_version": "0.1.0",\n  "policy": {\n')
    assert text.endswith("}\n") and not text.endswith("\n\n")


def indented_by_two(text: str) -> bool:
    """Every line of ``text`` starts with two spaces per bracket open before it (a line that
    starts by closing one: after it), and the brackets balance."""
    depth = 0
    for line in text.split("\n"):  # (not at U+2028, which is no line end in JSON)
        body = line.lstrip(" ")
        if len(line) - len(body) != 2 * (depth - (body[:1] in ("]", "}"))):
            return False
        for token in re.findall(r'"(?:[^"\\]|\\.)*"|[][{}]', body):
            depth += (token in "[{") - (token in "]}")
    return depth == 0


def assert_documented_layout(report: Report) -> None:
    """The json document reads as the report, is indented by two and holds each point
    record on one line, four levels down, the same bytes as its ``jsonl`` record; the
    ``jsonl`` stream is one compact record per line."""
    text = render_json(report)
    assert json.loads(text) == json.loads(json.dumps(report.to_dict()))
    assert text.endswith("}\n") and indented_by_two(text)
    lines = "".join(iter_jsonl(report.policy, report.cells)).split("\n")
    assert lines.pop() == "" and all(compact(line) for line in lines)
    in_stream = [line for line in lines if json.loads(line)["kind"] == "point"]
    in_document = [line[8:].removesuffix(",") for line in text.split("\n")
                   if line.startswith(" " * 8 + '{"kind":"point"')]
    assert in_document == in_stream
    assert len(in_stream) == sum(len(cell.points) for cell in report.cells)


def compact(line: str) -> bool:
    """``line`` is one JSON value without whitespace outside its strings."""
    json.loads(line)
    return not re.search(r"\s", re.sub(r'"(?:[^"\\]|\\.)*"', "", line))


def test_every_point_of_the_json_document_is_its_jsonl_line() -> None:
    """One point, one line, four levels down: the same bytes as its ``jsonl`` record, so a
    changed verdict is a changed line and the document is about the stream's size."""
    report = mixed_report()
    text = render_json(report)
    stream = [line for line in "".join(iter_jsonl(report.policy, report.cells)).splitlines()
              if line.startswith('{"kind":"point"')]
    in_document = [line.strip().rstrip(",") for line in text.splitlines()
                   if line.startswith(" " * 8 + '{"kind":"point"')]
    assert stream and in_document == stream
    assert_documented_layout(report)


def test_json_keeps_the_contract_key_order() -> None:
    doc = json.loads(render_json(mixed_report()))
    assert list(doc) == ["kvrules_version", "policy", "cells", "summary"]
    assert list(doc["cells"][2]) == ["kind", "campaign", "cell_id", "workload_kind", "status",
                                     "errors", "counts", "points_total", "points_eligible",
                                     "trace", "points"]


def test_json_writes_non_ascii_literally() -> None:
    report = Report(policy=POLICY, cells=(dense_cell("kampagnen/übung"),))
    assert '"campaign": "kampagnen/übung"' in render_json(report)


# --- jsonl -------------------------------------------------------------------------------

def test_jsonl_streams_points_then_their_cell_and_the_summary_last() -> None:
    report = mixed_report()
    records = jsonl_records("".join(iter_jsonl(report.policy, report.cells)))
    assert [r["kind"] for r in records] == [
        "report", "point", "point", "cell", "point", "point", "cell", "point", "point", "cell",
        "summary"]
    assert records[0] == {"kind": "report", "kvrules_version": "0.1.0",
                          "policy": POLICY.to_dict()}
    assert records[3] == dense_cell().to_dict(with_points=False)
    assert records[-1] == report.summary.to_dict()


def test_jsonl_carries_exactly_the_json_report() -> None:
    report = mixed_report()
    records = jsonl_records("".join(iter_jsonl(report.policy, report.cells)))
    assert report_dict_from_jsonl(records) == json.loads(render_json(report))


def test_jsonl_lines_are_compact_single_records() -> None:
    """Every piece ends a record; a cell's points come as one piece, one record per line."""
    pieces = list(iter_jsonl(POLICY, [dense_cell()]))
    assert all(piece.endswith("\n") for piece in pieces)
    assert [piece.count("\n") for piece in pieces] == [1, 2, 1, 1]
    lines = "".join(pieces).splitlines()
    assert lines[1].startswith('{"kind":"point","cell_id":"fpm-llama31-8b-decode-tp1",')
    assert all(map(compact, lines))


def test_jsonl_writes_each_cell_before_reading_the_next() -> None:
    pulled: list[str] = []

    def cells() -> Iterator[CellVerdict]:
        for cell in (dense_cell(), error_cell()):
            pulled.append(cell.cell_id)
            yield cell

    stream = iter_jsonl(POLICY, cells())
    kinds = [json.loads(line)["kind"] for _ in range(3) for line in next(stream).splitlines()]
    assert kinds == ["report", "point", "point", "cell"] and pulled == [CELL]


def test_jsonl_of_no_cells_is_a_header_and_an_empty_summary() -> None:
    records = jsonl_records("".join(iter_jsonl(POLICY, [])))
    assert records[1:] == [{"kind": "summary", "cells": 0, "cells_error": 0, "points": 0,
                            "points_eligible": 0, "counts": {}}]


# --- table -------------------------------------------------------------------------------

MIXED_TABLE = """\
  cell                           workload  status  points        regimes / errors                        dense synthetic kv
  ─────────────────────────────────────────────────────────────────────────────────────────────────────────────────────────
examples/dense-legacy-stamp-format
  fpm-llama31-8b-decode-tp1      decode    ok      2/2 eligible  skip:dense_model_content_insensitive 2  eligible

examples/dense-sliding-window
  fpm-llama31-8b-decode-tp1      decode    ok      0/2 eligible  fake_fallback 2                         no (D9)

examples/dp2-peer-ineligible
  fpm-llama31-8b-decode-tp1-dp2  decode    error   0/2 eligible  dp_warmup_disagreement                  -

errors:
  fpm-llama31-8b-decode-tp1-dp2: examples/dp2-peer-ineligible/cells/fpm-llama31-8b-decode-tp1-dp2/raw/fpm-llama31-8b-decode-tp1-dp2-worker-0/benchmark_dp1.json#/kvwarm/skip_reason: dp_warmup_disagreement: rank 1 kvwarm differs from rank 0
3 cells (1 in error), 2/6 points eligible: error 2, fake_fallback 2, skip:dense_model_content_insensitive 2
policy kv_seed dense_full_attention_v1 sha256:0123456789ab... dense_synthetic_kv=true
"""  # noqa: E501


def test_table_shows_every_cell_its_eligible_count_errors_and_a_summary() -> None:
    assert render_table(mixed_report()) == MIXED_TABLE


def test_table_of_a_dense_cell_reads_2_of_2_eligible() -> None:
    rows = [line.strip() for line in render_table(dense_report()).splitlines()
            if line.strip().startswith(CELL)]
    assert rows == ["fpm-llama31-8b-decode-tp1  decode    ok      2/2 eligible  "
                    "skip:dense_model_content_insensitive 2  eligible"]


def test_table_ignores_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {"FORCE_COLOR": "1", "COLUMNS": "40", "TERM": "xterm-256color",
                        "TTY_COMPATIBLE": "1", "NO_COLOR": ""}.items():
        monkeypatch.setenv(name, value)
    assert render_table(mixed_report()) == MIXED_TABLE


def test_table_color_is_opt_in() -> None:
    assert "\x1b[" not in render_table(mixed_report())
    assert "\x1b[" in render_table(mixed_report(), color=True)


def test_table_prints_rich_markup_in_data_literally() -> None:
    report = Report(policy=POLICY, cells=(dense_cell("runs/[bold]x[/bold]"),))
    assert render_table(report).splitlines()[2] == "runs/[bold]x[/bold]"


def test_every_campaign_shares_one_header() -> None:
    lines = render_table(mixed_report()).splitlines()
    assert [n for n, line in enumerate(lines) if line.split()[:2] == ["cell", "workload"]] == [0]


def test_an_error_cell_claims_no_qualification_and_ids_are_listed_once() -> None:
    from kvrules.verdicts.model import FailedCondition, Qualification
    from kvrules.verdicts.table import table_row
    error = error_cell()
    eligible = Qualification(eligible=True)
    assert table_row(replace(error, qualifications={"dense_synthetic_kv": eligible})
                     ).qualifications == {"dense_synthetic_kv": "-"}
    failed = Qualification(eligible=False, failed=tuple(
        FailedCondition(i, "why") for i in ("D5", "D6", "D6", "D7", "D6")))
    cell = replace(sliding_window_cell(), qualifications={"dense_synthetic_kv": failed})
    assert table_row(cell).qualifications == {"dense_synthetic_kv": "no (D5, D6, D7)"}


def test_a_narrow_terminal_loses_columns_never_splits_an_id_or_regime() -> None:
    text = render_table(mixed_report(), width=80)
    assert all(len(line) <= 80 for line in text.splitlines() if " " in line.strip())
    for whole in ("fpm-llama31-8b-decode-tp1-dp2", "skip:dense_model_content_insensitive",
                  "examples/dp2-peer-ineligible", "dp_warmup_disagreement"):
        assert whole in text
    header = text.splitlines()[0].split()
    assert header[:2] == ["cell", "status"] and "workload" not in header
    assert text.splitlines()[-2:] == [
        "(not shown to fit 80 columns: workload, dense synthetic kv, points; --format",
        "  json has everything)"]


def test_a_wide_terminal_shows_every_column_without_a_note() -> None:
    text = render_table(mixed_report(), width=1000)
    assert text == MIXED_TABLE


def test_a_file_or_pipe_gets_the_table_unwrapped_however_long() -> None:
    long_id = "fpm-" + "x" * 300
    report = Report(policy=POLICY, cells=(replace(dense_cell(), cell_id=long_id),))
    rows = [line for line in render_table(report).splitlines() if long_id in line]
    assert len(rows) == 1 and rows[0].split()[0] == long_id


# --- diagnostics -------------------------------------------------------------------------

RULE_ERROR = Diagnostic(file="rules/cache.yaml", line=12, column=5, code="rule_schema_error",
                        message="'when' is a required property", rule="cache.full_attention")
EVIDENCE_ERROR = Diagnostic(file="cells/c/raw/p/benchmark.json", line=None, column=None,
                            code="artifact_invalid", message="wall_time must be > 0",
                            pointer="/results/0/fpms/0/wall_time")


def test_text_diagnostics_are_sorted_file_line_col_or_file_pointer() -> None:
    assert render_diagnostics([RULE_ERROR, EVIDENCE_ERROR], "text") == (
        "cells/c/raw/p/benchmark.json#/results/0/fpms/0/wall_time: artifact_invalid: "
        "wall_time must be > 0\n"
        "rules/cache.yaml:12:5: rule_schema_error: 'when' is a required property "
        "(rule: cache.full_attention)\n")


def test_text_diagnostics_name_a_non_error_severity() -> None:
    warning = Diagnostic(file="rules/a.yaml", line=1, column=1, code="rule_unused",
                         message="never fires", severity="warning")
    assert render_diagnostics([warning]) == "rules/a.yaml:1:1: rule_unused (warning): never fires\n"


def test_json_diagnostics_use_the_report_error_shape() -> None:
    assert json.loads(render_diagnostics([EVIDENCE_ERROR], "json")) == {
        "diagnostics": [{"code": "artifact_invalid", "message": "wall_time must be > 0",
                         "file": "cells/c/raw/p/benchmark.json",
                         "pointer": "/results/0/fpms/0/wall_time"}],
        "omitted": 0}


def test_github_diagnostics_are_escaped_workflow_commands() -> None:
    tricky = Diagnostic(file="rules/a,b.yaml", line=3, column=7, code="rule_schema_error",
                        message="50% bad\nsecond line")
    assert render_diagnostics([tricky, EVIDENCE_ERROR], "github") == (
        "::error file=cells/c/raw/p/benchmark.json,title=artifact_invalid::"
        "wall_time must be > 0 (at /results/0/fpms/0/wall_time)\n"
        "::error file=rules/a%2Cb.yaml,line=3,col=7,title=rule_schema_error::"
        "50%25 bad%0Asecond line\n")


def test_a_limit_keeps_the_first_sorted_diagnostics_and_counts_the_rest() -> None:
    diags = [RULE_ERROR, EVIDENCE_ERROR]
    assert render_diagnostics(diags, "text", limit=1) == (
        "cells/c/raw/p/benchmark.json#/results/0/fpms/0/wall_time: artifact_invalid: "
        "wall_time must be > 0\n... 1 more diagnostics not shown\n")
    assert json.loads(render_diagnostics(diags, "json", limit=1))["omitted"] == 1
    assert render_diagnostics(diags, "text", limit=0) == render_diagnostics(diags, "text")


def test_no_diagnostics_render_as_nothing() -> None:
    assert render_diagnostics([], "text") == "" == render_diagnostics([], "github")


def test_an_unknown_diagnostics_format_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="unknown diagnostics format 'xml'"):
        render_diagnostics([RULE_ERROR], "xml")  # type: ignore[arg-type]


# --- one encoder, streaming where memory matters -------------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from kvrules.facts.jsontypes import encode  # noqa: E402
from kvrules.verdicts import render as _render  # noqa: E402

_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(1 << 70), 1 << 70),
              st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=6),
              st.sampled_from(["\ud800", "é\udc80", "\u2028", "\x00", "\x7f", "\U0001f600"])),
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.text(max_size=4) | st.just("k\udfff"), inner,
                                            max_size=4)),
    max_leaves=25)


@settings(max_examples=500, deadline=None, derandomize=True)
@given(_values)
def test_the_encoder_writes_json_that_reads_as_the_value(value) -> None:
    """Integers beyond 64 bits and lone surrogates (copied from evidence) included: a JSON
    reader reads what was written; indented by two, or compact on one line."""
    for indent in (False, True):
        text = encode(value, indent=indent).decode()
        assert json.loads(text) == value
        assert indented_by_two(text) if indent else compact(text)
    assert json.loads(encode(value, sort_keys=True)) == value


def test_a_lone_surrogate_is_written_as_its_escape() -> None:
    assert encode({"m": "é\ud800", "n": 2 ** 70}) == \
        b'{"m":"\xc3\xa9\\ud800","n":1180591620717411303424}'


def test_streamed_json_and_table_equal_the_whole_report_renderings() -> None:
    from kvrules import api
    from helpers import EXAMPLES
    report = api.classify([str(p) for p in sorted(EXAMPLES.iterdir()) if p.is_dir()])
    whole = render_json(report)
    assert "".join(_render.iter_json(report.policy, iter(report.cells))) == whole
    assert_documented_layout(report)
    empty = "".join(_render.iter_json(report.policy, iter(())))
    assert json.loads(empty) == {**report.to_dict(), "cells": [],
                                 "summary": _render.summarize([]).to_dict()}
    assert indented_by_two(empty)
    assert _render.table_of(report.policy, iter(report.cells)) == render_table(report)


_field = st.one_of(st.text(max_size=5), st.none(), st.integers(-(1 << 70), 1 << 70),
                   st.booleans(), st.floats(allow_nan=False, allow_infinity=False),
                   st.sampled_from(["\ud800", "\x00", "é", "decode", "ok"]))
_strings = st.one_of(st.tuples(), st.tuples(st.text(max_size=4)),
                     st.lists(_field, max_size=3).map(tuple), st.lists(st.text(max_size=3)))


@st.composite
def _points(draw) -> "PointVerdict":
    """Point verdicts of the model's types mostly, and of any JSON type now and then."""
    from kvrules.verdicts.model import PointVerdict
    plain = draw(st.booleans())
    coordinate = st.integers(0, 1 << 20) if plain else st.one_of(st.integers(), _field)
    regime = st.sampled_from([None, "fake_fallback", "skip:x"])
    return PointVerdict(
        cell_id=draw(st.sampled_from(["c1", "c\u2028"]) if plain else _field),
        benchmark_id=draw(coordinate), point_type=draw(st.sampled_from(["decode", "prefill"])
                                                       if plain else _field),
        batch_size=draw(coordinate), total_prefill_tokens=draw(coordinate),
        total_kv_read_tokens=draw(coordinate),
        native_regime=draw(regime if plain else _field),
        kv_seed_regime=draw(regime),  # counted per regime: str or None
        eligible=draw(st.booleans() if plain else _field),
        status=draw(st.sampled_from(["ok", "error"]) if plain else _field),
        decided_by=draw(regime if plain else _field), trace=draw(_strings), reasons=draw(_strings))


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.lists(_points(), max_size=6))
def test_point_records_read_as_the_points_in_the_documented_layout(points) -> None:
    """Whatever a field holds (non-finite numbers never reach a verdict), for points as
    objects and as the columns a classification keeps them in: the json document and every
    JSON Lines record read as the points, in the documented layout."""
    from kvrules.verdicts.model import POINT_FIELDS, PointVerdicts
    columns = [[getattr(p, name) for p in points] for name in POINT_FIELDS]
    for kept in (tuple(points), PointVerdicts(columns)):
        cell = replace(dense_cell(), points=kept)
        assert_documented_layout(Report(POLICY, (cell,)))
        lines = "".join(iter_jsonl(POLICY, [cell, cell])).split("\n")[:-1]
        expected = [p.to_dict() for p in points] + [cell.to_dict(with_points=False)]
        assert list(map(json.loads, lines[1:-1])) == expected * 2  # (split at "\n" only:
        # U+2028 is not a line end)


def test_point_verdicts_kept_as_columns_are_the_points_they_stand_for() -> None:
    """Equal to the tuple of the same points (both ways), one object per point however often
    read, a lone point built without the rest, the same counts, pickled as columns."""
    import pickle
    from kvrules.verdicts.model import POINT_FIELDS, PointVerdicts
    points = error_cell().points + dense_cell().points
    kept = PointVerdicts([[getattr(p, n) for p in points] for n in POINT_FIELDS])
    assert kept.point(2) == points[2] and kept._built is None
    assert kept == tuple(points) and tuple(points) == kept and list(kept) == list(points)
    assert kept[1] is kept[1] and next(iter(kept)) is kept[0] and kept[1:] == points[1:]
    assert kept != tuple(points[:-1]) and kept != "points"
    as_tuple, as_columns = replace(dense_cell(), points=points), replace(dense_cell(),
                                                                         points=kept)
    assert as_columns == as_tuple and as_columns.to_dict() == as_tuple.to_dict()
    assert (as_columns.counts, as_columns.points_eligible) == (as_tuple.counts,
                                                               as_tuple.points_eligible)
    again = pickle.loads(pickle.dumps(PointVerdicts(kept.columns)))
    assert again == kept and again._built is None
    with pytest.raises(ValueError):
        PointVerdicts([[1], [1, 2]] + [[0]] * (len(POINT_FIELDS) - 2))
