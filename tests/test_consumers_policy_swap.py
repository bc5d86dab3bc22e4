"""The consumers read verdicts only: swap the policy and readiness, aggregation and the
published marker follow it, with the evidence files unchanged."""
from __future__ import annotations

from pathlib import Path

import pytest
from consumer_helpers import PARQUET, RECORD, aggregated, policy, policy_copy, published
from helpers import DENSE, EXAMPLES

from kvrules import api
from kvrules.consumers.readiness import BLOCKED, READY, readiness

DENSE_REGIME = "skip:dense_model_content_insensitive"


@pytest.fixture(scope="module")
def step5_fake(tmp_path_factory: pytest.TempPathFactory) -> api.Policy:
    """The shipped policy, except that step 5 (dense synthetic KV) yields fake_fallback."""
    rules = policy_copy(tmp_path_factory.mktemp("policy"))
    regime = rules / "regime.yaml"
    text = regime.read_text(encoding="utf-8")
    marker = 'then: "skip:dense_model_content_insensitive"'  # the two step-5 formats
    assert text.count(marker) == 2
    regime.write_text(text.replace(marker, "then: fake_fallback"), encoding="utf-8")
    return api.load_policy(rules)


@pytest.mark.parametrize("kind", ["edited rules", "dense_synthetic_kv off"])
def test_the_consumers_follow_the_policy(kind: str, step5_fake: api.Policy,
                                         tmp_path: Path) -> None:
    swapped = step5_fake if kind == "edited rules" else policy(dense=False)
    campaign = [str(EXAMPLES / DENSE)]

    (shipped_cell,) = readiness(campaign, policy()).campaigns[0].cells
    (swapped_cell,) = readiness(campaign, swapped).campaigns[0].cells
    assert (shipped_cell.status, swapped_cell.status) == (READY, BLOCKED)
    assert swapped_cell.formal_regime_counts == {"fake_fallback": 2}

    assert {r["kv_seed_regime"] for r in aggregated([EXAMPLES / DENSE]).rows.table.to_pylist()} \
        == {DENSE_REGIME}
    rows = aggregated([EXAMPLES / DENSE], swapped).rows
    assert {r["kv_seed_regime"] for r in rows.table.to_pylist()} == {"fake_fallback"}

    root = tmp_path / "root"
    published(root, [EXAMPLES / DENSE], swapped)
    assert "kv_seed_classification" not in (root / RECORD).read_text(encoding="utf-8")
    assert (root / PARQUET).exists()


def test_the_edited_rules_keep_the_shipped_version(step5_fake: api.Policy) -> None:
    """Only the rule changed: the same version, another digest."""
    assert step5_fake.identity.version == policy().identity.version
    assert step5_fake.identity.digest != policy().identity.digest


def test_cells_that_step_5_does_not_decide_keep_their_regime(step5_fake: api.Policy) -> None:
    rows = aggregated([EXAMPLES / "moe-tp-approved-skip"], step5_fake).rows
    assert {r["kv_seed_regime"] for r in rows.table.to_pylist()} == {
        "skip:moe_tp_balanced_by_construction"}
