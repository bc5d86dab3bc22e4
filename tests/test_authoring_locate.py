"""Which policy ``rules check`` / ``rules test`` read, from what the user or pre-commit gives."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kvrules.authoring.locate import policy_folders, shipped_policy
from kvrules.diagnostics import KvrulesUsageError
from kvrules.resources import rules_dir


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    shutil.copytree(str(rules_dir()), tmp_path / "rules")
    (tmp_path / "notes").mkdir()
    return tmp_path


def test_no_path_means_the_local_rules_folder_when_it_holds_a_policy(checkout: Path) -> None:
    assert policy_folders([], checkout) == ["rules"]


def test_no_path_elsewhere_means_the_shipped_policy_by_its_real_path(checkout: Path) -> None:
    assert policy_folders([], checkout / "notes") == [shipped_policy()]
    assert Path(shipped_policy()).is_dir()
    (checkout / "notes" / "rules").mkdir()  # a rules folder without a policy is not one
    assert policy_folders([], checkout / "notes") == [shipped_policy()]


def test_files_map_to_the_policy_they_belong_to_once(checkout: Path) -> None:
    files = ["rules/dense.yaml", "rules/tests/" + sorted(
        p.name for p in (checkout / "rules" / "tests").glob("*.yaml"))[0], "rules/regime.yaml"]
    assert policy_folders(files, checkout) == ["rules"]


def test_folders_are_kept_as_given_and_missing_paths_refused(checkout: Path) -> None:
    assert policy_folders(["rules", str(checkout / "rules")], checkout) == [
        "rules", str(checkout / "rules")]
    with pytest.raises(KvrulesUsageError, match="no such file or folder: nope.yaml"):
        policy_folders(["nope.yaml"], checkout)
