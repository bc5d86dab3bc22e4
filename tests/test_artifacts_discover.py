"""Discovery: which inputs are campaigns or cells, in which order, and usage errors."""
from __future__ import annotations

import os
import pickle
import shutil
from pathlib import Path

import pytest
from helpers import DENSE, DP2, copy_example, dump, load, only_cell, set_at

from kvrules.artifacts.discover import CellRef, discover
from kvrules.artifacts.load import load_cell
from kvrules.diagnostics import NO_RANK_ARTIFACTS, KvrulesUsageError, evidence_error

DENSE_CELL = "fpm-llama31-8b-decode-tp1"


def test_campaign_gives_one_ref_per_cell(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path)
    (ref,) = discover([str(campaign)])
    assert ref == CellRef(campaign=str(campaign), root=campaign.resolve(), cell_id=DENSE_CELL,
                          cell_dir=campaign.resolve() / "cells" / DENSE_CELL,
                          plan_path=campaign.resolve() / "collection-plan.json")
    assert pickle.loads(pickle.dumps(ref)) == ref


def test_campaign_input_keeps_the_path_as_given(tmp_path: Path, monkeypatch) -> None:
    copy_example(tmp_path)
    monkeypatch.chdir(tmp_path)
    (ref,) = discover([DENSE])
    assert ref.campaign == DENSE
    assert ref.root == (tmp_path / DENSE).resolve()


def test_inputs_in_given_order_cells_sorted_by_id(tmp_path: Path) -> None:
    first = copy_example(tmp_path, DP2)
    second = copy_example(tmp_path, DENSE)
    cell = only_cell(second)
    shutil.copytree(cell, second / "cells" / "a-cell")
    plan = load(second / "collection-plan.json")
    plan["cells"].append(dict(plan["cells"][0], cell_id="a-cell"))
    dump(second / "collection-plan.json", plan)
    refs = discover([str(second), str(first)])
    assert [(r.campaign, r.cell_id) for r in refs] == [
        (str(second), "a-cell"), (str(second), DENSE_CELL),
        (str(first), "fpm-llama31-8b-decode-tp1-dp2")]


def test_planned_cell_without_folder_is_discovered_and_has_no_ranks(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path)
    plan = load(campaign / "collection-plan.json")
    plan["cells"].append(dict(plan["cells"][0], cell_id="zz-not-collected"))
    dump(campaign / "collection-plan.json", plan)
    refs = discover([str(campaign)])
    assert [r.cell_id for r in refs] == [DENSE_CELL, "zz-not-collected"]
    ev = load_cell(refs[1])
    assert ev.diagnostics == [evidence_error(
        NO_RANK_ARTIFACTS, "no rank artifact (benchmark*.json) below cells/zz-not-collected/raw",
        "cells/zz-not-collected/raw")]
    assert ev.plan_cell_index == 1


def test_unsafe_planned_cell_id_is_not_a_folder(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path)
    set_at(campaign / "collection-plan.json", "/cells/0/cell_id", "../escape")
    (ref,) = discover([str(campaign)])
    assert ref.cell_id == DENSE_CELL


def test_campaign_without_plan(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path)
    (campaign / "collection-plan.json").unlink()
    (ref,) = discover([str(campaign)])
    assert ref.plan_path is None
    assert load_cell(ref).diagnostics == []


def test_single_cell_with_plan(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path)
    cell = only_cell(campaign)
    (ref,) = discover([str(cell)], plan=str(campaign / "collection-plan.json"))
    assert ref == CellRef(str(cell), cell.resolve(), DENSE_CELL, cell.resolve(),
                          (campaign / "collection-plan.json").resolve())
    ev = load_cell(ref)
    assert ev.diagnostics == []
    assert ev.plan is not None and ev.plan.relpath == "../../collection-plan.json"
    assert ev.plan_cell is not None and ev.plan_cell["cell_id"] == DENSE_CELL
    assert [d.relpath for d in ev.ranks] == [
        "raw/fpm-llama31-8b-decode-tp1-worker-0/benchmark.json"]


def test_single_cell_without_plan(tmp_path: Path) -> None:
    cell = only_cell(copy_example(tmp_path))
    (ref,) = discover([str(cell)])
    assert ref.plan_path is None and ref.root == ref.cell_dir == cell.resolve()
    ev = load_cell(ref)
    assert ev.diagnostics == [] and ev.plan is None and ev.plan_cell is None
    assert ev.workload_kind == "decode"
    assert len(ev.ranks) == 1


@pytest.mark.parametrize("make, message", [
    (lambda p: p / "missing", "missing: no such file or directory"),
    (lambda p: _touch(p / "file.json"), "file.json: not a directory"),
    (lambda p: _mkdir(p / "empty"), "empty: neither a campaign folder"),
])
def test_bad_paths_are_usage_errors(tmp_path: Path, make, message: str) -> None:
    path = make(tmp_path)
    with pytest.raises(KvrulesUsageError) as info:
        discover([str(path)])
    assert message in info.value.message
    assert info.value.exit_code == 2


