"""The verdict cache: an unchanged cell is not evaluated again and gives the same bytes; an
artifact, policy, parameter or kvrules version change re-evaluates; a corrupt entry is a miss."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kvrules import api
from kvrules.cache import verdicts
from kvrules.cache.verdicts import VerdictCache
from kvrules.verdicts.render import iter_jsonl

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


@pytest.fixture
def archive(tmp_path: Path) -> list[str]:
    """Two example campaigns copied where a test may edit them."""
    out = []
    for name in ("dense-native-skip-format", "dp2-peer-ineligible"):
        shutil.copytree(EXAMPLES / name, tmp_path / name)
        out.append(str(tmp_path / name))
    return out


def report(paths: list[str], policy: api.Policy, cache: VerdictCache | None) -> str:
    return "".join(iter_jsonl(policy.identity, api.iter_classify(paths, policy, cache=cache)))


def test_a_second_run_evaluates_nothing_and_gives_the_same_bytes(
        archive: list[str], tmp_path: Path) -> None:
    policy = api.load_policy()
    uncached = report(archive, policy, None)
    cold, warm = VerdictCache(tmp_path / "v"), VerdictCache(tmp_path / "v")
    assert report(archive, policy, cold) == uncached
    assert cold.hits == 0 and cold.misses > 0
    assert report(archive, policy, warm) == uncached
    assert warm.hits == cold.misses and warm.misses == 0
    assert verdicts.info(tmp_path / "v")[0] == cold.misses


def test_an_edited_artifact_re_evaluates_that_cell_only(archive: list[str],
                                                        tmp_path: Path) -> None:
    policy = api.load_policy()
    report(archive, policy, VerdictCache(tmp_path / "v"))
    rank = next(Path(archive[0]).rglob("benchmark*.json"))
    rank.write_bytes(rank.read_bytes().replace(b"{", b"{ ", 1))  # same JSON, other bytes
    again = VerdictCache(tmp_path / "v")
    assert report(archive, policy, again) == report(archive, policy, None)
    assert again.misses == 1 and again.hits > 0


def test_policy_parameter_and_version_changes_miss(archive: list[str], tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    policy = api.load_policy()
    report(archive, policy, VerdictCache(tmp_path / "v"))
    legacy = policy.with_parameters(dense_synthetic_kv=False)
    other = VerdictCache(tmp_path / "v")
    assert report(archive, legacy, other) == report(archive, legacy, None)
    assert other.hits == 0
    from kvrules.cache import policies
    monkeypatch.setattr(policies, "KVRULES_VERSION", "0.0.0-other")
    policies.code_fingerprint.cache_clear()
    try:
        upgraded = VerdictCache(tmp_path / "v")
        report(archive, policy, upgraded)
        assert upgraded.hits == 0
    finally:
        policies.code_fingerprint.cache_clear()


def test_an_edited_kvrules_module_misses(archive: list[str], tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Same version string, other code: the module fingerprint keeps verdicts apart."""
    from kvrules.cache import policies
    policy = api.load_policy()
    report(archive, policy, VerdictCache(tmp_path / "v"))
    package = tmp_path / "pkg"
    shutil.copytree(policies._PACKAGE, package, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(policies, "_PACKAGE", package)
    policies.code_fingerprint.cache_clear()
    try:
        same = VerdictCache(tmp_path / "v")
        report(archive, policy, same)
        module = package / "verdicts" / "build.py"
        module.write_text(module.read_text(encoding="utf-8") + "\n# edited\n", encoding="utf-8")
        policies.code_fingerprint.cache_clear()
        edited = VerdictCache(tmp_path / "v")
        report(archive, policy, edited)
    finally:
        policies.code_fingerprint.cache_clear()
    assert same.misses == 0 and same.hits > 0  # a copy of the same modules still hits
    assert edited.hits == 0 and edited.misses == same.hits


def test_an_edited_policy_misses(archive: list[str], tmp_path: Path) -> None:
    from kvrules.resources import rules_dir
    folder = tmp_path / "policy"
    shutil.copytree(str(rules_dir()), folder, ignore=shutil.ignore_patterns("tests"))
    report(archive, api.load_policy(folder), VerdictCache(tmp_path / "v"))
    rule = sorted(folder.glob("*.yaml"))[0]
    rule.write_text(rule.read_text(encoding="utf-8") + "\n# edited\n", encoding="utf-8")
    edited = VerdictCache(tmp_path / "v")
    report(archive, api.load_policy(folder), edited)
    assert edited.hits == 0


def test_a_corrupt_entry_is_recomputed_and_rewritten(archive: list[str],
                                                     tmp_path: Path) -> None:
    policy = api.load_policy()
    expected = report(archive, policy, VerdictCache(tmp_path / "v"))
    entry = next((tmp_path / "v").rglob("*.verdict"))
    entry.write_bytes(entry.read_bytes()[:-7] + b"garbage")
    repaired = VerdictCache(tmp_path / "v")
    assert report(archive, policy, repaired) == expected and repaired.misses == 1
    final = VerdictCache(tmp_path / "v")
    assert report(archive, policy, final) == expected and final.misses == 0


def test_a_symlinked_file_is_never_cached(archive: list[str], tmp_path: Path) -> None:
    rank = next(Path(archive[0]).rglob("benchmark*.json"))
    target = tmp_path / "outside.json"
    shutil.move(str(rank), target)
    rank.symlink_to(target)
    cache = VerdictCache(tmp_path / "v")
    policy = api.load_policy()
    report(archive[:1], policy, cache)
    assert verdicts.info(tmp_path / "v")[0] == 0 and cache.misses == 1


def run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "kvrules", *args], capture_output=True,
                          env=env, cwd=ROOT.parent, timeout=120)


