"""The operator registry: one home per operator, and every operator means the same in the
reference semantics and on the engine.

* the rules schema lists exactly the registry's spellings;
* every registry operator has an engine lowering in the backend;
* every documented example of the shape operators is a condition of the shipped rule it names;
* for the new operators, the engine fires exactly when the reference semantics holds, value
  by value (absent versus null, lists, objects, joins with absent fields).
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import doc_pages
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvrules.backend.durable.lower import LOWERINGS
from kvrules.backend.durable.session import evaluate
from kvrules.facts.model import Fact
from kvrules.pipeline import compile_policy
from kvrules.policy.compiled import CompiledPolicy
from kvrules.policy.evaluate import eval_expr
from kvrules.policy.operators import OPERATORS, SPELLINGS, canonical_test, holds, MISSING

ROOT = Path(__file__).resolve().parents[1]


def test_the_schema_lists_exactly_the_registry_spellings() -> None:
    schema = json.loads((ROOT / "schemas/rules.schema.json").read_text(encoding="utf-8"))
    listed = set(schema["$defs"]["test"]["anyOf"][1]["properties"])
    assert listed == set(SPELLINGS)


def test_every_registry_operator_has_an_engine_lowering() -> None:
    assert set(LOWERINGS) == set(OPERATORS)


def test_spellings_reduce_to_canonical_operators() -> None:
    assert canonical_test("ne", 1) == ("eq", 1, True)
    assert canonical_test("contains", "x") == ("contains_any", ["x"], False)
    assert canonical_test("empty", True) == ("length", {"eq": 0}, False)
    assert canonical_test("empty", False) == ("length", {"eq": 0}, True)
    assert canonical_test("exists", False) == ("exists", True, True)
    assert canonical_test("differs_from", "r")[2] is True


def test_reference_semantics_of_the_shape_operators() -> None:
    assert holds("is", MISSING, "absent") and not holds("is", None, "absent")
    assert holds("is", None, "null") and not holds("is", MISSING, "null")
    assert holds("length", [], {"eq": 0}) and not holds("length", {}, {"eq": 0})
    assert holds("same_as", MISSING, MISSING) and not holds("same_as", None, MISSING)
    assert not holds("same_as", 1, 1.0) and not holds("same_as", True, 1)
    assert holds("agree_on", [{"a": 1}, {"a": 1, "b": 2}], ["a"])
    assert not holds("agree_on", [{"a": 1}, {}], ["a"])
    assert not holds("agree_on", [1], ["a"])


def _readme_examples() -> list[tuple[str, str]]:
    """(rule id, where-snippet) of each row of the documented shape-operator table."""
    section = re.split(r"^#+ Operators for the shape of the evidence\n", doc_pages.all_text(),
                       maxsplit=1, flags=re.M)[1]
    rows = re.findall(r"^\| `[^|]*\|[^|]*\| `([a-z0-9_.]+)`: `(\{.*\})`", section, re.M)
    return rows


def _rules() -> dict[str, dict[str, Any]]:
    out = {}
    for path in sorted((ROOT / "rules").glob("*.yaml")):
        for rule in (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("rules", []):
            out[rule["id"]] = rule
    return out


def _contains(where: Any, snippet: dict[str, Any]) -> bool:
    """The snippet's keys appear with the same value in the where-mapping (or a nested one)."""
    if isinstance(where, dict):
        if all(k in where and where[k] == v for k, v in snippet.items()):
            return True
        return any(_contains(v, snippet) for v in where.values())
    if isinstance(where, list):
        return any(_contains(v, snippet) for v in where)
    return False


README_EXAMPLES = _readme_examples()


def test_the_readme_documents_every_new_operator() -> None:
    shown = " ".join(snippet for _, snippet in README_EXAMPLES)
    for spelling in ("is: absent", "exists: true", "is: object", "empty: true", "length:",
                     "differs_from:", "agree_on:"):
        assert spelling in shown


@pytest.mark.parametrize("rule_id,snippet", README_EXAMPLES)
def test_each_readme_example_is_a_condition_of_its_shipped_rule(rule_id: str,
                                                               snippet: str) -> None:
    rule = _rules()[rule_id]
    wanted = yaml.safe_load(snippet)
    assert any(_contains(p.get("where", p.get("none", {}).get("where")), wanted)
               for p in rule["when"]), (rule_id, snippet)


# --- engine versus reference, value by value -------------------------------------------

