"""Every engine evaluation is checked against the reference evaluation of the policy: an
engine that silently loses a firing turns exactly that cell into ``engine_disagreement``,
with no eligible point, and every other cell keeps its verdict."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from helpers import EXAMPLES

VICTIM = "fpm-llama31-8b-decode-tp1"
CAMPAIGNS = [EXAMPLES / "dense-legacy-stamp-format", EXAMPLES / "moe-tp-approved-skip"]


def classify(*args: str, drop: str | None = None) -> tuple[int, list[dict[str, object]]]:
    """``kvrules classify`` as a process (jsonl, no cache): exit status and cell records;
    ``drop``: the engine worker loses the last firing of that cell's evaluations."""
    env = {**os.environ}
    if drop:
        env["_KVRULES_TEST_ENGINE_DROP"] = drop
    done = subprocess.run([sys.executable, "-m", "kvrules", "classify", *map(str, CAMPAIGNS),
                           "--format", "jsonl", "--no-cache", *args],
                          capture_output=True, text=True, timeout=300, env=env)
    assert "Traceback" not in done.stderr, done.stderr
    records = [json.loads(line) for line in done.stdout.splitlines()]
    return done.returncode, records


def cells(records: list[dict[str, object]]) -> dict[str, dict[str, object]]:
    return {str(r["cell_id"]): r for r in records if r["kind"] == "cell"}


def test_a_silently_wrong_engine_fails_exactly_that_cell_closed() -> None:
    status, good = classify()
    assert status == 0
    status, broken = classify(drop=VICTIM)
    assert status == 1
    victim = cells(broken)[VICTIM]
    assert victim["status"] == "error" and victim["points_eligible"] == 0
    (error,) = victim["errors"]  # type: ignore[misc]
    assert error["code"] == "engine_disagreement"
    assert "reference only" in error["message"]
    assert not [r for r in broken if r["kind"] == "point" and r["cell_id"] == VICTIM
                and r["eligible"]]
    others = {k: v for k, v in cells(broken).items() if k != VICTIM}
    assert others and others == {k: v for k, v in cells(good).items() if k != VICTIM}


def test_without_verification_the_report_says_so_and_the_defect_goes_unseen() -> None:
    status, records = classify("--no-verify", drop=VICTIM)
    header = records[0]
    assert header["policy"]["parameters"]["verification"] == "off"  # type: ignore[index]
    assert all(c["status"] == "ok" for c in cells(records).values())
    _, checked = classify()
    assert "verification" not in checked[0]["policy"]["parameters"]  # type: ignore[index]


def test_the_library_verifies_unless_told_not_to() -> None:
    from kvrules import api
    assert api.load_policy().classifier.verify is True
    off = api.load_policy(verify=False)
    assert off.classifier.verify is False and off.identity.parameters["verification"] == "off"
    assert off.with_parameters(dense_synthetic_kv=False).verify is False