def test_cli_runs_agree_cold_warm_and_uncached_and_cache_commands(
        archive: list[str], tmp_path: Path) -> None:
    env = {**os.environ}
    where = ["--cache", str(tmp_path / "v")]
    runs = [run(["classify", *archive, "-f", fmt, *where], env)
            for fmt in ("json", "json", "table", "table")]
    runs += [run(["classify", *archive, "-f", fmt, "--no-cache"], env) for fmt in ("json", "table")]
    assert runs[0].stdout == runs[1].stdout == runs[4].stdout
    assert runs[2].stdout == runs[3].stdout == runs[5].stdout
    assert len({r.returncode for r in runs}) == 1 and not any(r.stderr for r in runs)
    info = run(["cache", "info", *where], env)
    assert info.returncode == 0 and b" 0 verdicts" not in info.stdout
    assert run(["cache", "prune", "--older-than", "1", *where], env).stdout.endswith(
        b" 0 verdicts deleted\n")
    assert run(["cache", "prune", *where], env).returncode == 0
    assert verdicts.info(tmp_path / "v") == (0, 0)


def test_parquet_dataset_has_one_row_per_point_partitioned_by_campaign(
        archive: list[str], tmp_path: Path) -> None:
    import pyarrow.dataset as ds
    out = tmp_path / "dataset"
    expected = api.classify(archive)
    status = 1 if any(c.status == "error" for c in expected.cells) else 0
    for _ in range(2):  # the second run replaces the first dataset as a whole
        done = run(["classify", *archive, "-f", "parquet", "-o", str(out), "--no-cache"],
                   {**os.environ})
        assert done.returncode == status and not done.stderr and not done.stdout
    table = ds.dataset(out, format="parquet", partitioning="hive").to_table()
    points = [(c.campaign, p.cell_id, p.benchmark_id, p.kv_seed_regime, p.eligible)
              for c in expected.cells for p in c.points]
    got = sorted(zip(*(table.column(n).to_pylist() for n in (
        "campaign", "cell_id", "benchmark_id", "kv_seed_regime", "eligible"))))
    assert got == sorted(points)
    assert len([p for p in out.iterdir() if p.name.startswith("campaign=")]) == len(archive)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".dataset")]
    bad = run(["classify", *archive, "-f", "parquet"], {**os.environ})
    assert bad.returncode == 2 and b"--output DIR" in bad.stderr


