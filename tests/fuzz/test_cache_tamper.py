"""The cache mutants' harness: its oracle catches code that ran and changed reports, and
its planted pickle really would run if anything unpickled it."""
from __future__ import annotations

import pickle
import random
from pathlib import Path

from .cache_tamper import TAMPERINGS, Planted, judge


def test_the_oracle_flags_a_marker_and_a_changed_report(tmp_path: Path) -> None:
    marker, report = tmp_path / "marker", tmp_path / "report.jsonl"
    report.write_bytes(b"same")
    assert judge(marker, report, b"same") == []
    marker.write_text("")
    report.write_bytes(b"other")
    assert {f.cls for f in judge(marker, report, b"same")} == {"cache_code_ran",
                                                               "cache_changed_report"}


def test_the_planted_pickle_runs_when_unpickled(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    entry = tmp_path / "cache" / "policies" / "k.policy"
    entry.parent.mkdir(parents=True)
    entry.write_bytes(b"x")
    TAMPERINGS["pickle"](random.Random(0), entry, marker)
    from kvrules.cache import store
    payload = store.read_entry(entry)
    assert payload is not None and not marker.exists()
    pickle.loads(payload)
    assert marker.exists()


def test_every_tampering_applies(tmp_path: Path) -> None:
    for name, tamper in sorted(TAMPERINGS.items()):
        folder = tmp_path / name / "verdicts" / "ab"
        folder.mkdir(parents=True)
        for k in ("ab1.verdict", "ab2.verdict"):
            (folder / k).write_bytes(b"kvrules-cache-2\n" + bytes(40))
        before = (folder / "ab1.verdict").read_bytes()
        assert tamper(random.Random(1), folder / "ab1.verdict", tmp_path / "m")
        assert not (tmp_path / "m").exists()
        assert name == "swap" or (folder / "ab1.verdict").read_bytes() != before
    assert isinstance(Planted("x").__reduce__(), tuple)
