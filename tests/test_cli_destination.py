"""The output guard, as a user meets it: whole ``kvrules`` processes writing next to, over or
inside their inputs. A refused destination is exit 2, one ``kvrules: error:`` line naming
the paths, no traceback, every input byte unchanged and nothing new anywhere."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import DENSE, digests, kvrules_process, only_cell, pod_dir

from kvrules.verdicts.dataset import MARKER

REPO = Path(__file__).resolve().parents[1]
RULES = REPO / "rules"


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    """A scratch folder holding ``camp`` (a copy of the dense example), as in the reproducer."""
    shutil.copytree(REPO / "examples" / DENSE, tmp_path / "camp")
    return tmp_path


def refused(done: subprocess.CompletedProcess[str], *named: str) -> None:
    """Exit 2 with one error line that names every path in ``named``, and no traceback."""
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("kvrules: error: "), done.stderr
    for path in named:
        assert path in lines[0], (path, lines[0])


def _inside_campaign(scratch: Path) -> list[tuple[list[str], str]]:
    """(arguments, the --output they give) of every command writing over or into ``camp``."""
    camp = scratch / "camp"
    plan = "camp/collection-plan.json"
    bench = str(pod_dir(camp).relative_to(scratch) / "benchmark.json")
    cell = str(only_cell(camp).relative_to(scratch))
    return [
        (["classify", "camp", "-o", plan], plan),
        (["classify", "camp", "-f", "json", "-o", "camp"], "camp"),
        (["classify", "camp", "-f", "jsonl", "-o", bench], bench),
        (["classify", "camp", "-f", "github", "-o", "camp/new.txt"], "camp/new.txt"),
        (["classify", "camp", "-f", "parquet", "-o", "camp"], "camp"),
        (["classify", "camp", "-f", "parquet", "-o", cell, "--overwrite"], cell),
        (["classify", "camp", "-f", "parquet", "-o", "camp/dataset"], "camp/dataset"),
        (["classify", cell, "--plan", plan, "-o", plan], plan),
        (["diff", "camp", "--base", str(RULES), "--head", str(RULES), "-o", plan], plan),
        (["diff", "camp", "-f", "html", "-o", "camp/diff.html"], "camp/diff.html"),
        (["readiness", "camp", "-o", plan], plan),
        (["aggregate", "camp", "-o", "camp/x.parquet"], "camp/x.parquet"),
        (["report", "camp", "-o", "camp/report.html"], "camp/report.html"),
    ]


def test_every_command_refuses_an_output_over_or_inside_the_campaign(scratch: Path) -> None:
    before = digests(scratch)
    for args, output in _inside_campaign(scratch):
        done = kvrules_process(*args, cwd=scratch)
        refused(done, output)
        assert digests(scratch) == before, args


def test_a_dataset_over_a_campaign_is_refused_even_with_overwrite(scratch: Path) -> None:
    before = digests(scratch)
    for extra in ([], ["--overwrite"]):
        done = kvrules_process("classify", "camp", "-f", "parquet", "-o", "camp", *extra,
                               cwd=scratch)
        refused(done, "--output camp", "the input camp")
    assert digests(scratch) == before


def test_a_folder_holding_the_campaign_is_refused(scratch: Path) -> None:
    (scratch / "work").mkdir()
    before = digests(scratch)
    for output in (".", "..", str(scratch)):
        cwd = scratch if output == "." else scratch / "work"
        source = "camp" if output == "." else "../camp"
        done = kvrules_process("classify", source, "-f", "parquet", "-o", output,
                               "--overwrite", cwd=cwd)
        refused(done, f"--output {output} holds the input {source}")
    assert digests(scratch) == before


def test_links_and_globs_are_resolved_before_comparing(scratch: Path) -> None:
    (scratch / "archive").mkdir()
    (scratch / "archive" / "linked").symlink_to(scratch / "camp")
    (scratch / "alias").symlink_to(scratch / "camp")
    before = digests(scratch)
    for args in (["classify", "archive", "-o", "camp/r.json"],
                 ["classify", "alias", "-o", "camp/r.json"],
                 ["classify", "camp", "-o", "alias/r.json"],
                 ["classify", "ca*", "-o", "camp/r.json"],
                 ["readiness", "archive", "-o", "camp/cells/r.txt"]):
        refused(kvrules_process(*args, cwd=scratch), args[-1])
    assert digests(scratch) == before


def test_publish_never_writes_over_its_rows_or_rules(scratch: Path) -> None:
    assert kvrules_process("aggregate", "camp", "-o", "rows.parquet", cwd=scratch)\
        .returncode == 0
    shutil.copytree(RULES, scratch / "rules")
    before = digests(scratch)
    refused(kvrules_process("publish", "rows.parquet", "--root", "rows.parquet", cwd=scratch),
            "--root rows.parquet", "the input rows.parquet")
    refused(kvrules_process("publish", "rows.parquet", "--root", "rules/published",
                            "--rules", "rules", cwd=scratch), "rules/published")
    assert digests(scratch) == before


def test_a_folder_kvrules_did_not_write_is_kept_without_overwrite(scratch: Path) -> None:
    mine = scratch / "mine"
    mine.mkdir()
    (mine / "thesis.txt").write_text("notes\n", encoding="utf-8")
    before = digests(scratch)
    done = kvrules_process("classify", "camp", "-f", "parquet", "-o", "mine", cwd=scratch)
    refused(done, "--output mine", MARKER, "--overwrite")
    assert digests(scratch) == before


def test_overwrite_replaces_a_foreign_folder(scratch: Path) -> None:
    mine = scratch / "mine"
    mine.mkdir()
    (mine / "thesis.txt").write_text("notes\n", encoding="utf-8")
    done = kvrules_process("classify", "camp", "-f", "parquet", "-o", "mine", "--overwrite",
                           cwd=scratch)
    assert (done.returncode, done.stderr) == (0, "")
    assert sorted(p.name for p in mine.iterdir()) == [MARKER, "campaign=camp"]
    assert sorted(p.name for p in scratch.iterdir()) == ["camp", "mine"]


def test_a_kvrules_dataset_is_replaced_on_rerun_and_an_empty_folder_is_used(
        scratch: Path) -> None:
    (scratch / "out").mkdir()
    for run in range(2):
        done = kvrules_process("classify", "camp", "-f", "parquet", "-o", "out", cwd=scratch)
        assert (done.returncode, done.stderr) == (0, ""), run
        assert (scratch / "out" / MARKER).is_file()
        assert sorted(p.name for p in scratch.iterdir()) == ["camp", "out"]
    import pyarrow.dataset as ds
    assert ds.dataset(scratch / "out", partitioning="hive").count_rows() == 2


@pytest.mark.parametrize("output", [".", ".."])
def test_the_current_folder_is_never_replaced(scratch: Path, output: str) -> None:
    work = scratch / "a" / "work"
    work.mkdir(parents=True)
    (work / "keep.txt").write_text("mine\n", encoding="utf-8")
    before = digests(scratch)
    done = kvrules_process("classify", str(scratch / "camp"), "-f", "parquet", "-o", output,
                           "--overwrite", cwd=work)
    refused(done, f"--output {output} is the current folder")
    assert digests(scratch) == before


def _read_only_folder(scratch: Path) -> Path:
    """A folder this process cannot write in (skip when running as a user who can)."""
    folder = scratch / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    if os.access(folder, os.W_OK):
        folder.chmod(0o755)
        pytest.skip("this user writes in read-only folders (root)")
    return folder


@pytest.mark.parametrize("fmt", ["json", "parquet"])
@pytest.mark.parametrize("parent", ["missing", "a file", "/proc", "read-only"])
def test_an_unwritable_parent_is_one_line_and_leaves_nothing(scratch: Path, fmt: str,
                                                             parent: str) -> None:
    (scratch / "afile").write_text("x\n", encoding="utf-8")
    folder = {"missing": "missing/deeper", "a file": "afile", "/proc": "/proc"}.get(parent)
    if folder is None:
        folder = str(_read_only_folder(scratch))
    before = digests(scratch)
    done = kvrules_process("classify", "camp", "-f", fmt, "-o", f"{folder}/out", cwd=scratch)
    refused(done, f"cannot write {folder}/out")
    assert digests(scratch) == before
    assert not Path("/proc/out").exists()


def test_a_failing_write_is_a_usage_error(scratch: Path) -> None:
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full")
    for fmt in ("text", "jsonl"):
        refused(kvrules_process("classify", "camp", "-f", fmt, "-o", "/dev/full", cwd=scratch),
                "cannot write /dev/full")
    done = kvrules_process("classify", "camp", "-f", "json", "-o", os.devnull, cwd=scratch)
    assert (done.returncode, done.stderr) == (0, "")
    assert Path(os.devnull).is_char_device()
