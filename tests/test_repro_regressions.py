"""Every known reproducer of a crash, hang, traceback or fail-open verdict, run as a user runs it.

The campaigns under ``tests/files/repro`` are the reproducers, one campaign each; the two that
need a special file (a FIFO, a symlink to ``/dev/zero``) get it in a temporary copy, since git
cannot hold one and the raw campaign is never modified. Each must end in a report (exit 0
or 1) that validates, with the expected error code on the cell and no eligible point in any
error cell: never a signal, a traceback or a hang.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kvrules.resources import load_schema

REPRO = Path(__file__).parent / "files" / "repro"
RAW0 = "cells/fpm-llama31-8b-decode-tp1/raw/fpm-llama31-8b-decode-tp1-worker-0"

EXPECTED = {
    "crash-dup-benchmark-id-delete-state": "artifact_invalid",
    "crash-dup-rank-delete-state": "rank_set_mismatch",
    "crash-long-string-assert-fact": "fact_invalid",
    "failopen-integral-float-sidecar-version": "sidecar_invalid",
    "failopen-rank1-extra-point-manual": "dp_point_disagreement",
    "failopen-rank1-missing-point-manual": "dp_point_disagreement",
    "failopen-rank1-points-unchecked": "dp_point_disagreement",
    "failopen-rank1-stamps-unchecked-manual": "stamp_regime_mismatch",
    "hang-fifo-evidence-file": "artifact_unreadable",
    "traceback-devzero-symlink": "artifact_unreadable",
    "traceback-float-topology-dp": "artifact_invalid",
    "traceback-huge-topology-dp": "rank_set_mismatch",
    "traceback-lone-surrogate-output": "artifact_invalid",
    "traceback-nan-token-encode": "fact_invalid",
    "traceback-nan-token-overrides-digest": "artifact_unreadable",
    "traceback-nan-token-warmup-view": "fact_invalid",
    "traceback-nul-in-plan-cell-id": "artifact_invalid",
    "failopen-long-multibyte-native-regime": "fact_invalid",
    "traceback-deep-nesting-overrides": "fact_invalid",
    "traceback-deep-nesting-worker-pickle": "fact_invalid",
}
"""The error code each reproducer's cell must carry (None: the cell is classified, ok)."""


def _prepare(name: str, tmp_path: Path) -> Path:
    """The campaign to classify: a temporary copy when a special file must be added."""
    campaign = REPRO / name
    if name == "hang-fifo-evidence-file":
        campaign = Path(shutil.copytree(campaign, tmp_path / "c", symlinks=True))
        os.mkfifo(campaign / RAW0 / "collector-provenance.json")
    elif name == "traceback-devzero-symlink":
        campaign = Path(shutil.copytree(campaign, tmp_path / "c", symlinks=True))
        target = campaign / RAW0 / "benchmark.json"
        target.unlink(missing_ok=True)
        target.symlink_to("/dev/zero")
    return campaign


def _classify(campaign: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kvrules", "classify", str(campaign),
                           "--format", "json"], capture_output=True, text=True, timeout=120)


def test_every_reproducer_has_an_expectation() -> None:
    assert sorted(p.name for p in REPRO.iterdir()) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_reproducer_gives_a_clear_verdict(name: str, tmp_path: Path) -> None:
    result = _classify(_prepare(name, tmp_path))
    assert result.returncode in (0, 1), result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    report = json.loads(result.stdout)
    import jsonschema
    jsonschema.validate(report, load_schema("report.schema.json"),
                        cls=jsonschema.Draft202012Validator)
    codes = sorted({e["code"] for c in report["cells"] for e in c["errors"]})
    want = EXPECTED[name]
    if want is None:
        assert codes == [] and result.returncode == 0
    else:
        assert want in codes and result.returncode == 1
    for cell in report["cells"]:
        if cell["status"] == "error":
            assert not any(p["eligible"] for p in cell["points"])
        for error in cell["errors"]:
            assert len(error["message"]) <= 600


def test_an_over_long_native_regime_is_fact_invalid_at_its_file_and_pointer() -> None:
    """65,536 more bytes of UTF-8 after the approved literal, in 32,768 characters: the
    engine would compare only the literal (16-bit lengths); kvrules refuses the string."""
    result = _classify(REPRO / "failopen-long-multibyte-native-regime")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    (cell,) = json.loads(result.stdout)["cells"]
    assert cell["status"] == "error" and cell["points_eligible"] == 0
    errors = [e for e in cell["errors"] if e["code"] == "fact_invalid"]
    assert errors and all(e["file"] == f"{RAW0}/benchmark.json" for e in errors)
    assert {e["pointer"] for e in errors} <= {"/results/0/kv_seed_regime",
                                              "/results/1/kv_seed_regime"}
    assert all("bytes of UTF-8" in e["message"] for e in errors)


def test_deep_overrides_name_the_file_and_pointer() -> None:
    result = _classify(REPRO / "traceback-deep-nesting-overrides")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    (cell,) = json.loads(result.stdout)["cells"]
    (error,) = cell["errors"]
    assert (error["code"], error["file"]) == ("fact_invalid", "generator-overrides.json")
    assert error["pointer"].startswith("/K8sConfig/k8s_namespace/0/0/")


TOPOLOGY_LINE = "            - {decode_context_parallel_size: {ne: 1}}\n"
"""A field test of ``topology.d7_context_parallel_default``; an unknown key goes beside it."""


def _huge_rules(n: int) -> str:
    rule = ("  - id: fuzz.r{i}\n    description: generated rule {i}\n    when:\n"
            "      - fact: cell\n        where: {{cell_id: fpm-x}}\n"
            "    then: {{fail: {{group: dense_synthetic_kv, condition: D9, reason: r{i}}}}}\n"
            "    reason: r{i}\n")
    return "rules:\n" + "".join(rule.format(i=i) for i in range(n))


@pytest.mark.parametrize("many", [3_500, 5_000])
def test_an_unknown_key_is_a_schema_error_whatever_the_other_files_hold(
        many: int, tmp_path: Path) -> None:
    """Beside 3,500 rules (over the rule limit) or 5,000 (a file over the size limit too),
    the unknown key of another file is still its ``rule_schema_error`` with line and
    column, never the parser's KeyError."""
    from kvrules.resources import rules_dir
    rules = tmp_path / "rules"
    rules.mkdir()
    for entry in rules_dir().iterdir():
        if entry.name.endswith(".yaml"):
            (rules / entry.name).write_text(entry.read_text(encoding="utf-8"), encoding="utf-8")
    topology = (rules / "topology.yaml").read_text(encoding="utf-8")
    assert topology.count(TOPOLOGY_LINE) == 1
    at = topology.rindex(TOPOLOGY_LINE)
    topology = topology[:at] + TOPOLOGY_LINE.replace("}}", "}, $not: {a: 1}}") + \
        topology[at + len(TOPOLOGY_LINE):]
    (rules / "topology.yaml").write_text(topology, encoding="utf-8")
    (rules / "zz_huge.yaml").write_text(_huge_rules(many), encoding="utf-8")
    for args, status in ((["rules", "check", str(rules)], 1),
                         (["classify", str(REPRO / "crash-long-string-assert-fact"),
                           "--rules", str(rules), "--format", "json"], 2)):
        done = subprocess.run([sys.executable, "-m", "kvrules", *args], capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == status, done.stderr[-2000:]
        assert "Traceback" not in done.stderr
        found = [line for line in (done.stdout + done.stderr).splitlines()
                 if "topology.yaml:" in line and "rule_schema_error" in line]
        assert found and "$not" in found[0], done.stdout + done.stderr