WARMUP_TESTS = [
    {"enabled": {"is": "absent"}}, {"not": {"enabled": {"is": "absent"}}},
    {"enabled": {"exists": True}}, {"enabled": {"is": "null"}}, {"enabled": {"is": "object"}},
    {"enabled": {"is": "array"}}, {"enabled": {"empty": True}}, {"enabled": {"empty": False}},
    {"enabled": {"length": {"gt": 0}}}, {"enabled": {"length": {"eq": 1}}},
    {"not": {"enabled": {"length": {"le": 1}}}}, {"enabled": {"length": {"ne": 2}}},
    {"enabled": {"agree_on": ["a"]}}, {"not": {"enabled": {"agree_on": ["a", "b"]}}},
]
JOIN_TESTS = [
    {"skip_reason": {"same_as": {"ref": "kvwarm.skip_reason"}}},
    {"skip_reason": {"differs_from": {"ref": "kvwarm.skip_reason"}}},
    {"all": [{"skip_reason": {"differs_from": {"ref": "kvwarm.skip_reason"}}},
             {"enabled": {"is": "absent"}}]},
]

SCALARS = st.one_of(st.none(), st.booleans(), st.sampled_from([0, 1, 1.0, "", "a", "x:", "b:true"]))
ITEMS = st.one_of(SCALARS, st.dictionaries(st.sampled_from(["a", "b"]), SCALARS, max_size=2))
VALUES = st.one_of(SCALARS, st.lists(ITEMS, max_size=3),
                   st.dictionaries(st.sampled_from(["a", "b"]), SCALARS, max_size=2))
ABSENT = object()
MAYBE = st.one_of(st.just(ABSENT), VALUES)
_CP: list[CompiledPolicy] = []


def _policy(tmp: Path) -> CompiledPolicy:
    header = {"policy": {"name": "probe", "version": "t", "derived": {
        "hit": {"fields": {"n": {"type": "integer"}}}}}}
    rules = [{"id": f"w.t{i}", "description": "probe", "reason": "probe",
              "when": [{"fact": "warmup", "where": test}],
              "then": {"derive": {"fact": "hit", "set": {"n": i}}}}
             for i, test in enumerate(WARMUP_TESTS)]
    rules += [{"id": f"j.t{i}", "description": "probe", "reason": "probe",
               "when": [{"fact": "kvwarm"}, {"fact": "warmup", "where": test}],
               "then": {"derive": {"fact": "hit", "set": {"n": 100 + i}}}}
              for i, test in enumerate(JOIN_TESTS)]
    (tmp / "policy.yaml").write_text(yaml.safe_dump(header), encoding="utf-8")
    (tmp / "rules.yaml").write_text(yaml.safe_dump({"rules": rules}), encoding="utf-8")
    return compile_policy(tmp)


def _expected(cp: CompiledPolicy, facts: list[Fact]) -> set[str]:
    env = {f.type: {**f.fields, "id": f.id} for f in facts}
    fired = set()
    for rule in cp.policy.rules:
        pattern = rule.patterns[-1]
        if pattern.where is None or eval_expr(pattern.where, env[pattern.fact], env):
            fired.add(rule.id)
    return fired


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(enabled=MAYBE, skip=MAYBE, k_skip=MAYBE)
def test_engine_matches_reference_on_the_new_operators(tmp_path_factory: Any, enabled: Any,
                                                       skip: Any, k_skip: Any) -> None:
    if not _CP:
        _CP.append(_policy(tmp_path_factory.mktemp("ops")))
    cp = _CP[0]
    fields = {k: v for k, v in (("enabled", enabled), ("skip_reason", skip)) if v is not ABSENT}
    k_fields = {"skip_reason": k_skip} if k_skip is not ABSENT else {}
    facts = [Fact("kvwarm", "kvwarm", {"rank": 0, **k_fields}),
             Fact("warmup", "w0", {"rank": 0, **fields})]
    result = evaluate(cp, facts)
    assert result.failures == []
    assert {e.rule for e in result.events} == _expected(cp, facts)


def test_every_registry_operator_is_probed_engine_against_reference() -> None:
    """Each operator appears in a value-by-value probe (here or in test_runtime_semantics)."""
    import test_runtime_semantics as old

    seen: set[str] = set()

    def walk(where: Any) -> None:
        for key, value in where.items():
            if key in ("all", "any"):
                for sub in value:
                    walk(sub)
            elif key == "not":
                walk(value)
            elif isinstance(value, dict) and set(value) != {"ref"}:
                (op, operand), = value.items()
                seen.add(canonical_test(op, operand)[0])
            else:
                seen.add("eq")
    for where in old.WARMUP_TESTS + old.POINT_TESTS + old.JOIN_TESTS + WARMUP_TESTS + JOIN_TESTS:
        walk(where)
    assert seen == set(OPERATORS)