WARM_RUN = """
import sys
from kvrules import api
from kvrules.cache.verdicts import VerdictCache
paths, folder = sys.argv[1:-1], sys.argv[-1]
policy = api.load_policy()
cache = VerdictCache(__import__("pathlib").Path(folder))
cells = list(api.iter_classify(paths, policy, cache=cache))
print(len(cells), cache.hits, cache.misses, policy.classifier.engine._proc is not None,
      sorted(m for m in ("durable", "jsonschema", "distributed") if m in sys.modules))
"""


def test_a_warm_run_starts_no_engine_compiles_nothing_and_imports_no_durable_rules(
        archive: list[str], tmp_path: Path) -> None:
    run = [sys.executable, "-c", WARM_RUN, *archive, str(tmp_path / "v")]
    cold = subprocess.run(run, capture_output=True, text=True, check=True).stdout.split(" ", 3)
    warm = subprocess.run(run, capture_output=True, text=True, check=True).stdout.split(" ", 3)
    assert cold[0] == warm[0] and cold[1] == "0" and cold[3].startswith("True")
    # durable-rules is imported by the engine worker only; the policy cache hands over a
    # compiled policy (compiling would load jsonschema)
    assert warm[1:3] == [cold[0], "0"] and warm[3].strip() == "False []"


def test_diff_readiness_and_aggregate_reuse_the_cache_classify_filled(
        archive: list[str], tmp_path: Path) -> None:
    """Reviewing a rule change: the base side comes from the cache, only the head side is
    evaluated, and a second diff evaluates nothing; the outputs do not change."""
    env = {**os.environ}
    where = ["--cache", str(tmp_path / "v")]
    cells = len(archive)
    def entries() -> dict[Path, int]:  # written (a new inode) only when its cell was evaluated
        return {p: p.stat().st_ino for p in (tmp_path / "v").rglob("*")
                if p.is_file() and p.suffix != verdicts.MEMO_SUFFIX}  # (memos: when settled)

    assert run(["classify", *archive, *where], env).returncode == 1
    assert verdicts.info(tmp_path / "v")[0] == cells
    base = entries()
    head = ["--head-param", "dense_synthetic_kv=false"]
    first = run(["diff", *archive, *head, *where], env)
    assert verdicts.info(tmp_path / "v")[0] == 2 * cells  # only the head side was added
    after = entries()
    assert {p: after[p] for p in base} == base  # the base side was read, not rewritten
    again = run(["diff", *archive, *head, *where], env)
    uncached = run(["diff", *archive, *head, "--no-cache"], env)
    assert first.stdout == again.stdout == uncached.stdout and b"changed" in first.stdout
    assert entries() == after
    for command in (["readiness", *archive], ["aggregate", *archive, "-o",
                                              str(tmp_path / "rows.csv")]):
        cached, plain = run([*command, *where], env), run([*command, "--no-cache"], env)
        assert (cached.returncode, cached.stdout) == (plain.returncode, plain.stdout)
    assert verdicts.info(tmp_path / "v")[0] == 2 * cells


@pytest.fixture
def settled(monkeypatch: pytest.MonkeyPatch) -> None:
    """Files count as settled at once (the copies a test makes are brand new)."""
    monkeypatch.setattr(verdicts, "RACY_NS", 0)


def memos(folder: Path) -> list[Path]:
    return sorted(folder.rglob(f"*{verdicts.MEMO_SUFFIX}"))


