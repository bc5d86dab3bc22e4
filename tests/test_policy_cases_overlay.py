"""Overlay cases: an example campaign plus JSON-pointer edits, run through the extractor.

The documented overlay cases are run as written; the rest pins the edit language, the shared
``defaults.yaml``, the strict reading of case files and the coverage by case form.
"""
from __future__ import annotations

import json
from pathlib import Path

import doc_pages
import pytest
from helpers import EXAMPLES, only_cell, snapshot
from policy_cases import variant

from kvrules.artifacts.discover import discover
from kvrules.artifacts.load import load_cell
from kvrules.authoring.cases import find_test_files, load_cases
from kvrules.authoring.overlay import (Edit, EditError, Overlay, overlay_cell, rank_files,
                                       set_pointer)
from kvrules.authoring.testing import run_policy_tests
from kvrules.authoring.testing_report import render_test_json
from kvrules.diagnostics import KvrulesUsageError
from kvrules.facts.extract import extract_cell

ROOT = Path(__file__).resolve().parents[1]
SHARED = f"campaign: dense-legacy-stamp-format\ncampaigns: {EXAMPLES}\n"


def _block(name: str) -> str:
    return doc_pages.block(name)


def folder(tmp_path: Path, cases: str, shared: str = SHARED) -> Path:
    out = tmp_path / "tests"
    out.mkdir(parents=True)
    (out / "defaults.yaml").write_text(shared, encoding="utf-8")
    (out / "cases.yaml").write_text(cases, encoding="utf-8")
    return out


def test_the_readme_overlay_cases_pass_through_the_extractor(tmp_path: Path) -> None:
    before = snapshot(EXAMPLES)
    run = run_policy_tests(None, str(folder(tmp_path, _block("overlay-cases"))))
    assert [(r.note[:4], r.status, r.form) for r in run.results] == [
        ("D9: ", "pass", "overlay"), ("ever", "pass", "overlay"), ("D3, ", "pass", "overlay")]
    assert run.forms() == {"overlay": 3, "artifacts": 0, "facts": 0}
    assert snapshot(EXAMPLES) == before  # the examples are copied, never edited


def test_the_shipped_cases_share_one_defaults_file_and_mostly_use_the_extractor() -> None:
    labels = [label for label, _, _ in find_test_files(None, None)]
    assert "rules/tests/defaults.yaml" not in labels
    for label in labels:
        assert "defaults:" not in (ROOT / label).read_text(encoding="utf-8"), label
    cases = load_cases(find_test_files(None, None))
    forms = [c.form for c in cases]
    assert forms.count("overlay") >= 0.9 * len(forms)


def test_an_overlay_reads_what_the_same_edits_on_disk_give(tmp_path: Path) -> None:
    edits = [("bench", "/kvwarm/skip_reason", "flag_off"),
             ("plan", "/capability/is_moe", True)]
    campaign = variant(tmp_path, "stamp", edits)
    (ref,) = discover([str(campaign)])
    by_hand = extract_cell(load_cell(ref))
    overlay = Overlay(EXAMPLES / "dense-legacy-stamp-format", None, (
        Edit("rank0", "/kvwarm/skip_reason", "flag_off"),
        Edit("plan", "/capability/is_moe", True)))
    got = overlay_cell(overlay)
    assert [(f.type, f.fields) for f in got.facts] == [(f.type, f.fields)
                                                       for f in by_hand.facts]
    assert [p.fact.fields for p in got.points] == [p.fact.fields for p in by_hand.points]


def test_set_pointer_sets_deletes_appends_and_replaces() -> None:
    doc = {"a": {"b": [1, 2]}, "c~/d": 0}
    assert set_pointer(doc, "/a/b/0", 9) == {"a": {"b": [9, 2]}, "c~/d": 0}
    assert set_pointer(doc, "/a/b/-", 3)["a"]["b"] == [9, 2, 3]
    assert set_pointer(doc, "/a/b/1", None, delete=True)["a"]["b"] == [9, 3]
    assert set_pointer(doc, "/c~0~1d", 1)["c~/d"] == 1
    assert set_pointer(doc, "/a/new", {"x": 1})["a"]["new"] == {"x": 1}
    assert set_pointer(doc, "", [1]) == [1]