def test_missing_plan_file_is_a_usage_error(tmp_path: Path) -> None:
    cell = only_cell(copy_example(tmp_path))
    with pytest.raises(KvrulesUsageError, match="--plan .*nope.json: no such file"):
        discover([str(cell)], plan=str(tmp_path / "nope.json"))


def test_plan_conflicting_with_campaign_plan_is_a_usage_error(tmp_path: Path) -> None:
    campaign = copy_example(tmp_path)
    other = copy_example(tmp_path, DP2)
    with pytest.raises(KvrulesUsageError, match="conflicts"):
        discover([str(campaign)], plan=str(other / "collection-plan.json"))
    assert len(discover([str(campaign)], plan=str(campaign / "collection-plan.json"))) == 1


def _touch(path: Path) -> Path:
    path.write_text("{}")
    return path


def _mkdir(path: Path) -> Path:
    path.mkdir()
    return path


def test_a_folder_of_campaigns_stands_for_each_campaign_in_name_order() -> None:
    from helpers import EXAMPLES
    refs = discover([str(EXAMPLES)])
    campaigns = [r.campaign for r in refs]
    expected = [f"{EXAMPLES}/{p.name}" for p in sorted(EXAMPLES.iterdir()) if p.is_dir()]
    assert sorted(set(campaigns)) == expected
    assert campaigns == sorted(campaigns)


def test_an_archive_holds_campaigns_at_any_depth_in_name_order(tmp_path: Path) -> None:
    from kvrules.artifacts.discover import iter_discover
    archive = tmp_path / "archive"
    deep = copy_example(archive / "2025" / "q4", DENSE)
    shallow = copy_example(archive, DP2)
    cells = iter_discover([str(archive)])
    assert not isinstance(cells, list)  # lazy: one campaign at a time
    assert [(r.campaign, r.root) for r in cells] == [
        (f"{archive}/2025/q4/{DENSE}", deep.resolve()),
        (f"{archive}/{DP2}", shallow.resolve())]


def test_a_glob_stands_for_its_matching_folders_sorted(tmp_path: Path) -> None:
    copy_example(tmp_path / "runs", DENSE)
    copy_example(tmp_path / "runs", DP2)
    refs = discover([f"{tmp_path}/runs/d*"])
    assert [r.campaign for r in refs] == [f"{tmp_path}/runs/{DENSE}", f"{tmp_path}/runs/{DP2}"]
    assert [r.campaign for r in discover([f"{tmp_path}/**/dp*"])] == [f"{tmp_path}/runs/{DP2}"]
    with pytest.raises(KvrulesUsageError, match="no folder matches"):
        discover([f"{tmp_path}/nothing-*"])


def test_every_path_is_checked_before_the_first_cell(tmp_path: Path) -> None:
    from kvrules.artifacts.discover import iter_discover
    good = copy_example(tmp_path, DENSE)
    (tmp_path / "empty").mkdir()
    with pytest.raises(KvrulesUsageError, match="nor a folder of campaigns"):
        iter_discover([str(good), str(tmp_path / "empty")])


def test_real_path_is_what_resolve_gives(tmp_path: Path, monkeypatch) -> None:
    """Cell folders resolved through their folder's cached resolution equal
    ``Path.resolve()`` of the same path: plain folders, a symbolic link to a folder, a link
    in the path above, a link to a link, a dangling link, a missing folder, ``..`` and a
    relative path."""
    from kvrules.artifacts.discover import real_path
    real = tmp_path / "real"
    (real / "cells" / "a").mkdir(parents=True)
    (real / "cells" / "b").mkdir()
    (real / "cells" / "to-a").symlink_to(real / "cells" / "a")
    (real / "cells" / "to-to-a").symlink_to(real / "cells" / "to-a")
    (real / "cells" / "dangling").symlink_to(tmp_path / "nowhere")
    (tmp_path / "linked").symlink_to(real)
    monkeypatch.chdir(tmp_path)
    paths = [real / "cells" / "a", real / "cells" / "b", real / "cells" / "to-a",
             real / "cells" / "to-to-a", real / "cells" / "dangling", real / "cells" / "missing",
             tmp_path / "linked" / "cells" / "a", tmp_path / "linked" / "cells" / "to-a",
             real / "cells" / "b" / ".." / "a", Path("linked/cells/b"), Path("real/cells/a/"),
             tmp_path / "linked" / "cells" / "missing"]
    folders: dict[str, Path] = {}
    for _ in range(2):  # the second pass reads the cached folders
        for path in paths:
            assert real_path(path, folders) == Path(os.path.abspath(path)).resolve(), path
    assert real_path(tmp_path / "linked" / "cells" / "to-a", {}) == real / "cells" / "a"
