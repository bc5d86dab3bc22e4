"""The policy compiler: every rule-file problem is a diagnostic with file, line, column, rule."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from kvrules.diagnostics import Diagnostic, KvrulesUsageError
from kvrules.pipeline import compile_policy
from kvrules.pipeline import PASSES
from kvrules.policy.compiler import run_passes

HEADER = """\
policy:
  name: t
  version: v1
  parameters:
    dense_synthetic_kv: {type: boolean, default: true}
  derived:
    hit: {fields: {n: {type: integer}}}
"""


def write(tmp_path: Path, rules: str, header: str = HEADER) -> Path:
    (tmp_path / "policy.yaml").write_text(header)
    (tmp_path / "rules.yaml").write_text(textwrap.dedent(rules))
    return tmp_path


def diagnostics(tmp_path: Path, rules: str, header: str = HEADER) -> list[Diagnostic]:
    return run_passes(write(tmp_path, rules, header), PASSES).diagnostics


def diag(file: str, line: int, col: int, code: str, message: str, pointer: str = "",
         rule: str | None = None) -> Diagnostic:
    return Diagnostic(file=file, line=line, column=col, message=message, code=code,
                      pointer=pointer, rule=rule)


def test_schema_error_has_line_column_pointer_and_rule(tmp_path):
    found = diagnostics(tmp_path, """\
        rules:
          - id: r.one
            description: d
            reason: r
            when:
              - fact: warmup
                where: {enabled: {equals: true}}
            then: {derive: {fact: hit, set: {n: 1}}}
        """)
    src = f"{tmp_path}/rules.yaml"
    assert found == [diag(src, 7, 26, "rule_schema_error",
                          "/rules/0/when/0/where/enabled: Additional properties are not "
                          "allowed ('equals' was unexpected)",
                          "/rules/0/when/0/where/enabled", "r.one")]


def test_yaml_syntax_error(tmp_path):
    (found,) = diagnostics(tmp_path, "rules: [\n  - id: x\n")
    assert (found.code, found.file, found.line) == ("rule_yaml_error", f"{tmp_path}/rules.yaml", 2)


RULE = """\
rules:
  - id: r.one
    description: d
    reason: "{reason}"
    when:
      - fact: {fact}
        where: {where}
    then: {then}
