"""``kvrules report`` without a browser: the page is offline, escaped, deterministic, and its
embedded data is exactly the verdicts and the formal rows of ``kvrules aggregate``."""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from consumer_helpers import result, set_results
from helpers import copy_example, pod_dir, set_at
from report_pages import diverse_corpus, embedded, example_paths, raw_embedded

from kvrules import api
from kvrules.consumers.aggregate import aggregate_paths
from kvrules.consumers.readiness import assess_cell
from kvrules.consumers.report import report_document, report_html
from kvrules.consumers.report.page import embed_json, render_page

EVIL = '</script><script>alert(1)</script><!--'


@pytest.fixture(scope="module")
def policy() -> api.Policy:
    return api.load_policy()


@pytest.fixture(scope="module")
def examples_page(policy: api.Policy) -> str:
    return report_html(example_paths(), policy)


def _markup(page: str) -> str:
    """The page without the text of its script and style elements (plotly's own code)."""
    return re.sub(r"(<(script|style)\b[^>]*>).*?(</\2>)", r"\1\3", page, flags=re.S | re.I)


def _tags(page: str, name: str) -> list[str]:
    return re.findall(rf"<{name}\b[^>]*>", _markup(page), re.I)


def test_the_page_is_offline(examples_page: str) -> None:
    assert examples_page.startswith("<!DOCTYPE html>")
    for tag in _tags(examples_page, "script"):
        assert "src=" not in tag
    assert not _tags(examples_page, "link") and not _tags(examples_page, "img")
    assert not _tags(examples_page, "iframe")
    markup = _markup(examples_page)
    assert not re.search(r"https?:|//[a-z]", markup, re.I)
    assert not re.search(r"url\(|@import", examples_page.split("<script")[0], re.I)
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', examples_page)
    assert csp and "default-src 'none'" in csp.group(1) and "connect-src 'none'" in csp.group(1)
    assert "plotly.js v" in examples_page  # the library itself is inlined


def _points_view(report: api.Report) -> list[list[dict[str, Any]]]:
    return [[{"benchmark_id": p.benchmark_id, "kv_seed_regime": p.kv_seed_regime,
              "native_regime": p.native_regime, "eligible": p.eligible,
              "decided_by": p.decided_by, "status": p.status} for p in c.points]
            for c in report.cells]


def test_embedded_cells_are_the_verdicts(examples_page: str, policy: api.Policy) -> None:
    doc = embedded(examples_page)
    verdicts = api.classify(example_paths(), policy)
    assert [(c["campaign"], c["cell_id"], c["status"]) for c in doc["cells"]] == \
        [(c.campaign, c.cell_id, c.status) for c in verdicts.cells]
    keys = ("benchmark_id", "kv_seed_regime", "native_regime", "eligible", "decided_by",
            "status")
    assert [[{k: p[k] for k in keys} for p in c["points"]] for c in doc["cells"]] == \
        _points_view(verdicts)
    for cell, verdict in zip(doc["cells"], verdicts.cells):
        assert cell["readiness"] == assess_cell(verdict).status
        assert cell["counts"] == verdict.counts
        assert [e["code"] for e in cell["errors"]] == [e.code for e in verdict.errors]
        failed = {(f.id, f.reason) for q in verdict.qualifications.values() for f in q.failed}
        shown = {(c["id"], r) for q in cell["qualifications"] for c in q["conditions"]
                 for r in c["reasons"]}
        assert shown == failed
        marks = {c["id"]: c["passed"] for q in cell["qualifications"] for c in q["conditions"]}
        assert sorted(marks) == [f"D{i}" for i in range(1, 10)]
        assert {i for i, ok in marks.items() if not ok} == {f for f, _ in failed}
    summary = doc["summary"]
    assert summary["points"]["by_regime"] == verdicts.summary.counts
    assert doc["policy"]["digest"] == policy.identity.digest


def _row_key(row: dict[str, Any]) -> tuple[Any, ...]:
    return (row["cell_id"], row["workload_kind"], row["batch_size"],
            row["total_prefill_tokens"], row["total_kv_read_tokens"])


