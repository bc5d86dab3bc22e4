"""Readiness (spec 6.1) on real campaign folders: ready, blocked, incomplete, and never a write."""
from __future__ import annotations

import shutil
from pathlib import Path

from consumer_helpers import (LEGACY, LLAMA, MOE, SLIDING, make_prefill, policy, renamed, result,
                              set_results)
from helpers import DENSE, DP2, EXAMPLES, copy_example, dump, load, only_cell, snapshot

from kvrules import api
from kvrules.consumers.readiness import (BLOCKED, INCOMPLETE, NOTE, READY, CellReadiness, assess,
                                        readiness)
from kvrules.consumers.render import render_json, render_readiness
from kvrules.verdicts.model import Report

DENSE_REGIME = "skip:dense_model_content_insensitive"


def _only(report_paths: list[Path]) -> CellReadiness:
    (campaign,) = readiness([str(p) for p in report_paths], policy()).campaigns
    (cell,) = campaign.cells
    return cell


def test_a_dense_cell_is_ready_with_its_counts() -> None:
    assert _only([EXAMPLES / DENSE]) == CellReadiness(
        LLAMA, "decode", READY, (), {"fake_fallback": 2}, {DENSE_REGIME: 2}, 2, 2)


def test_a_decode_cell_without_warmup_block_is_blocked_although_every_point_is_eligible() -> None:
    cell = _only([EXAMPLES / LEGACY])
    assert (cell.status, cell.eligible_text) == (BLOCKED, "2/2 eligible")
    assert cell.blockers == ("The decode cell has no warm-up block: the runtime did not report "
                             "its warm-up protocol (2 of 2 points are legacy).",)
    assert cell.native_regime_counts == {"absent": 2}


def test_a_cell_without_eligible_points_is_blocked() -> None:
    cell = _only([EXAMPLES / SLIDING])
    assert (cell.status, cell.points_eligible, cell.points_total) == (BLOCKED, 0, 2)
    assert cell.blockers == ("No point is eligible for direct use (0/2: 2 fake_fallback).",)
    assert cell.formal_regime_counts == {"fake_fallback": 2}


def test_an_error_cell_is_blocked_with_a_sentence_naming_file_and_pointer() -> None:
    cell = _only([EXAMPLES / DP2])
    assert cell.status == BLOCKED
    (blocker,) = cell.blockers
    assert blocker.startswith("Evidence error dp_warmup_disagreement in cells/"
                              "fpm-llama31-8b-decode-tp1-dp2/raw/")
    assert "benchmark_dp1.json#/kvwarm/skip_reason: " in blocker
    assert cell.formal_regime_counts == {"error": 2}


def test_a_planned_cell_without_rank_artifacts_is_incomplete(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path, DENSE)
    shutil.rmtree(only_cell(campaign))
    cell = _only([campaign])
    assert (cell.status, cell.points_total) == (INCOMPLETE, 0)
    assert cell.blockers == (f"No rank artifact has been collected yet (cells/{LLAMA}/raw).",)


def test_a_prefill_cell_without_warmup_block_is_ready(tmp_path: Path) -> None:
    """Only decode cells need the warm-up block: prefill points are n/a, never legacy."""
    campaign = copy_example(tmp_path, LEGACY)
    make_prefill(campaign)
    set_results(campaign, [result(1, "prefill", prefill=512, kv=0, native=None, reasons=())])
    cell = _only([campaign])
    assert (cell.status, cell.formal_regime_counts) == (READY, {"n/a": 1})


def test_the_campaign_is_ready_only_when_every_cell_is(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path, DENSE)
    plan = load(campaign / "collection-plan.json")
    plan["cells"].append({**plan["cells"][0], "cell_id": "fpm-not-yet-run"})
    dump(campaign / "collection-plan.json", plan)
    report = readiness([str(campaign), str(EXAMPLES / MOE)], policy())
    first, second = report.campaigns
    assert [c.status for c in first.cells] == [READY, INCOMPLETE]
    assert (first.ready_for_full_collection, second.ready_for_full_collection) == (False, True)
    assert report.exit_code == 1
    assert report.to_dict()["ready_for_full_collection"] is False


def test_readiness_never_writes_inside_the_campaign(tmp_path: Path) -> None:
    campaigns = [copy_example(tmp_path, name) for name in (DENSE, LEGACY, DP2)]
    before = {c.name: snapshot(c) for c in campaigns}
    readiness([str(c) for c in campaigns], policy(), run=api.Run(api.LocalExecutor(2)))
    assert {c.name: snapshot(c) for c in campaigns} == before


def test_the_report_says_it_classifies_fresh_and_does_not_assess_a_published_table() -> None:
    report = readiness([str(EXAMPLES / DENSE)], policy())
    assert report.to_dict()["note"] == NOTE
    assert "does not assess or upgrade an already published table" in NOTE
    assert NOTE in render_readiness(report)
    assert '"note": ' in render_json(report)


def test_readiness_of_a_saved_report_equals_the_live_one() -> None:
    live = api.classify([str(EXAMPLES / DENSE), str(EXAMPLES / DP2)], policy())
    saved = Report.from_dict(live.to_dict())
    assert assess(saved) == assess(live)


def test_the_table_shows_each_cell_its_blockers_and_the_campaign_verdict() -> None:
    text = render_readiness(readiness([str(EXAMPLES / DENSE), str(EXAMPLES / LEGACY)], policy()))
    assert "fpm-llama31-8b-decode-tp1  decode    ready      2/2 eligible" in text
    assert "ready for full collection: yes" in text
    assert "ready for full collection: no" in text
    assert f"  {LLAMA} (blocked): The decode cell has no warm-up block" in text


def test_a_renamed_copy_keeps_its_readiness(tmp_path: Path) -> None:
    campaign = renamed(tmp_path, DENSE, "fpm-other")
    assert _only([campaign]).cell_id == "fpm-other"
    assert _only([campaign]).status == READY