"""


def one_rule(tmp_path, fact="warmup", where="{enabled: true}",
             then="{derive: {fact: hit, set: {n: 1}}}", reason="r"):
    return diagnostics(tmp_path, RULE.format(fact=fact, where=where, then=then, reason=reason))


def codes(found):
    return [(d.code, d.line, d.rule) for d in found]


def test_unknown_fact(tmp_path):
    assert codes(one_rule(tmp_path, fact="warmups")) == [("rule_unknown_fact_error", 6, "r.one")]


def test_unknown_field(tmp_path):
    assert codes(one_rule(tmp_path, where="{enable: true}")) == [
        ("rule_unknown_field_error", 7, "r.one")]


def test_unknown_alias_in_reason(tmp_path):
    assert codes(one_rule(tmp_path, reason="{rank.model}")) == [
        ("rule_unknown_alias_error", 2, "r.one")]


def test_type_error_boolean_field_compared_with_string(tmp_path):
    assert codes(one_rule(tmp_path, fact="launch", where='{run_sh_model_literal: "yes"}')) == [
        ("rule_type_error", 7, "r.one")]


def test_contains_on_a_scalar_field(tmp_path):
    assert codes(one_rule(tmp_path, fact="point", where="{point_type: {contains: x}}")) == [
        ("rule_type_error", 7, "r.one")]


def test_negated_starts_with_is_rejected(tmp_path):
    assert codes(one_rule(tmp_path, where="{not: {skip_reason: {starts_with: a}}}")) == [
        ("rule_unsupported_error", 7, "r.one")]


def test_unknown_error_code_and_group(tmp_path):
    header = HEADER + "  error_codes: [known]\n"
    found = diagnostics(tmp_path, RULE.format(
        fact="warmup", where="{enabled: true}", reason="r",
        then="[{error: {code: unknown, message: m}}, {fail: {group: g, condition: D1, reason: x}}]"),
        header)
    assert [(d.code, d.rule) for d in found] == [("rule_vocabulary_error", "r.one")] * 2


def test_duplicate_rule_id(tmp_path):
    text = RULE.format(fact="warmup", where="{enabled: true}", reason="r",
                       then="{derive: {fact: hit, set: {n: 1}}}")
    body = text.split("\n", 1)[1]
    assert codes(diagnostics(tmp_path, text + body)) == [("rule_duplicate_id", 9, "r.one")]


def test_negation_cycle(tmp_path):
    found = diagnostics(tmp_path, """\
        rules:
          - id: r.a
            description: d
            reason: r
            when: [{fact: cell}, {none: {fact: hit}}]
            then: {derive: {fact: hit, set: {n: 1}}}
        """)
    assert [d.code for d in found] == ["rule_negation_cycle"]


def test_missing_header(tmp_path):
    (tmp_path / "rules.yaml").write_text("rules: []\n")
    assert [d.code for d in run_passes(tmp_path, PASSES).diagnostics] == ["rule_header_error"]


def test_invalid_policy_raises_usage_error_with_every_diagnostic(tmp_path):
    write(tmp_path, RULE.format(fact="nope", where="{x: 1}", reason="r",
                                then="{derive: {fact: hit, set: {n: 1}}}"))
    with pytest.raises(KvrulesUsageError) as info:
        compile_policy(tmp_path)
    assert info.value.exit_code == 2
    assert [d.code for d in info.value.diagnostics] == ["rule_unknown_fact_error"]
    assert "rules.yaml:6:" in info.value.message


def test_unknown_parameter_is_a_usage_error(tmp_path):
    write(tmp_path, "rules: []\n")
    with pytest.raises(KvrulesUsageError, match="unknown policy parameter 'dense'"):
        compile_policy(tmp_path, {"dense": False})


def test_shipped_policy_compiles_clean_from_any_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    state = run_passes(None, PASSES)
    assert state.diagnostics == []
    assert state.policy is not None and state.policy.version == "dense_full_attention_v1"


def test_too_many_constants_on_one_field_is_rejected_not_hung(tmp_path):
    values = ", ".join(f"v{i}" for i in range(501))
    found = one_rule(tmp_path, where="{skip_reason: {in: [" + values + "]}}")
    assert codes(found) == [("rule_unsupported_error", 7, "r.one")]
    assert "501 distinct values" in found[0].message


def _copies(n: int, where: str) -> str:
    return "rules:\n" + "".join(
        f"  - {{id: r.c{i}, description: d, when: [{{fact: point, where: {where}}}], "
        "then: {derive: {fact: hit, set: {n: 1}}}, reason: r}\n" for i in range(n))


def test_too_many_list_item_tests_on_one_field_are_rejected_not_hung(tmp_path):
    # equal item tests are not shared by the engine: 150 rules x 4 items hang classify
    where = "{sample_reasons: {contains_any: [a, b, c, d]}}"
    found = diagnostics(tmp_path, _copies(150, where))
    assert codes(found) == [("rule_unsupported_error", 127, "r.c125")]
    assert "searched for list items 600 times" in found[0].message
    with pytest.raises(KvrulesUsageError):  # classify compiles with the same passes
        compile_policy(str(tmp_path))
    assert diagnostics(tmp_path, _copies(125, where)) == []


def test_join_with_too_many_cases_is_rejected(tmp_path):
    cases = ", ".join(f"{{all: [{{enabled: {{ne: {{ref: cell.tp}}}}}}, "
                      f"{{skip_reason: {{ne: a{i}}}}}]}}" for i in range(70))
    text = RULE.format(fact="warmup", where="{any: [" + cases + "]}", reason="r",
                       then="{derive: {fact: hit, set: {n: 1}}}")
    text = text.replace("      - fact: warmup", "      - fact: cell\n      - fact: warmup")
    found = diagnostics(tmp_path, text)
    assert [d.code for d in found] == ["rule_unsupported_error"]
    assert "more than 64" in found[0].message


CHAINED_NEGATIONS = HEADER + """\
    miss: {fields: {n: {type: integer}}}
    done: {fields: {n: {type: integer}}}