def test_plotted_latencies_are_the_formal_rows(tmp_path: Path, policy: api.Policy) -> None:
    """Per campaign, the plotted rows are exactly the rows ``kvrules aggregate`` writes."""
    paths = diverse_corpus(tmp_path / "corpus", cells=6, points=12) + example_paths()[:3]
    doc = report_document(paths, policy)
    for campaign in paths:
        rows = aggregate_paths([campaign], policy).rows.table.to_pylist()
        plotted = [{**r, "cell_id": c["cell_id"]} for c in doc["cells"]
                   if c["campaign"] == campaign for r in c["rows"]]
        want = {_row_key(r): (r["latency_ms"], r["kv_seed_regime"]) for r in rows}
        got = {_row_key(r): (r["latency_ms"], r["kv_seed_regime"]) for r in plotted}
        assert got == want and len(plotted) == len(rows)
    verdict_points = {(c["campaign"], c["cell_id"], p["benchmark_id"]): p
                      for c in doc["cells"] for p in c["points"]}
    for cell in doc["cells"]:
        for row in cell["rows"]:
            point = verdict_points[(cell["campaign"], cell["cell_id"], row["benchmark_id"])]
            assert (point["kv_seed_regime"], point["eligible"], point["decided_by"]) == \
                (row["kv_seed_regime"], row["eligible"], row["decided_by"])
            assert point["total_kv_read_tokens"] == row["total_kv_read_tokens"]


def test_error_and_left_out_cells_carry_codes_files_and_pointers(examples_page: str) -> None:
    doc = embedded(examples_page)
    errors = [e for c in doc["cells"] for e in c["errors"]]
    assert {e["code"] for e in errors} == {"dp_warmup_disagreement", "native_skip_contradiction",
                                           "stamp_regime_mismatch"}
    assert all(e["file"] and e["pointer"].startswith("/") for e in errors)
    assert all(not c["rows"] for c in doc["cells"] if c["status"] == "error")


def test_evidence_strings_cannot_break_out(tmp_path: Path, policy: api.Policy) -> None:
    campaign = copy_example(tmp_path, "native-skip-with-stamp", 'camp<b>"&\'x')
    set_at(pod_dir(campaign) / "benchmark.json", "/results/0/point/sample_reasons",
           ["capture", "kvwarm_fake_fallback", EVIL])
    page = report_html([str(campaign)], policy)
    assert page.count("</script>") == 3  # data, plotly, report.js: nothing else closes one
    assert "<!--" not in page
    assert "camp<b>" not in page and EVIL not in page
    assert "camp&lt;b&gt;&quot;&amp;&#x27;x" in page
    doc = embedded(page)
    (cell,) = doc["cells"]
    assert any(EVIL in e["message"] for e in cell["errors"])
    assert doc["cells"][0]["campaign"] == str(campaign)


def test_embed_json_escapes_markup_and_line_separators() -> None:
    text = embed_json({"a": EVIL + "\u2028\u2029&", "n": float("nan")})
    assert not re.search(r"[<>&\u2028\u2029]", text)
    assert '"n":null' in text


def test_same_inputs_give_byte_identical_pages(examples_page: str, policy: api.Policy) -> None:
    assert report_html(example_paths(), policy) == examples_page


def test_render_page_escapes_every_summary_string() -> None:
    doc = embedded(report_html([example_paths()[0]]))
    doc["policy"]["name"] = EVIL
    doc["summary"]["campaigns"][0]["campaign"] = EVIL
    page = render_page(doc)
    assert page.count("</script>") == 3 and "<!--" not in page
    assert embedded(page)["policy"]["name"] == EVIL


def test_a_row_shows_the_sample_that_gave_it(tmp_path: Path, policy: api.Policy) -> None:
    """Clamped repeats of one coordinate: the row (and its hover) is the unclamped sample."""
    campaign = copy_example(tmp_path, "dense-legacy-stamp-format")
    clamped = ("capture", "kvwarm_fake_fallback", "context_clamped")
    set_results(campaign, [result(1, reasons=clamped, wall=0.001), result(2, wall=0.002),
                           result(3, reasons=clamped, wall=0.003)])
    (cell,) = report_document([str(campaign)], policy)["cells"]
    assert len(cell["points"]) == 3
    (row,) = cell["rows"]
    assert (row["benchmark_id"], row["latency_ms"]) == (2, 2.0)


def test_the_packed_document_expands_to_the_report_document(tmp_path: Path,
                                                            policy: api.Policy) -> None:
    paths = diverse_corpus(tmp_path / "corpus", cells=4, points=8) + example_paths()
    doc = report_document(paths, policy)
    page = render_page(doc)
    assert embedded(page) == json.loads(json.dumps(doc))
    assert all(isinstance(r, list) for c in raw_embedded(page)["cells"] for r in c["rows"])


def test_the_documentation_shows_the_command_and_a_screenshot() -> None:
    import doc_pages
    root = doc_pages.ROOT
    assert "kvrules report examples --output report.html" in doc_pages.all_text()
    assert "](report-example.png)" in (root / "docs" / "report.md").read_text(encoding="utf-8")
    assert (root / "docs" / "report-example.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
