"""The reference evaluation (kvrules.policy.reference) equals the engine's, cell by cell.

Every bundled example, every campaign under tests/files, every case of the shipped policy's
tests (rules/tests) and random small policies (tests/fuzz/policies.py) are evaluated by
durable-rules and by the reference; the two evaluations must be the same up to the order
the engine fired in (:func:`kvrules.policy.reference.canonical`).
"""
from __future__ import annotations

from pathlib import Path

import pytest

from kvrules.artifacts.discover import discover
from kvrules.artifacts.load import load_cell
from kvrules.authoring.cases import find_test_files, load_cases
from kvrules.authoring.testing import Policies, case_cell
from kvrules.backend.durable import evaluate_in_process
from kvrules.diagnostics import KvrulesUsageError
from kvrules.facts.extract import extract_cell
from kvrules.facts.model import CellFacts, Fact
from kvrules.pipeline import compile_policy, prepare
from kvrules.policy import reference
from kvrules.policy.compiled import CompiledPolicy

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted(p for p in (ROOT / "examples").iterdir() if p.is_dir()
                  and not p.name.startswith("__"))
CAMPAIGNS = sorted(p.parent for p in (ROOT / "tests" / "files").rglob("collection-plan.json"))
POLICIES = sorted(p.parent for p in (ROOT / "tests" / "files").rglob("policy.yaml"))


def _cells(folder: Path) -> list[CellFacts]:
    out = []
    for ref in discover([str(folder)]):
        try:
            out.append(extract_cell(load_cell(ref)))
        except Exception:  # a reproducer of a loader crash: not a cell to evaluate
            continue
    return out


def assert_same(cp: CompiledPolicy, facts: list[Fact]) -> reference.Result:
    engine = evaluate_in_process(cp, facts)
    ref = reference.evaluate(cp, facts)
    assert reference.first_difference(engine, ref) is None
    assert not ref.failures
    return ref


def _checked(cp: CompiledPolicy, cells: list[CellFacts]) -> int:
    n = 0
    for cell in cells:
        prepared = prepare(cp, cell)
        if prepared.to_engine:
            assert_same(cp, prepared.facts)
            n += 1
    return n


@pytest.fixture(scope="module")
def shipped() -> CompiledPolicy:
    return compile_policy()


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_every_example_evaluates_alike(shipped, example):
    assert _checked(shipped, _cells(example)) >= 1


@pytest.mark.parametrize("params", [{}, {"dense_synthetic_kv": False}], ids=["on", "off"])
def test_every_test_campaign_evaluates_alike(params):
    cp = compile_policy(None, params or None)
    for folder in CAMPAIGNS:
        _checked(cp, _cells(folder))


def test_the_test_policies_evaluate_the_examples_alike():
    compiled = 0
    for folder in POLICIES:
        try:
            cp = compile_policy(folder)
        except KvrulesUsageError:
            continue  # a policy that is meant not to compile
        compiled += 1
        for example in EXAMPLES:
            _checked(cp, _cells(example))
    assert compiled >= 2


def test_every_policy_test_case_evaluates_alike():
    policies = Policies(None)
    cases = [c for c in load_cases(find_test_files(None, None)) if c.todo is None]
    assert cases
    for case in cases:
        cp = policies.get(case.params)
        _checked(cp, [case_cell(case)])


def test_an_example_fires_the_same_rules_with_a_trace(shipped):
    cell = _cells(ROOT / "examples" / "dense-sliding-window")[0]
    prepared = prepare(shipped, cell)
    traced = reference.evaluate(shipped, prepared.facts, trace=True)
    assert traced == reference.evaluate(shipped, prepared.facts)  # the trace changes nothing
    assert traced.trace is not None
    fired = {e.rule for e in traced.events}
    assert "cache.d9_unknown_group_kind" in fired
    for rule in shipped.policy.rules:
        why = traced.trace.why_not(rule.id)
        if rule.id in fired:
            assert why is None, rule.id
        elif why is not None:
            assert why.kind in ("no_fact", "failed", "blocked")
            if why.kind == "failed":
                assert why.atom is not None and why.fact is not None


def test_a_difference_is_found_and_named(shipped):
    cell = _cells(ROOT / "examples" / "dense-legacy-stamp-format")[0]
    facts = prepare(shipped, cell).facts
    engine = evaluate_in_process(shipped, facts)
    ref = reference.evaluate(shipped, facts)
    assert reference.first_difference(engine, ref) is None
    ref.events.pop()  # the fact it derived is then named by its id alone: differs too
    assert reference.first_difference(engine, ref) is not None
    ref = reference.evaluate(shipped, facts)
    ref.events[0] = ref.events[0].__class__(**{**vars(ref.events[0]), "reason": "other"})
    assert "firing" in (reference.first_difference(engine, ref) or "")
    ref = reference.evaluate(shipped, facts)
    ref.derived[0].fields["extra"] = 1
    assert "derived fact" in (reference.first_difference(engine, ref) or "")
    ref = reference.evaluate(shipped, facts)
    ref.failures.append("rule x: boom")
    assert "failure" in (reference.first_difference(engine, ref) or "")


def test_the_reference_never_imports_the_backend():
    import ast
    source = (ROOT / "engine" / "kvrules" / "policy" / "reference.py").read_text()
    names = [n.module or "" for n in ast.walk(ast.parse(source)) if isinstance(n, ast.ImportFrom)]
    names += [a.name for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Import)
              for a in n.names]
    assert not [n for n in names if "backend" in n or n.startswith("durable")]
