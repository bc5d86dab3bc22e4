"""The report in a real browser: headless Chromium (system package) driven by selenium.

Opens the report of the bundled examples and of a generated multi-cell corpus, and checks that
no console error is logged, no resource is fetched, every cell's plot has one mark per formal
row, each mark has its regime's colour, and a screenshot is written; the same at 400 px.
Without Chromium, chromedriver or selenium these tests are SKIPPED with the reason.
"""
from __future__ import annotations

import os
import shutil
import time
from collections import Counter
from pathlib import Path
from typing import Any, Iterator

import pytest
from report_pages import diverse_corpus, embedded, example_paths

from kvrules import api
from kvrules.consumers.report import render_page, report_document

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
WIDE, NARROW = (1280, 1000), (400, 900)


def _find(names: tuple[str, ...], env: str) -> str | None:
    if os.environ.get(env):
        return os.environ[env]
    return next((path for name in names if (path := shutil.which(name))), None)


@pytest.fixture(scope="module")
def driver() -> Iterator[Any]:
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
    browser = _find(BROWSERS, "KVRULES_CHROMIUM")
    chromedriver = _find(("chromedriver",), "KVRULES_CHROMEDRIVER")
    if browser is None or chromedriver is None:
        pytest.skip("no headless Chromium: install the chromium and chromium-driver packages "
                    f"(found browser={browser}, chromedriver={chromedriver})")
    options = Options()
    options.binary_location = browser
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--disable-extensions", "--no-first-run", f"--window-size={WIDE[0]},{WIDE[1]}"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    try:
        chrome = webdriver.Chrome(service=Service(chromedriver), options=options)
    except Exception as exc:  # a browser that cannot start is a skip with its reason
        pytest.skip(f"headless Chromium did not start: {exc}")
    try:
        yield chrome
    finally:
        chrome.quit()


