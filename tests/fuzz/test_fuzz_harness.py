"""The fuzz harness itself: mutants are reproducible by seed and the oracle catches failures.

These tests do not depend on kvrules surviving the mutants (see test_fuzz_sample.py for that).
"""
from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from . import mutations as mut
from .oracle import Expectation, Run, check
from .run import baseline_cells, fuzz_one, run_kvrules, untouched

REPO = Path(__file__).resolve().parents[2]


def classes(run: Run, expect: Expectation | None = None) -> set[str]:
    return {f.cls for f in check(run, expect)}


@settings(max_examples=12, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(seed=st.integers(0, 2 ** 32), index=st.integers(0, 20_000))
def test_same_seed_and_index_give_the_same_mutant(tmp_path_factory, seed: int, index: int) -> None:
    a = mut.build_mutant(seed, index, tmp_path_factory.mktemp("a"))
    b = mut.build_mutant(seed, index, tmp_path_factory.mktemp("b"))
    assert (a.kind, a.descriptions, a.touched) == (b.kind, b.descriptions, b.touched)
    assert 1 <= len(a.descriptions) <= 3
    assert mut.tree_digest(a.folder) == mut.tree_digest(b.folder)
    for m in (a, b):
        mut.remove_tree(m.folder)


def test_seeds_differ_and_originals_are_untouched(tmp_path: Path) -> None:
    before = mut.tree_digest(mut.EXAMPLES), mut.tree_digest(mut.RULES)
    one = [mut.build_mutant(1, i, tmp_path / "1").descriptions for i in range(8)]
    two = [mut.build_mutant(2, i, tmp_path / "2").descriptions for i in range(8)]
    assert one != two
    assert (mut.tree_digest(mut.EXAMPLES), mut.tree_digest(mut.RULES)) == before


def test_every_mutation_operator_applies(tmp_path: Path) -> None:
    for table, source in ((mut.CAMPAIGN_MUTATIONS, None), (mut.RULE_MUTATIONS, mut.RULES)):
        for name, (_, op) in sorted(table.items()):
            folder = tmp_path / f"{name}-{id(table)}"
            if source is None:
                folder.mkdir()
                for c in sorted(p for p in mut.EXAMPLES.iterdir() if p.is_dir()):
                    shutil.copytree(c, folder / c.name)
            else:
                shutil.copytree(source, folder)
            applied = None
            for attempt in range(10):  # some draws may not apply; one of ten must
                applied = op(random.Random(attempt), folder)
                if applied is not None:
                    break
            assert applied is not None, name
            assert applied.description
            mut.remove_tree(folder)


def fake(returncode: int | None, stderr: str = "", stdout: str = "", report: bool = False,
         timed_out: bool = False) -> Run:
    return Run("classify", ["python", "-m", "kvrules"], returncode, stdout, stderr,
               report_expected=report, timed_out=timed_out)


def test_oracle_flags_a_signal_and_a_traceback() -> None:
    crash = fake(-11, stderr="Traceback (most recent call last):\n  ...\nSegfault\n", report=True)
    assert classes(crash) == {"signals", "tracebacks"}


def test_oracle_flags_hang_bad_exit_and_non_json() -> None:
    assert classes(fake(None, timed_out=True)) == {"hangs"}
    assert classes(fake(3)) == {"bad_exit"}
    assert classes(fake(0, stdout="not json", report=True)) == {"invalid_report"}
    assert classes(fake(1, stdout="{}", report=True)) == {"invalid_report"}
    assert classes(fake(2, stderr="error: bad rules\n", report=True)) == set()


def _pristine_report(tmp_path: Path) -> tuple[dict, str]:
    run = run_kvrules("classify", ["classify", str(mut.EXAMPLES), "--format", "json"], 60,
                      tmp_path, True)
    assert run.returncode in (0, 1), run.stderr
    return json.loads(run.stdout), str(mut.EXAMPLES)


def test_oracle_accepts_the_pristine_examples_and_flags_doctored_reports(tmp_path: Path) -> None:
    doc, root = _pristine_report(tmp_path)
    every = untouched(set())
    assert len(every) == sum(len(c) for c in baseline_cells().values()) >= 9

    def judge(d: dict, cells: set = every) -> set[str]:
        return classes(fake(1, stdout=json.dumps(d), report=True), Expectation(cells, root))

    assert judge(doc) == set()
    lost = json.loads(json.dumps(doc))
    dropped = lost["cells"].pop(0)
    assert judge(lost) == {"lost_cells"}
    # the dropped cell is not required any more once a mutation touched it
    name = Path(dropped["campaign"]).name
    assert judge(lost, untouched({(name, "*")})) == set()
    assert judge(lost, untouched({(name, dropped["cell_id"])})) == set()
    bad = json.loads(json.dumps(doc))
    err = next(c for c in bad["cells"] if c["status"] == "error")
    err["points"][0]["eligible"] = True
    assert judge(bad) == {"eligible_in_error", "invalid_report"}  # the schema forbids it too
    bad["summary"].pop("cells")
    assert "invalid_report" in judge(bad)
    assert judge({"cells": "nonsense"}) == {"invalid_report", "lost_cells"}


def test_eligible_in_error_is_flagged_even_when_the_schema_allows_it(tmp_path: Path) -> None:
    doc, root = _pristine_report(tmp_path)
    err = next(c for c in doc["cells"] if c["status"] == "error")
    for point in err["points"]:
        point.update(eligible=True)
    found = check(fake(1, stdout=json.dumps(doc), report=True), Expectation(set(), root))
    assert "eligible_in_error" in {f.cls for f in found}


def test_touched_maps_paths_to_cells(tmp_path: Path) -> None:
    root = tmp_path
    assert mut.touched_by(root, root / "c" / "collection-plan.json") == ("c", "*")
    assert mut.touched_by(root, root / "c" / "cells" / "x" / "raw" / "w" / "b.json") == ("c", "x")
    assert mut.touched_by(root, root / "loose.json") == mut.ALL
    assert untouched({mut.ALL}) == set()


def test_copy_tree_keeps_fifos_and_symlinks_without_opening_them(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "d").mkdir(parents=True)
    os.mkfifo(src / "d" / "fifo")
    (src / "d" / "zero").symlink_to("/dev/zero")
    (src / "d" / "loop").symlink_to("..")
    (src / "f.json").write_text("{}")
    mut.copy_tree(src, tmp_path / "dst")
    assert mut.tree_digest(src) == mut.tree_digest(tmp_path / "dst")


def test_cli_lists_mutants_from_the_repo_root() -> None:
    for argv in (["-m", "tests.fuzz"], ["tests/fuzz/run.py"]):
        out = subprocess.run([sys.executable, *argv, "--list", "--seed", "7", "--mutants", "3"],
                             cwd=REPO, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        assert [line.split(" ", 1)[0] for line in out.stdout.splitlines()] == ["0", "1", "2"]
    again = subprocess.run([sys.executable, "-m", "tests.fuzz", "--list", "--seed", "7",
                            "--only", "1"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert again.stdout.splitlines() == out.stdout.splitlines()[1:2]


def test_fuzz_one_keeps_a_failing_mutant(tmp_path: Path, monkeypatch) -> None:
    """A failing mutant is copied to --keep with its mutations and stderr."""
    from . import run as runner

    def crashing(label, args, timeout, cwd, report_expected):
        return Run(label, ["python", *args], -11, "", "Traceback (most recent call last):\nBoom\n",
                   report_expected=report_expected)

    monkeypatch.setattr(runner, "run_kvrules", crashing)
    work, keep = tmp_path / "work", tmp_path / "keep"
    work.mkdir()
    keep.mkdir()
    res = fuzz_one(5, 3, work, 5, keep)
    assert {f.cls for f in res.findings} == {"signals", "tracebacks"}
    assert res.kept is not None and (res.kept / "README.txt").is_file()
    text = (res.kept / "README.txt").read_text()
    assert "--seed 5 --only 3" in text and all(d in text for d in res.descriptions)
    assert not (work / "m00003").exists()


def test_rule_mutations_never_expand_an_alias_bomb(tmp_path: Path) -> None:
    """A later mutation must not walk a billion-laughs file in the harness process."""
    folder = tmp_path / "rules"
    shutil.copytree(mut.RULES, folder)
    for path in mut.policy_files(folder):  # every policy file becomes a 9**12 bomb
        bomb = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
        bomb += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 12)]
        path.write_text("\n".join(bomb) + "\nrules: *a11\n", encoding="utf-8")
    for op in (mut.r_inf, mut.r_list_operand, mut.r_drop_key, mut.r_many_rules):
        assert op(random.Random(0), folder) is None
    shared: list = ["x"] * 9
    for _ in range(12):
        shared = [shared] * 9
    try:
        mut._nodes(shared)
    except mut.TooBig:
        pass
    else:
        raise AssertionError("walked 9**12 nodes")


def test_text_mutations_apply_after_a_re_encoding(tmp_path: Path) -> None:
    """A rule file re-encoded as UTF-16 by one mutation stays a valid target for the next.

    Seed 3 mutants 226 and 7883 (re-encode, then a duplicate key or deep nesting) made the
    harness itself raise UnicodeDecodeError in the 10,000-mutant run.
    """
    folder = tmp_path / "rules"
    shutil.copytree(mut.RULES, folder)
    target = folder / "engine_identity.yaml"
    original = target.read_bytes()
    target.write_bytes(original.decode("utf-8").encode("utf-16"))
    utf16 = target.read_bytes()
    for op in (mut.r_broken_yaml, mut.r_alias_bomb, mut.r_deep_nesting, mut.r_unknown_tag,
               mut.r_dup_keys):
        for path in mut.policy_files(folder):
            if path != target:
                path.unlink()
        target.write_bytes(utf16)
        applied = op(random.Random(1), folder)
        assert applied is not None, op.__name__
        assert target.read_bytes() != utf16, op.__name__
        shutil.rmtree(folder)
        shutil.copytree(mut.RULES, folder)


def test_seed_3_mutants_that_broke_the_harness_now_build(tmp_path: Path) -> None:
    for index in (226, 1924, 4017, 7883):
        built = mut.build_mutant(3, index, tmp_path / str(index))
        assert built.kind == "rules" and built.descriptions
        mut.remove_tree(built.folder)


def test_output_mutants_are_reproducible_and_judged(tmp_path: Path) -> None:
    from . import outputs
    index = next(i for i in range(100) if outputs.chosen(7, i))
    a = outputs.build_output_mutant(7, index, tmp_path / "a")
    b = outputs.build_output_mutant(7, index, tmp_path / "b")
    assert (a.argv, a.output, a.runs) == (b.argv, b.output, b.runs)
    before = outputs.digests(a.folder)
    plan = next(a.folder.glob("in/*/collection-plan.json"))
    plan.write_text("{}", encoding="utf-8")
    (a.cwd / "foreign" / "thesis.txt").unlink()
    (a.folder / "stray.txt").write_text("x", encoding="utf-8")
    done = Run("output run 1", ["kvrules"], 2, "", "")
    found = {f.cls for f in outputs.judge(done, a, before, outputs.digests(a.folder))}
    assert {"stray_files", "foreign_lost"} <= found
    a.evidence = "in"
    found = {f.cls for f in outputs.judge(done, a, before, outputs.digests(a.folder))}
    assert "inputs_changed" in found
    assert outputs.DATASET_MARKER == __import__("kvrules.verdicts.dataset",
                                                fromlist=["MARKER"]).MARKER
    for m in (a, b):
        outputs.remove_output_mutant(m.folder)
