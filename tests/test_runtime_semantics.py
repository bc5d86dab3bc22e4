"""The engine agrees with the reference semantics, value by value (durable-rules is loose).

One policy holds a rule per condition. For random JSON values hypothesis checks that the
rules durable-rules fires are exactly the conditions ``kvrules.policy.evaluate`` says hold:
strict types (``true`` is not ``1``, ``"4"`` is not ``4``), absent versus null, exponent
floats, integers beyond int64, empty lists, joins against absent fields.
"""
from __future__ import annotations

from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvrules.facts.model import Fact
from kvrules.policy.compiled import CompiledPolicy
from kvrules.pipeline import compile_policy
from kvrules.policy.evaluate import eval_expr
from kvrules.backend.durable.session import evaluate

WARMUP_TESTS = [
    {"enabled": True}, {"enabled": 1}, {"enabled": "1"}, {"enabled": None},
    {"enabled": {"ne": False}}, {"enabled": {"in": [1, "a", True]}},
    {"enabled": {"not_in": [0, "", False, None]}}, {"enabled": {"lt": 1}},
    {"enabled": {"ge": 0}}, {"enabled": {"gt": 1.5}}, {"enabled": {"le": -3}},
    {"enabled": {"exists": True}}, {"enabled": {"exists": False}},
    {"enabled": {"truthy": True}}, {"enabled": {"truthy": False}},
    {"enabled": {"is": "integer"}}, {"enabled": {"is": "number"}},
    {"enabled": {"is": "string"}}, {"enabled": {"is": "boolean"}},
    {"enabled": {"is": "null"}}, {"enabled": {"is": "array"}}, {"enabled": {"is": "object"}},
    {"enabled": {"starts_with": "skip:"}}, {"enabled": [1, "a"]}, {"enabled": 0.00001},
    {"not": {"enabled": {"is": "boolean"}}}, {"not": {"enabled": {"lt": 1}}},
    {"any": [{"enabled": True}, {"warm_eligible": {"gt": 0}}]},
    {"all": [{"enabled": {"exists": True}}, {"enabled": {"ne": None}}]},
    {"enabled": {"ref": "warmup.warm_eligible"}},
    {"enabled": {"ne": {"ref": "warmup.warm_eligible"}}},
    {"enabled": {"lt": {"ref": "warmup.warm_eligible"}}},
    {"not": {"all": [{"enabled": {"is": "string"}}, {"enabled": {"truthy": True}}]}},
]
POINT_TESTS = [
    {"sample_reasons": {"contains": "kvwarm_real_kv"}},
    {"sample_reasons": {"contains_none": ["kvwarm_real_kv", "capture"]}},
    {"sample_reasons": {"contains_any": ["capture", "x"]}},
    {"not": {"sample_reasons": {"contains": "capture"}}},
    {"total_kv_read_tokens": {"gt": 0}}, {"total_kv_read_tokens": 0},
]

JOIN_TESTS = [  # point patterns joined with the warmup fact (beta nodes in the engine)
    {"any": [{"all": [{"total_kv_read_tokens": {"gt": 0}},
                      {"sample_reasons": {"contains": "capture"}}]},
             {"native_regime": {"ref": "warmup.skip_reason"}}]},
    {"all": [{"native_regime": {"ne": {"ref": "warmup.skip_reason"}}},
             {"any": [{"total_kv_read_tokens": 0}, {"sample_reasons": {"contains": "x"}}]}]},
    {"not": {"all": [{"native_regime": {"ref": "warmup.enabled"}},
                     {"total_kv_read_tokens": {"gt": 5}}]}},
    {"total_kv_read_tokens": {"lt": {"ref": "warmup.warm_eligible"}}},
]

SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-2**70, max_value=2**70),
    st.sampled_from([0, 1, -1, 0.0, 1.0, 1.5, 0.00001, 1e16, 2**63, "", "1", "true", "a",
                     "skip:dense", "s:1", "x:", "b:true", "%.(["]),
    st.text(max_size=6))
VALUES = st.one_of(SCALARS, st.lists(SCALARS, max_size=2),
                   st.dictionaries(st.text(max_size=2), SCALARS, max_size=2))
ABSENT = object()
MAYBE = st.one_of(st.just(ABSENT), VALUES)


def _policy(tmp: Path) -> CompiledPolicy:
    header = {"policy": {"name": "probe", "version": "t", "derived": {
        "hit": {"fields": {"n": {"type": "integer"}}}}}}
    rules = [{"id": f"w.t{i}", "description": "probe", "reason": "probe",
              "when": [{"fact": "warmup", "where": test}], "then": {"derive": {
                  "fact": "hit", "set": {"n": i}}}} for i, test in enumerate(WARMUP_TESTS)]
    rules += [{"id": f"p.t{i}", "description": "probe", "reason": "probe",
               "when": [{"fact": "point", "where": test}], "then": {"derive": {
                   "fact": "hit", "set": {"n": 100 + i}}}} for i, test in enumerate(POINT_TESTS)]
    rules += [{"id": f"j.t{i}", "description": "probe", "reason": "probe",
               "when": [{"fact": "warmup"}, {"fact": "point", "where": test}],
               "then": {"derive": {"fact": "hit", "set": {"n": 200 + i}}}}
              for i, test in enumerate(JOIN_TESTS)]
    tmp.mkdir(exist_ok=True)
    (tmp / "policy.yaml").write_text(yaml.safe_dump(header))
    (tmp / "rules.yaml").write_text(yaml.safe_dump({"rules": rules}))
    return compile_policy(tmp)


_CP: list[CompiledPolicy] = []


def compiled(tmp_path_factory) -> CompiledPolicy:
    if not _CP:
        _CP.append(_policy(tmp_path_factory.mktemp("probe")))
    return _CP[0]


def _expected(cp: CompiledPolicy, facts: list[Fact]) -> set[str]:
    by_type = {f.type: f for f in facts}
    fired = set()
    env = {f.type: {**f.fields, "id": f.id} for f in facts}
    for rule in cp.policy.rules:
        pattern = rule.patterns[-1]
        fields = env[pattern.fact]
        if pattern.where is None or eval_expr(pattern.where, fields, env):
            fired.add(rule.id)
    return fired


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(enabled=MAYBE, eligible=MAYBE,
       reasons=st.lists(st.sampled_from(["capture", "kvwarm_real_kv", "x", ""]), max_size=3),
       kv=st.integers(min_value=0, max_value=2**40),
       native=st.one_of(st.just(ABSENT), st.sampled_from([None, "a", "", True, 1, 0])),
       skip=st.one_of(st.just(ABSENT), st.sampled_from([None, "a", "", 1])))
def test_engine_matches_reference_semantics(tmp_path_factory, enabled, eligible, reasons, kv,
                                            native, skip):
    cp = compiled(tmp_path_factory)
    fields = {}
    if enabled is not ABSENT:
        fields["enabled"] = enabled
    if eligible is not ABSENT:
        fields["warm_eligible"] = eligible
    if skip is not ABSENT:
        fields["skip_reason"] = skip
    point = {"sample_reasons": reasons, "total_kv_read_tokens": kv}
    if native is not ABSENT:
        point["native_regime"] = native
    facts = [Fact("warmup", "w0", fields), Fact("point", "p1", point)]
    result = evaluate(cp, facts)
    assert result.failures == []
    assert {e.rule for e in result.events} == _expected(cp, facts)
