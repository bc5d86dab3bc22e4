"""Test-session setup: kvrules' caches (and their signing key) live in fresh folders, never
the user's; the slow modules are marked ``slow``.

The folders are set at configure time (not in a fixture) so every kvrules process a
test starts inherits it. ``python -m pytest -m "not slow"`` is the quick loop while editing;
CI runs everything.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from helpers import cli_runner

_CACHE: list[str] = []


def pytest_configure(config: object) -> None:
    _CACHE.append(tempfile.mkdtemp(prefix="kvrules-test-cache-"))
    os.environ["KVRULES_CACHE_DIR"] = _CACHE[0]
    _CACHE.append(tempfile.mkdtemp(prefix="kvrules-test-config-"))
    os.environ["XDG_CONFIG_HOME"] = _CACHE[1]  # the cache's signing key lives here
    os.environ.pop("KVRULES_CACHE_KEY", None)
    os.environ.pop("KVRULES_NO_CACHE", None)


@pytest.fixture
def runner() -> CliRunner:
    """typer's test runner, stderr apart from stdout."""
    return cli_runner()


def pytest_unconfigure(config: object) -> None:
    for path in _CACHE:
        shutil.rmtree(path, ignore_errors=True)


SLOW_MODULES = frozenset({
    "test_benchmarks.py",  # whole benchmark runs
    "test_archive.py",  # Dask clusters
    "test_fuzz_sample.py",  # a few dozen mutants, each a kvrules process
    "test_typing.py",  # mypy --strict over the package
    "test_report_browser.py",  # headless Chromium
    "test_cli_conventions.py",  # every command as a process, signals included
    "test_authoring_ci_formats.py",  # rules test runs as processes, per output format
    "test_workers.py",  # workers killed mid-run
    "test_runtime_containment.py",  # engine workers killed mid-run
    "test_repro_regressions.py",  # every reproducer as a process
})
"""Test modules whose tests start many processes or external tools."""

SLOW_TESTS = frozenset({
    "test_batch_text_is_what_the_engine_would_have_read",
    "test_five_thousand_rules_refused_alike_by_check_and_classify",
    "test_every_mutation_operator_applies",
    "test_the_shipped_cases_ship_pass_and_fire_every_rule",
    "test_cli_exit_codes_and_json",
    "test_a_witness_among_random_values_is_never_missed",
    "test_fuzz_mutants_load_the_same_either_way",
    "test_point_classes_group_copies_by_their_whole_key",
    "test_engine_facts_have_the_same_property_order_under_every_hash_seed",
    "test_the_table_holds_the_facts_the_spec_describes",
    "test_diff_readiness_and_aggregate_reuse_the_cache_classify_filled",
    "test_more_evaluations_than_the_engine_session_limit",
    "test_deeply_nested_raw_folders_never_raise",
    "test_the_usual_layout_gives_the_table_of_any_layout",
    "test_a_documented_transcript_is_the_real_output",
})
"""Single tests (by function name) of many cases or long-running properties."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test of :data:`SLOW_MODULES` and :data:`SLOW_TESTS` ``slow``."""
    for item in items:
        name = getattr(item, "originalname", item.name)
        if Path(str(item.fspath)).name in SLOW_MODULES or name in SLOW_TESTS:
            item.add_marker(pytest.mark.slow)