def test_an_unchanged_archive_is_listed_not_read(archive: list[str], tmp_path: Path,
                                                 settled: None,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The second run takes every file digest from the memo, even under another policy."""
    policy = api.load_policy()
    expected = report(archive, policy, VerdictCache(tmp_path / "v"))
    assert len(memos(tmp_path / "v")) == len(archive)
    def unread(listing: object) -> None:
        raise AssertionError("an unchanged file was read again")
    monkeypatch.setattr(verdicts, "_content_digest", unread)
    warm = VerdictCache(tmp_path / "v")
    assert report(archive, policy, warm) == expected and warm.misses == 0
    legacy = policy.with_parameters(dense_synthetic_kv=False)
    other = VerdictCache(tmp_path / "v")
    assert report(archive, legacy, other) == report(archive, legacy, None)
    assert other.hits == 0 and other.misses == len(archive)


def test_a_same_size_edit_with_its_mtime_set_back_is_seen(archive: list[str],
                                                          tmp_path: Path,
                                                          settled: None) -> None:
    """The change time moves whatever the owner does to the mtime: the file is read again."""
    policy = api.load_policy()
    report(archive, policy, VerdictCache(tmp_path / "v"))
    rank = next(Path(archive[0]).rglob("benchmark*.json"))
    before = rank.stat()
    data = rank.read_bytes()
    at = data.index(b'"point_type"')
    rank.write_bytes(data[:at] + b'"point_typf"' + data[at + 12:])  # same size, other bytes
    os.utime(rank, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert rank.stat().st_size == before.st_size and rank.stat().st_mtime_ns == before.st_mtime_ns
    again = VerdictCache(tmp_path / "v")
    assert report(archive, policy, again) == report(archive, policy, None)
    assert again.misses == 1 and again.hits == len(archive) - 1


def test_files_changed_just_before_hashing_are_not_memoized(archive: list[str],
                                                            tmp_path: Path) -> None:
    """Within RACY_NS of a change, a later change could keep the same status: no memo."""
    policy = api.load_policy()
    report(archive, policy, VerdictCache(tmp_path / "v"))
    assert memos(tmp_path / "v") == [] and verdicts.info(tmp_path / "v")[0] == len(archive)


def test_a_corrupt_memo_is_read_again_and_pruned_with_the_verdicts(
        archive: list[str], tmp_path: Path, settled: None) -> None:
    policy = api.load_policy()
    expected = report(archive, policy, VerdictCache(tmp_path / "v"))
    memo = memos(tmp_path / "v")[0]
    memo.write_bytes(memo.read_bytes()[:-3] + b"bad")
    again = VerdictCache(tmp_path / "v")
    assert report(archive, policy, again) == expected and again.misses == 0
    assert verdicts.prune(tmp_path / "v") == len(archive)
    assert memos(tmp_path / "v") == [] and verdicts.info(tmp_path / "v") == (0, 0)


def test_a_linked_cell_folder_is_never_cached(archive: list[str], tmp_path: Path) -> None:
    cell = next(p for p in (Path(archive[0]) / "cells").iterdir() if p.is_dir())
    shutil.move(str(cell), tmp_path / "elsewhere")
    cell.symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    cache = VerdictCache(tmp_path / "v")
    policy = api.load_policy()
    assert report(archive[:1], policy, cache) == report(archive[:1], policy, None)
    assert verdicts.info(tmp_path / "v")[0] == 0 and cache.misses == 1


def test_progress_shows_the_cells_that_came_from_the_cache(archive: list[str],
                                                           tmp_path: Path) -> None:
    """With --progress the stderr says how many cells were read back; the report does not."""
    where = ["--cache", str(tmp_path / "v"), "--progress", "-f", "jsonl"]
    cold = run(["classify", *archive, *where], {**os.environ})
    warm = run(["classify", *archive, *where], {**os.environ})
    assert cold.stdout == warm.stdout and cold.returncode == warm.returncode
    assert f"0 of {len(archive)} cells from the verdict cache".encode() in cold.stderr
    n = len(archive)
    assert f"{n} of {n} cells from the verdict cache".encode() in warm.stderr


def test_a_verdict_msgpack_cannot_hold_is_not_cached(tmp_path: Path) -> None:
    """A lone surrogate (from an undecodable file name) has no UTF-8 form: the verdict is
    evaluated each run instead of stored, and putting it raises nothing."""
    from kvrules.cache.verdicts import VerdictCache
    from kvrules.verdicts.model import CellVerdict

    cache = VerdictCache(tmp_path / "verdicts")
    verdict = CellVerdict(campaign="c\udcff", cell_id="x", workload_kind=None, status="ok",
                          errors=(), qualifications={}, points=())
    cache.put("ab" * 32, verdict)
    assert cache.get("ab" * 32) is None and not list((tmp_path / "verdicts").rglob("*"))[1:]
