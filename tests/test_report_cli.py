"""``kvrules report`` and ``kvrules diff --format html`` on the command line: the file, the
exit codes and the usage errors."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers import copy_example
from report_pages import EXAMPLES, embedded, example_paths
from typer.testing import CliRunner

from kvrules.cli.app import app
from kvrules.consumers.report import page as page_module

DENSE_PARAMS = ["--base-param", "dense_synthetic_kv=true",
                "--head-param", "dense_synthetic_kv=false"]


def test_report_writes_the_page_and_exits_0(runner: CliRunner, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    result = runner.invoke(app, ["report", *example_paths(), "--output", str(out)])
    assert result.exit_code == 0, result.output
    assert re.search(rf"wrote {re.escape(str(out))}: 9 cells, 12 formal rows, \d+\.\d MB",
                     result.stdout)
    doc = embedded(out.read_text(encoding="utf-8"))
    assert doc["mode"] == "report" and len(doc["cells"]) == 9
    assert doc["summary"]["cells"] == {"total": 9, "ready": 3, "blocked": 6, "incomplete": 0}


def test_no_dense_synthetic_kv_and_rules_reach_the_policy(runner: CliRunner,
                                                          tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    rules = Path(__file__).resolve().parents[1] / "rules"
    result = runner.invoke(app, ["report", str(EXAMPLES / "dense-legacy-stamp-format"),
                                 "-o", str(out), "--rules", str(rules),
                                 "--no-dense-synthetic-kv"])
    assert result.exit_code == 0, result.output
    doc = embedded(out.read_text(encoding="utf-8"))
    assert doc["policy"]["parameters"] == {"dense_synthetic_kv": False}
    assert doc["policy"]["source"] == str(rules)
    (cell,) = doc["cells"]
    assert {r["kv_seed_regime"] for r in cell["rows"]} == {"fake_fallback"}
    (d1,) = [c for c in cell["qualifications"][0]["conditions"] if c["id"] == "D1"]
    assert not d1["passed"] and d1["reasons"]


def test_a_single_cell_folder_with_plan(runner: CliRunner, tmp_path: Path) -> None:
    campaign = copy_example(tmp_path, "dense-sliding-window")
    (cell,) = (campaign / "cells").iterdir()
    out = tmp_path / "cell.html"
    result = runner.invoke(app, ["report", str(cell), "--plan",
                                 str(campaign / "collection-plan.json"), "-o", str(out)])
    assert result.exit_code == 0, result.output
    (shown,) = embedded(out.read_text(encoding="utf-8"))["cells"]
    assert len(shown["rows"]) == 2 and not shown["left_out"]


@pytest.mark.parametrize("args, message", [
    (["--output", "{tmp}/missing/r.html"], "is not a directory"),
    (["--output", "{campaign}/../out"], "it is a directory"),
    (["--output", "{tmp}"], "holds the input"),
    (["--output", "{tmp}/r.txt"], "must end in .html"),
    (["--output", "{campaign}/r.html"], "never writes over or inside what it reads"),
])
def test_usage_errors_exit_2(runner: CliRunner, tmp_path: Path, args: list[str],
                             message: str) -> None:
    campaign = copy_example(tmp_path)
    (tmp_path / "out").mkdir()
    argv = [a.format(tmp=tmp_path, campaign=campaign) for a in args]
    result = runner.invoke(app, ["report", str(campaign), *argv])
    assert result.exit_code == 2
    assert message in result.stderr
    assert not list(campaign.rglob("*.html"))


def test_missing_output_and_bad_path_exit_2(runner: CliRunner, tmp_path: Path) -> None:
    assert runner.invoke(app, ["report", str(EXAMPLES / "dense-sliding-window")]).exit_code == 2
    result = runner.invoke(app, ["report", str(tmp_path / "nope"), "-o",
                                 str(tmp_path / "r.html")])
    assert result.exit_code == 2 and "kvrules: error:" in result.stderr
    assert not (tmp_path / "r.html").exists()


def test_without_plotly_the_error_says_how_to_install(runner: CliRunner, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(page_module, "PLOTLY_PACKAGE", "kvrules_no_such_plotly")
    out = tmp_path / "r.html"
    for argv in (["report", str(EXAMPLES / "dense-sliding-window"), "-o", str(out)],
                 ["diff", str(EXAMPLES / "dense-sliding-window"), "-f", "html", "-o", str(out)]):
        result = runner.invoke(app, argv)
        assert result.exit_code == 2
        assert "pip install 'kvrules[report]'" in result.stderr
    assert not out.exists()


def test_diff_html_marks_and_lists_the_changed_points(runner: CliRunner, tmp_path: Path) -> None:
    out = tmp_path / "diff.html"
    result = runner.invoke(app, ["diff", *DENSE_PARAMS, *example_paths(), "-f", "html",
                                 "-o", str(out), "--fail-on-change"])
    assert result.exit_code == 1, result.output
    text = out.read_text(encoding="utf-8")
    doc = embedded(text)
    assert doc["mode"] == "diff" and doc["changes"]["changed"] == 4
    assert doc["base_policy"]["parameters"] == {"dense_synthetic_kv": True}
    assert doc["policy"]["parameters"] == {"dense_synthetic_kv": False}
    changed = {(c["campaign"], p["benchmark_id"]) for c in doc["cells"] for p in c["points"]
               if "change" in p}
    listed = {(p["campaign"], p["benchmark_id"]) for g in doc["changes"]["groups"]
              for p in g["points"]}
    assert changed == listed and len(changed) == 4
    marked = [r for c in doc["cells"] for r in c["rows"] if r["changed"]]
    assert len(marked) == 4 and all(r["change"]["new"] == "fake_fallback (not eligible)"
                                    for r in marked)
    assert "Changes: 4 of 18 points in 9 cells" in text
    assert 'id="filter-changed"' in text


def test_diff_text_and_json_still_go_to_stdout_or_output(runner: CliRunner,
                                                         tmp_path: Path) -> None:
    plain = runner.invoke(app, ["diff", *DENSE_PARAMS, *example_paths()])
    assert plain.exit_code == 0 and "4 changed" in plain.stdout
    out = tmp_path / "diff.json"
    result = runner.invoke(app, ["diff", *DENSE_PARAMS, *example_paths(), "-f", "json",
                                 "-o", str(out)])
    assert result.exit_code == 0 and result.stdout == ""
    assert '"changed": 4' in out.read_text(encoding="utf-8")
