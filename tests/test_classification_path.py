"""One classification path: discovery once, batches, an executor, the verdict cache around it.

The same bytes whatever the batching, the executor's worker count and the cells the cache
holds; the progress total comes from the one discovery pass.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pytest

from helpers import EXAMPLES
from kvrules import api
from kvrules.cache.verdicts import VerdictCache
from kvrules.verdicts.render import render_json

CAMPAIGNS = sorted(str(p) for p in EXAMPLES.iterdir() if p.is_dir() and p.name != "__pycache__")


@pytest.fixture(scope="module")
def policy() -> api.Policy:
    return api.load_policy()


@pytest.fixture(scope="module")
def plain(policy: api.Policy) -> str:
    return render_json(api.classify(CAMPAIGNS, policy))


@pytest.mark.parametrize("jobs", [1, 2])
@pytest.mark.parametrize("batch_cells", [1, 3, 64])
def test_any_batching_and_any_cached_cells_give_the_same_bytes(
        policy: api.Policy, plain: str, tmp_path: Path, jobs: int, batch_cells: int) -> None:
    executor = api.LocalExecutor(jobs)
    executor.batch_cells = batch_cells  # full and short batches, and batches all cached
    cells = len(api.classify(CAMPAIGNS, policy, executor=executor).cells)
    assert render_json(api.classify(CAMPAIGNS, policy, executor=executor)) == plain
    half = VerdictCache(tmp_path)
    api.classify(CAMPAIGNS[::2], policy, executor=executor, cache=half)
    mixed = VerdictCache(tmp_path)
    assert render_json(api.classify(CAMPAIGNS, policy, executor=executor, cache=mixed)) == plain
    assert (mixed.hits, mixed.misses) == (half.misses, cells - half.misses) and mixed.hits


def _counting_discovery(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    passes: list[int] = []
    real = api.iter_discover

    def counted(*args: Any, **kwargs: Any) -> Iterator[Any]:
        passes.append(1)
        return real(*args, **kwargs)
    monkeypatch.setattr(api, "iter_discover", counted)
    return passes


@pytest.mark.parametrize("cached", [False, True])
def test_progress_has_its_total_from_the_one_discovery_pass(
        policy: api.Policy, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        cached: bool) -> None:
    passes = _counting_discovery(monkeypatch)
    seen: list[tuple[int, int | None]] = []
    cache = VerdictCache(tmp_path) if cached else None
    cells = list(api.iter_classify(CAMPAIGNS, policy, progress=lambda d, t: seen.append((d, t)),
                                   cache=cache))
    assert passes == [1]
    assert seen == [(n, len(cells)) for n in range(1, len(cells) + 1)]


def test_past_the_read_ahead_the_total_comes_when_discovery_ends(
        policy: api.Policy, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(api, "READ_AHEAD", 2)
    executor = api.LocalExecutor()
    executor.batch_cells = 1  # cells are taken from discovery one at a time
    seen: list[int | None] = []
    cells = list(api.iter_classify(CAMPAIGNS, policy, progress=lambda d, t: seen.append(t),
                                   executor=executor))
    assert seen[0] is None and seen[-1] == len(cells)
    known = seen.index(len(cells))
    assert set(seen[:known]) == {None} and set(seen[known:]) == {len(cells)}


def test_consumers_classify_on_the_run_they_are_given(policy: api.Policy, plain: str) -> None:
    from kvrules.consumers.readiness import readiness

    class Counting(api.LocalExecutor):
        batches = 0

        def classify_batches(self, policy: api.Policy, batches: Iterator[Any]) -> Iterator[Any]:
            for done in super().classify_batches(policy, batches):
                Counting.batches += 1
                yield done

    run = api.Run(Counting(2))
    assert render_json(run.classify(CAMPAIGNS, policy)) == plain
    readiness(CAMPAIGNS, policy, run=run)
    assert Counting.batches == 2
