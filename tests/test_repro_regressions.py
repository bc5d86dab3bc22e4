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