"""


@pytest.mark.parametrize("warm", [True, False])
def test_strata_no_rule_occupies_are_closed_up_and_none_still_sees_complete_facts(
        tmp_path, warm):
    """Negation puts a rule two strata after the producers of what it negates; the stratum
    between, which holds no rule, is closed up (one engine session fewer per cell each), and
    each ``none`` still decides on every fact it negates, derived in the session before."""
    from kvrules.backend.durable import evaluate_in_process
    from kvrules.facts.model import Fact

    write(tmp_path, """\
        rules:
          - id: r.hit
            description: d
            reason: r
            when: [{fact: warmup, where: {enabled: true}}]
            then: {derive: {fact: hit, set: {n: 1}}}
          - id: r.miss
            description: d
            reason: r
            when: [{fact: cell}, {none: {fact: hit}}]
            then: {derive: {fact: miss, set: {n: 2}}}
          - id: r.done
            description: d
            reason: r
            when: [{fact: cell}, {none: {fact: miss}}]
            then: {derive: {fact: done, set: {n: 3}}}
        """, CHAINED_NEGATIONS)
    cp = compile_policy(tmp_path)
    assert cp.strata == {"r.hit": 1, "r.miss": 2, "r.done": 3}  # 1, 3, 5 before closing up
    assert len(cp.lowered) == 3
    facts = [Fact("cell", "cell", {"workload_kind": "decode"}),
             Fact("warmup", "w0", {"rank": 0, "enabled": warm})]
    ev = evaluate_in_process(cp, facts)
    assert ev.failures == []
    assert sorted(e.rule for e in ev.events) == (["r.done", "r.hit"] if warm else ["r.miss"])


def test_what_is_derived_from_a_policy_is_kept_per_compiled_policy_and_bounded() -> None:
    """``per_policy``: one derivation per compiled policy object (another object, even an
    equal one, gets its own), and no more than POLICIES_KEPT policies held alive."""
    from dataclasses import replace

    from kvrules.policy.compiled import POLICIES_KEPT, per_policy

    calls: list[object] = []

    @per_policy
    def derived(cp: object) -> int:
        calls.append(cp)
        return len(calls)

    first = compile_policy()
    twin = replace(first)
    assert [derived(first), derived(first), derived(twin), derived(first)] == [1, 1, 2, 1]
    assert calls == [first, twin] and calls[0] is first and calls[1] is twin
    others = [replace(first) for _ in range(POLICIES_KEPT)]
    for cp in others:
        derived(cp)
    before = len(calls)
    assert derived(first) == before + 1  # dropped with the others once the bound was met


def test_a_rule_negating_only_input_facts_never_lands_in_the_first_stratum(tmp_path):
    """When no rule occupies stratum 1, closing up the strata must not move a ``none`` rule
    there: its patterns are tested in the stratum before it (the lowering asserted)."""
    from kvrules.backend.durable import evaluate_in_process
    from kvrules.facts.model import Fact

    write(tmp_path, """\
        rules:
          - id: r.lonely
            description: d
            reason: r
            when: [{fact: cell}, {none: {fact: warmup, where: {enabled: true}}}]
            then: {derive: {fact: hit, set: {n: 1}}}
        """)
    cp = compile_policy(tmp_path)
    assert cp.strata == {"r.lonely": 2}
    for warm, fired in ((True, []), (False, ["r.lonely"])):
        facts = [Fact("cell", "cell", {"workload_kind": "decode"}),
                 Fact("warmup", "w0", {"rank": 0, "enabled": warm})]
        ev = evaluate_in_process(cp, facts)
        assert ev.failures == []
        assert [e.rule for e in ev.events] == fired
