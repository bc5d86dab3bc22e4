"""``kvrules aggregate`` end to end on copies of the bundled examples."""
from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from consumer_helpers import MOE
from helpers import DENSE, DP2, copy_example
from typer.testing import CliRunner

from kvrules.cli.app import app
from kvrules.consumers.rows import COLUMNS, read_rows


def test_parquet_rows_and_a_summary(runner: CliRunner, tmp_path: Path) -> None:
    campaigns = [str(copy_example(tmp_path, n)) for n in (DENSE, MOE)]
    out = tmp_path / "rows.parquet"
    result = runner.invoke(app, ["aggregate", *campaigns, "--output", str(out)])
    assert result.exit_code == 0, result.stderr
    assert result.stdout == (f"wrote 4 rows of 2 cells to {out} (policy kv_seed "
                             "dense_full_attention_v1 dense_synthetic_kv=true)\n")
    assert pq.read_table(out).column_names == list(COLUMNS)
    assert read_rows(out).policy.parameters == {"dense_synthetic_kv": True}


def test_error_cells_are_left_out_and_exit_1(runner: CliRunner, tmp_path: Path) -> None:
    campaigns = [str(copy_example(tmp_path, n)) for n in (DENSE, DP2)]
    out = tmp_path / "rows.csv"
    result = runner.invoke(app, ["aggregate", *campaigns, "-o", str(out), "-f", "json"])
    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    assert (doc["rows"], [c["cell_id"] for c in doc["left_out"]]) == (
        2, ["fpm-llama31-8b-decode-tp1-dp2"])
    assert doc["left_out"][0]["errors"][0]["code"] == "dp_warmup_disagreement"
    assert len(out.read_text(encoding="utf-8").splitlines()) == 3


def test_no_dense_synthetic_kv_gives_the_legacy_regimes(runner: CliRunner,
                                                        tmp_path: Path) -> None:
    out = tmp_path / "rows.parquet"
    result = runner.invoke(app, ["aggregate", str(copy_example(tmp_path, DENSE)), "-o", str(out),
                                 "--no-dense-synthetic-kv"])
    assert result.exit_code == 0
    assert set(pq.read_table(out).column("kv_seed_regime").to_pylist()) == {"fake_fallback"}


@pytest.mark.parametrize("name, message", [("rows.json", "must end in .parquet or .csv"),
                                           ("missing/rows.parquet", "is not a directory")])
def test_a_bad_output_is_a_usage_error(runner: CliRunner, tmp_path: Path, name: str,
                                       message: str) -> None:
    result = runner.invoke(app, ["aggregate", str(copy_example(tmp_path, DENSE)),
                                 "-o", str(tmp_path / name)])
    assert result.exit_code == 2
    assert message in result.stderr and "Traceback" not in result.stderr


def test_output_is_required(runner: CliRunner, tmp_path: Path) -> None:
    assert runner.invoke(app, ["aggregate", str(tmp_path)]).exit_code == 2
