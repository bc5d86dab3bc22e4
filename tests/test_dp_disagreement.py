"""dp_warmup_disagreement and dp_point_disagreement are rules: each error names the field
that differs, in the artifact of the rank that differs (spec 3), whatever the field."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from helpers import DP2, copy_example, load, pod_dir, set_at
from kvrules import api

RANK1 = "benchmark_dp1.json"


def _errors(campaign: Path) -> set[tuple[str, str, str]]:
    (cell,) = api.classify([str(campaign)]).cells
    return {(e.code, Path(e.file).name, e.pointer) for e in cell.errors}


def _dp2_agreeing(tmp_path: Path) -> tuple[Path, Path]:
    campaign = copy_example(tmp_path, DP2)
    pod = pod_dir(campaign)
    set_at(pod / RANK1, "/kvwarm", load(pod / "benchmark.json")["kvwarm"])
    return campaign, pod / RANK1


def test_the_dp2_example_points_at_rank_1_skip_reason() -> None:
    from helpers import EXAMPLES
    assert ("dp_warmup_disagreement", RANK1, "/kvwarm/skip_reason") in _errors(EXAMPLES / DP2)


@pytest.mark.parametrize("pointer, value, where", [
    ("/kvwarm/enabled", False, ("dp_warmup_disagreement", RANK1, "/kvwarm/enabled")),
    ("/kvwarm/warm_eligible", True, ("dp_warmup_disagreement", RANK1, "/kvwarm/warm_eligible")),
    ("/kvwarm", None, ("dp_warmup_disagreement", RANK1, "/kvwarm")),
    ("/results/0/point/batch_size", 99,
     ("dp_point_disagreement", RANK1, "/results/0/point/batch_size")),
    ("/results/1/kv_seed_regime", "unstamped",
     ("dp_point_disagreement", RANK1, "/results/1/kv_seed_regime")),
])
def test_the_error_names_the_field_that_differs_on_the_rank_that_differs(
        tmp_path: Path, pointer: str, value: Any, where: tuple[str, str, str]) -> None:
    campaign, rank1 = _dp2_agreeing(tmp_path)
    assert _errors(campaign) == set()
    set_at(rank1, pointer, value)
    assert where in _errors(campaign)


def test_a_rank_without_kvwarm_disagrees_at_its_kvwarm(tmp_path: Path) -> None:
    campaign, rank1 = _dp2_agreeing(tmp_path)
    set_at(rank1, "/kvwarm")
    assert _errors(campaign) == {("dp_warmup_disagreement", RANK1, "/kvwarm")}


def test_extra_keys_in_kvwarm_are_not_a_disagreement(tmp_path: Path) -> None:
    campaign, rank1 = _dp2_agreeing(tmp_path)
    set_at(rank1, "/kvwarm/dataset", "other")
    assert _errors(campaign) == set()
