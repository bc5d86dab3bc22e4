"""The engine wrapper: failures fail the cell closed, sessions never pile up."""
from __future__ import annotations

from helpers import EXAMPLES

from kvrules import api
from kvrules.artifacts.discover import discover
from kvrules.artifacts.load import load_cell
from kvrules.facts.extract import extract_cell
from kvrules.backend.durable import session
from kvrules.facts.points import point_table
from kvrules.pointclasses import point_classes


def test_an_action_error_makes_the_cell_an_engine_failure_not_a_verdict(monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("boom")
    monkeypatch.setattr(session, "action_fields", broken)
    report = api.classify([str(EXAMPLES / "dense-legacy-stamp-format")], api.load_policy())
    (cell,) = report.cells
    assert cell.status == "error"
    assert {e.code for e in cell.errors} == {"engine_failure"}
    assert all(not p.eligible and p.kv_seed_regime is None for p in cell.points)
    assert report.exit_code == 1


def test_an_action_that_raises_past_its_wrapper_is_recorded_and_fails_the_cell(monkeypatch):
    """The action loop stores what an action raised in the session state, as durable's own
    loop does, and the evaluation reads it back: never a verdict from a half-run session."""
    def raising(rule, c):
        raise RuntimeError(f"boom in {rule.id}")
    monkeypatch.setattr(session, "_fire", raising)
    report = api.classify([str(EXAMPLES / "dense-legacy-stamp-format")], api.load_policy())
    (cell,) = report.cells
    assert cell.status == "error"
    assert {e.code for e in cell.errors} == {"engine_failure"}
    assert any("exception caught boom in" in e.message for e in cell.errors)
    assert all(not p.eligible and p.kv_seed_regime is None for p in cell.points)


def test_more_evaluations_than_the_engine_session_limit():
    policy = api.load_policy()
    facts = extract_cell(load_cell(discover([str(EXAMPLES / "dense-native-skip-format")])[0]))
    classes, _ = point_classes(policy.compiled, point_table(facts))
    results = {len(session.evaluate(policy.compiled, facts.facts + classes).events)
               for _ in range(1100)}  # durable-rules corrupts a ruleset past 1024 live sessions
    assert len(results) == 1


def test_rulesets_the_engine_refuses_make_every_cell_an_engine_failure(monkeypatch):
    """The engine worker registers the policy's rulesets before the first cell arrives; a
    refusal there is each cell's ``engine_failure``, as if met while evaluating it."""
    def refused(*args, **kwargs):
        raise RuntimeError("ruleset refused")
    monkeypatch.setattr(session, "ruleset_names", refused)  # the forked worker inherits it
    report = api.classify([str(EXAMPLES / "dense-legacy-stamp-format"),
                           str(EXAMPLES / "dense-native-skip-format")], api.load_policy())
    assert [c.status for c in report.cells] == ["error", "error"]
    for cell in report.cells:
        assert [(e.code, e.message) for e in cell.errors] == \
            [("engine_failure", "engine: RuntimeError: ruleset refused")]
        assert all(not p.eligible for p in cell.points)