def _wait(driver: Any, script: str, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = driver.execute_script(script)
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for: {script}")


def _open(driver: Any, page: Path, size: tuple[int, int]) -> None:
    driver.set_window_size(*size)
    driver.get("about:blank")
    driver.get_log("browser")  # drop what an earlier page logged
    driver.get(page.as_uri())
    _wait(driver, "return window.kvrulesReport !== undefined")


def _render_all(driver: Any) -> None:
    driver.execute_script("window.kvrulesReport.renderAll()")
    _wait(driver, "return window.kvrulesReport.pending() === 0 && "
                  "Array.from(document.querySelectorAll('.plot')).every("
                  "p => p.hasAttribute('data-marks'))")


MARKS = """
return Array.from(document.querySelectorAll('section.cell')).map(function (s) {
  return Array.from(s.querySelectorAll('.scatterlayer path.point')).map(function (p) {
    var style = getComputedStyle(p);
    return style.fill === 'none' ? ['open', style.stroke] : ['filled', style.fill];
  });
});
"""


def _rgb(hex_colour: str) -> str:
    r, g, b = (int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgb({r}, {g}, {b})"


def _check_marks(driver: Any, doc: dict[str, Any]) -> int:
    """Every cell has one mark per formal row, coloured by regime, open when not eligible."""
    marks = driver.execute_script(MARKS)
    assert len(marks) == len(doc["cells"])
    total = 0
    for cell, drawn in zip(doc["cells"], marks):
        rows = [r for r in cell["rows"] if r["latency_ms"] is not None]
        want = Counter(("filled" if r["eligible"] else "open",
                        _rgb(doc["colours"][r["kv_seed_regime"]])) for r in rows)
        assert Counter(tuple(m) for m in drawn) == want, cell["cell_id"]
        total += len(drawn)
    return total


def _check_clean(driver: Any) -> None:
    errors = [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
    assert errors == []
    assert driver.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name)") == []


def _write(tmp_path: Path, doc: dict[str, Any], name: str) -> Path:
    page = tmp_path / name
    page.write_text(render_page(doc), encoding="utf-8")
    return page


@pytest.fixture(scope="module")
def policy() -> api.Policy:
    return api.load_policy()


@pytest.fixture(scope="module")
def examples_doc(policy: api.Policy) -> dict[str, Any]:
    return report_document(example_paths(), policy)


@pytest.mark.parametrize("size", [WIDE, NARROW], ids=["wide", "400px"])
def test_examples_report_draws_every_mark(driver: Any, tmp_path: Path,
                                          examples_doc: dict[str, Any],
                                          size: tuple[int, int]) -> None:
    doc = examples_doc
    page = _write(tmp_path, doc, "examples.html")
    _open(driver, page, size)
    _render_all(driver)
    assert _check_marks(driver, doc) == doc["summary"]["rows"]["total"] > 0
    marks = driver.execute_script("return document.querySelectorAll('li.mark').length")
    assert marks == 9 * len(doc["cells"])  # D1-D9 of every cell
    errors = driver.execute_script("return document.querySelectorAll('.errors li').length")
    assert errors == sum(len(c["errors"]) + len(c["left_out"]) for c in doc["cells"])
    width = driver.execute_script("return document.documentElement.scrollWidth")
    assert width <= driver.execute_script("return window.innerWidth")
    _check_clean(driver)
    shot = tmp_path / f"examples-{size[0]}.png"
    assert driver.save_screenshot(str(shot)) and shot.stat().st_size > 10_000


@pytest.fixture(scope="module")
def corpus_doc(tmp_path_factory: pytest.TempPathFactory, policy: api.Policy) -> dict[str, Any]:
    paths = diverse_corpus(tmp_path_factory.mktemp("corpus"), cells=12, ranks=2, points=20)
    return report_document(paths, policy)


@pytest.mark.parametrize("size", [WIDE, NARROW], ids=["wide", "400px"])
def test_corpus_report_is_lazy_then_draws_every_mark(driver: Any, tmp_path: Path,
                                                     corpus_doc: dict[str, Any],
                                                     size: tuple[int, int]) -> None:
    page = _write(tmp_path, corpus_doc, "corpus.html")
    _open(driver, page, size)
    cells = len(corpus_doc["cells"])
    assert cells == 12
    driver.execute_script("document.getElementById('cell-0').scrollIntoView()")
    _wait(driver, "return window.kvrulesReport.rendered() > 0")
    assert driver.execute_script("return window.kvrulesReport.rendered()") < cells
    _render_all(driver)
    assert _check_marks(driver, corpus_doc) == corpus_doc["summary"]["rows"]["total"] > 12
    _check_clean(driver)
    shot = tmp_path / f"corpus-{size[0]}.png"
    assert driver.save_screenshot(str(shot)) and shot.stat().st_size > 10_000


def test_filter_by_readiness_regime_and_text(driver: Any, tmp_path: Path,
                                             examples_doc: dict[str, Any]) -> None:
    doc = examples_doc
    page = _write(tmp_path, doc, "filter.html")
    _open(driver, page, WIDE)
    shown = "return document.querySelectorAll('section.cell:not([hidden])').length"

    def choose(element_id: str, value: str) -> None:
        driver.execute_script(
            "var e = document.getElementById(arguments[0]); e.value = arguments[1];"
            "e.dispatchEvent(new Event(arguments[0] === 'filter-text' ? 'input' : 'change'));",
            element_id, value)

    choose("filter-readiness", "ready")
    assert driver.execute_script(shown) == doc["summary"]["cells"]["ready"] == 3
    choose("filter-readiness", "")
    choose("filter-regime", "fake_fallback")
    assert driver.execute_script(shown) == sum(
        1 for c in doc["cells"] if "fake_fallback" in c["counts"])
    choose("filter-regime", "")
    choose("filter-text", "STAMP_REGIME_mismatch")
    assert driver.execute_script(shown) == 1
    assert "1 of 9 cells shown" in driver.find_element("id", "filter-count").text
    _check_clean(driver)


def test_evidence_markup_stays_text_in_the_browser(driver: Any, tmp_path: Path,
                                                   policy: api.Policy) -> None:
    doc = embedded(render_page(report_document([example_paths()[0]], policy)))
    evil = '</script><img src=x onerror="window.pwned=1"><b>bold</b>'
    doc["cells"][0]["cell_id"] = evil
    first = doc["cells"][0]["rows"][0]
    first["decided_by"] = doc["cells"][0]["points"][first["point"]]["decided_by"] = evil
    doc["cells"][0]["errors"] = [{"code": evil, "message": evil, "file": evil,
                                  "pointer": evil, "rule": evil}]
    page = _write(tmp_path, doc, "evil.html")
    _open(driver, page, WIDE)
    _render_all(driver)
    assert driver.execute_script("return window.pwned === undefined")
    assert driver.execute_script("return document.querySelectorAll('#cells img, #cells b')"
                                 ".length") == 0
    assert evil in driver.find_element("css selector", "section.cell .cell-id").text
    hover = driver.execute_script(
        "var gd = document.querySelector('.plot');"
        "Plotly.Fx.hover(gd, [{curveNumber: 0, pointNumber: 0}]);"
        "return document.querySelector('.hoverlayer').textContent;")
    row = doc["cells"][0]["rows"][0]
    assert f"benchmark {row['benchmark_id']}" in hover and f"decided by: {evil}" in hover
    assert f"native regime: {row['native_regime']}" in hover
    assert f"formal regime: {row['kv_seed_regime']}" in hover
    assert driver.execute_script("return document.querySelectorAll('.hoverlayer b, "
                                 ".hoverlayer img').length") == 0
    _check_clean(driver)