@pytest.mark.parametrize("pointer,delete,message", [
    ("/nope/x", False, "/nope/x: no member 'nope'"),
    ("/a/b/7", False, "/a/b/7: no list index '7'"),
    ("/a/zz", True, "/a/zz: no such member to delete"),
    ("a/b", False, "'a/b' is not a JSON pointer (it starts with '/')"),
    ("/a/b/0/x", False, "/a/b/0/x: the parent is not an object or a list"),
])
def test_set_pointer_refuses_what_is_not_there(pointer: str, delete: bool,
                                               message: str) -> None:
    with pytest.raises(EditError) as err:
        set_pointer({"a": {"b": [1]}}, pointer, 0, delete)
    assert str(err.value) == message


def test_file_selectors_name_ranks_plan_provenance_and_globs(tmp_path: Path) -> None:
    campaign = variant(tmp_path, "dp2-peer-ineligible")
    cell = only_cell(campaign)
    assert [(n, p.name) for n, p in rank_files(cell)] == [(0, "benchmark.json"),
                                                          (1, "benchmark_dp1.json")]
    dp2 = EXAMPLES / "dp2-peer-ineligible"
    fixed = overlay_cell(Overlay(dp2, None, (Edit("rank1", "/kvwarm/skip_reason",
                                                  "dense_model_content_insensitive"),)))
    assert {f.fields.get("skip_reason") for f in fixed.facts if f.type == "warmup"} == {
        "dense_model_content_insensitive"}
    every = overlay_cell(Overlay(dp2, None, (Edit("ranks", "/kvwarm/skip_reason", "x"),)))
    assert {f.fields.get("skip_reason") for f in every.facts if f.type == "warmup"} == {"x"}
    glob = overlay_cell(Overlay(dp2, None, (
        Edit("cells/*/raw/*/collector-provenance.json", "/runtime/backend_version", "9"),)))
    assert [f.fields["backend_version"] for f in glob.facts if f.type == "provenance"] == ["9"]


def test_an_edit_may_create_a_json_file_or_write_text(tmp_path: Path) -> None:
    cell = "cells/fpm-llama31-8b-decode-tp1"
    got = overlay_cell(Overlay(EXAMPLES / "dense-legacy-stamp-format", None, (
        Edit(f"{cell}/generator-request.json", "", {"ServiceConfig": {"model_path": "/x"}}),
        Edit(f"{cell}/run.sh", text="#!/bin/sh\nvllm serve /x\n"))))
    read = {src[0] for f in got.facts for src in (f.sources or {}).values()}
    assert {f"{cell}/generator-request.json", f"{cell}/run.sh"} <= read


def test_a_bad_edit_is_a_usage_error_naming_the_case(tmp_path: Path) -> None:
    tests = folder(tmp_path, "cases:\n  - note: edits a key that is not there\n"
                             "    edits:\n      - {file: rank0, pointer: /nope/x, value: 1}\n"
                             "    want: {status: ok}\n")
    with pytest.raises(KvrulesUsageError) as err:
        run_policy_tests(None, str(tests))
    assert str(err.value) == (f"{tests}/cases.yaml:2: case 'edits a key that is not there': "
                              "/nope/x: no member 'nope'")
    missing = folder(tmp_path / "m", "cases:\n  - note: no such file\n    edits:\n"
                                     "      - {file: rank7, pointer: /a, value: 1}\n"
                                     "    want: {status: ok}\n")
    with pytest.raises(KvrulesUsageError, match="edit of 'rank7': no such file"):
        run_policy_tests(None, str(missing))


