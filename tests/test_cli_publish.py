"""``kvrules publish`` end to end: rows file in, published table out, conflicts refused."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from consumer_helpers import LLAMA, MOE, RECORD, aggregated, policy
from helpers import DENSE, EXAMPLES, snapshot
from typer.testing import CliRunner

from kvrules.cli.app import app
from kvrules.consumers.rows import write_rows


def _rows(tmp_path: Path, name: str, dense: bool = True) -> Path:
    path = tmp_path / name
    write_rows(aggregated([EXAMPLES / DENSE, EXAMPLES / MOE], policy(dense=dense)).rows, path)
    return path


def test_publish_reports_each_cell_and_the_marker(runner: CliRunner, tmp_path: Path) -> None:
    root = tmp_path / "published"
    result = runner.invoke(app, ["publish", str(_rows(tmp_path, "rows.parquet")),
                                 "--root", str(root)])
    assert result.exit_code == 0, result.stderr
    assert result.stdout == (
        "h200_sxm/vllm/0.11.2: 4 rows, 4 added (written)\n"
        f"  published {LLAMA}\n  published fpm-qwen3-30b-a3b-decode-tp2\n"
        f"  kv_seed_classification: dense_full_attention_v1: {LLAMA}\n")
    assert (root / RECORD).is_file()


def test_a_conflict_exits_1_names_the_row_and_writes_nothing(runner: CliRunner,
                                                            tmp_path: Path) -> None:
    root = tmp_path / "published"
    runner.invoke(app, ["publish", str(_rows(tmp_path, "legacy.parquet", dense=False)),
                        "--root", str(root)])
    before = snapshot(root)
    result = runner.invoke(app, ["publish", str(_rows(tmp_path, "dense.parquet")),
                                 "--root", str(root), "-f", "json"])
    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    assert doc["published"] is False
    assert [e["code"] for e in doc["errors"]] == ["conflicting_fpm_row"] * 2
    assert doc["errors"][0]["message"].startswith("conflicting FPM database row")
    assert snapshot(root) == before


def test_the_text_of_a_conflict_names_file_and_pointer(runner: CliRunner, tmp_path: Path) -> None:
    root = tmp_path / "published"
    runner.invoke(app, ["publish", str(_rows(tmp_path, "legacy.parquet", dense=False)),
                        "--root", str(root)])
    result = runner.invoke(app, ["publish", str(_rows(tmp_path, "dense.parquet")),
                                 "--root", str(root)])
    assert result.stdout.splitlines()[1].startswith(
        f"{root}/h200_sxm/vllm/0.11.2/fpm_forward_perf.parquet#/0/kv_seed_regime: "
        "conflicting_fpm_row: conflicting FPM database row")


@pytest.mark.parametrize("content, message", [(b"junk", "not a readable parquet file"),
                                              (None, "no such file")])
def test_a_bad_rows_file_is_a_usage_error(runner: CliRunner, tmp_path: Path,
                                          content: bytes | None, message: str) -> None:
    rows = tmp_path / "rows.parquet"
    if content is not None:
        rows.write_bytes(content)
    result = runner.invoke(app, ["publish", str(rows), "--root", str(tmp_path / "r")])
    assert result.exit_code == 2
    assert message in result.stderr and "Traceback" not in result.stderr


def test_a_held_lock_is_announced_then_given_up_after_lock_timeout(tmp_path: Path) -> None:
    import subprocess
    import sys
    import filelock
    from kvrules.consumers.publish import LOCK_NAME
    rows = _rows(tmp_path, "rows.parquet")
    root = tmp_path / "root"
    root.mkdir()
    with filelock.FileLock(str(root / LOCK_NAME)):
        done = subprocess.run([sys.executable, "-m", "kvrules", "publish", str(rows),
                               "--root", str(root), "--lock-timeout", "0.5"],
                              capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    waiting, gave_up = done.stderr.splitlines()[:2]
    assert waiting == (f"kvrules: {root}: waiting up to 0.5 s for {LOCK_NAME}, held by "
                       "another publisher")
    assert "another publisher held" in gave_up and "nothing was written" in gave_up
    assert sorted(p.name for p in root.iterdir()) == [LOCK_NAME]
    done = subprocess.run([sys.executable, "-m", "kvrules", "publish", str(rows),
                           "--root", str(root), "--lock-timeout", "0.5"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "waiting" not in done.stderr, done.stderr
