"""CI sample of the mutation fuzz harness: a bounded, fixed-seed run must find no failure.

About 40 mutants on 2 jobs (one or two kvrules processes each, ~1 s apiece): 1-2 minutes.
The long run is ``python -m tests.fuzz --mutants 10000 --seed S`` (tests/fuzz/README.md).
"""
from __future__ import annotations

from .cache_tamper import fuzz_cache
from .run import FuzzResult, describe, fuzz, summary

SAMPLE_SEED = 20261203
SAMPLE_MUTANTS = 40
SAMPLE_CACHE_MUTANTS = 8


def test_fuzz_sample_finds_no_failure() -> None:
    res = fuzz(SAMPLE_MUTANTS, SAMPLE_SEED, jobs=2, timeout=15)
    report = "\n\n".join(describe(r) for r in res.failures)
    assert not res.failures, f"{report}\n\n{summary(res)}"
    assert_output_mutants_ran(res)


def assert_output_mutants_ran(res: FuzzResult) -> None:
    """The sample includes random --output destinations (tests/fuzz/outputs.py)."""
    assert sum(r.kind == "output" for r in res.results) >= 5


def test_fuzz_cache_sample_finds_no_failure() -> None:
    """Tampered cache folders: no code runs from an entry, the report is the uncached one."""
    res = fuzz_cache(SAMPLE_CACHE_MUTANTS, SAMPLE_SEED, jobs=2, timeout=15)
    report = "\n\n".join(describe(r) for r in res.failures)
    assert not res.failures, f"{report}\n\n{summary(res)}"


BOUNDS_MUTANTS = 12


def test_fuzz_sample_of_the_bound_classes_finds_no_failure() -> None:
    """The classes of ``bounds`` alone (long non-ASCII strings, deep nesting), so the CI
    sample always holds them, whatever the weighted draw of the sample above gives."""
    from unittest import mock

    from . import bounds, mutations as mut
    with mock.patch.dict(mut.CAMPAIGN_MUTATIONS, bounds.CAMPAIGN, clear=True), \
            mock.patch.dict(mut.RULE_MUTATIONS, bounds.RULES, clear=True):
        res = fuzz(BOUNDS_MUTANTS, SAMPLE_SEED, jobs=2, timeout=30)
    report = "\n\n".join(describe(r) for r in res.failures)
    assert not res.failures, f"{report}\n\n{summary(res)}"
    described = " ".join(d for r in res.results for d in r.descriptions)
    assert "string of" in described and "nested" in described