@pytest.mark.parametrize("case,pointer", [
    ("  - note: two forms\n    facts: {}\n    edits: []\n    want: {status: ok}\n",
     "/cases/0"),
    ("  - note: an edit without a value\n    edits: [{file: plan, pointer: /a}]\n"
     "    want: {status: ok}\n", "/cases/0/edits/0"),
])
def test_case_files_break_their_schema_with_a_position(tmp_path: Path, case: str,
                                                       pointer: str) -> None:
    tests = folder(tmp_path, "cases:\n" + case)
    with pytest.raises(KvrulesUsageError) as err:
        load_cases(find_test_files(None, str(tests)))
    assert [(d.code, d.pointer, d.line) for d in err.value.diagnostics] == [
        ("rule_test_error", pointer, 2 if pointer == "/cases/0" else 3)]


def test_defaults_yaml_is_validated_and_an_unknown_campaign_is_reported(tmp_path: Path) -> None:
    bad = folder(tmp_path, "cases:\n  - note: x\n    want: {status: ok}\n",
                 shared="campaign: dense-legacy-stamp-format\nfacts: {}\n")
    with pytest.raises(KvrulesUsageError) as err:
        load_cases(find_test_files(None, str(bad)))
    (d,) = err.value.diagnostics
    assert (Path(d.file).name, d.line, d.code) == ("defaults.yaml", 1, "rule_test_error")
    lost = folder(tmp_path / "l", "cases:\n  - note: x\n    campaign: nowhere\n"
                                  "    want: {status: ok}\n")
    with pytest.raises(KvrulesUsageError, match="no campaign folder"):
        run_policy_tests(None, str(lost))


def test_case_files_are_read_strictly(tmp_path: Path) -> None:
    tests = tmp_path / "t"
    tests.mkdir()
    (tests / "bom.yaml").write_bytes(b"\xef\xbb\xbfcases: []\n")
    with pytest.raises(KvrulesUsageError) as err:
        find_test_files(None, str(tests))
    (d,) = err.value.diagnostics
    assert (d.file, d.code, d.message) == (
        f"{tests}/bom.yaml", "rule_test_error",
        "file starts with a UTF-8 byte-order mark; save it as UTF-8 without a BOM")


def test_coverage_is_reported_by_form(tmp_path: Path) -> None:
    tests = folder(tmp_path, "cases:\n  - note: the example as it is\n"
                             "    want: {regime: \"skip:dense_model_content_insensitive\"}\n"
                             "  - note: compact facts\n    facts: {}\n"
                             "    want: {regime: \"skip:dense_model_content_insensitive\"}\n",
                   shared=SHARED + (ROOT / "rules" / "tests" / "defaults.yaml").read_text(
                       encoding="utf-8").split("campaigns: ../../examples\n", 1)[1])
    run = run_policy_tests(None, str(tests))
    assert [r.status for r in run.results] == ["pass", "pass"]
    assert run.forms() == {"overlay": 1, "artifacts": 0, "facts": 1}
    assert run.extractor_coverage is not None
    assert run.extractor_coverage.rules_fired != ()
    assert set(run.extractor_coverage.rules_fired) <= set(run.coverage.rules_fired)


def test_an_edit_round_trips_through_its_dict() -> None:
    for data in ({"file": "plan", "pointer": "/a", "value": [1]},
                 {"file": "rank0", "pointer": "/a", "delete": True},
                 {"file": "run.sh", "text": "x\n"}):
        assert Edit.from_dict(data).to_dict() == data


def test_the_json_report_counts_forms_and_extractor_coverage(tmp_path: Path) -> None:
    tests = folder(tmp_path, "cases:\n  - note: the example as it is\n"
                             "    want: {regime: \"skip:dense_model_content_insensitive\"}\n")
    doc = json.loads(render_test_json(run_policy_tests(None, str(tests))))
    assert doc["forms"] == {"overlay": 1, "artifacts": 0, "facts": 0}
    assert doc["cases"][0]["form"] == "overlay"
    assert doc["extractor_coverage"]["rules"]["fired"] == doc["coverage"]["rules"]["fired"]
