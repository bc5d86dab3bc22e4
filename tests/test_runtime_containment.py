"""Containment: malformed evidence never reaches the engine, an engine crash costs
one cell (never the process), and interrupts exit 130/143 without output.

Whole-process tests run ``python -m kvrules`` in a subprocess with a timeout, so a crash
shows up as a signal in the return code instead of killing the test runner.
"""
from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import EXAMPLES

from kvrules import api
from kvrules.artifacts.discover import discover
from kvrules.artifacts.load import load_cell
from kvrules.artifacts.model import NonFiniteNumber
from kvrules.diagnostics import RANK_SET_MISMATCH, evidence_error
from kvrules.facts.extract import extract_cell
from kvrules.backend.durable import encode
from kvrules.backend.durable.supervisor import EngineSupervisor

CRASH = Path(__file__).resolve().parent / "files" / "crash"
LONG_MARK = "@LONG@"
"""The long-string repro is stored small: the test inflates this mark to 1,000,000 chars."""
HOOK = "_KVRULES_TEST_ENGINE_CRASH"
MOE_CELL = "fpm-qwen3-30b-a3b-decode-tp2"
"""A cell id that only examples/moe-tp-approved-skip has."""
TIMEOUT = 120


def _examples() -> list[str]:
    return [str(p) for p in sorted(EXAMPLES.iterdir()) if p.is_dir()]


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if k != HOOK}
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "kvrules", *args], capture_output=True,
                          text=True, timeout=TIMEOUT, env=full_env)


def _crash_campaign(tmp_path: Path, name: str) -> Path:
    target = tmp_path / name
    shutil.copytree(CRASH / name, target)
    plan = target / "collection-plan.json"
    text = plan.read_text(encoding="utf-8")
    if LONG_MARK in text:
        plan.write_text(text.replace(LONG_MARK, "A" * 1_000_000), encoding="utf-8")
    return target


@pytest.mark.parametrize("name, code", [
    ("crash-dup-rank-delete-state", "rank_set_mismatch"),
    ("crash-dup-benchmark-id-delete-state", "artifact_invalid"),
    ("crash-long-string-assert-fact", "fact_invalid"),
])
def test_crash_reproducers_are_evidence_errors_not_signals(tmp_path, name, code):
    campaign = _crash_campaign(tmp_path, name)
    result = _run("classify", "--no-cache", str(campaign), "--format", "json")
    assert result.returncode == 1, (result.returncode, result.stderr[-2000:])
    report = json.loads(result.stdout)
    (cell,) = report["cells"]
    assert cell["status"] == "error"
    assert code in {e["code"] for e in cell["errors"]}
    assert "engine_failure" not in {e["code"] for e in cell["errors"]}
    assert all(p["status"] == "error" and not p["eligible"] for p in cell["points"])


def test_the_long_string_is_named_by_file_and_pointer(tmp_path):
    campaign = _crash_campaign(tmp_path, "crash-long-string-assert-fact")
    report = api.classify([str(campaign)], api.load_policy())
    (error,) = report.cells[0].errors
    assert error.code == "fact_invalid"
    assert error.file == "collection-plan.json" and error.pointer.startswith("/cells/0")
    assert len(error.message) < 300


def _cells(stdout: str) -> list[dict]:
    return json.loads(stdout)["cells"]


def test_a_killed_engine_worker_costs_exactly_one_cell():
    baseline = _run("classify", "--no-cache", *_examples(), "--format", "json")
    killed = {j: _run("classify", "--no-cache", *_examples(), "--format", "json", "--jobs", j,
                      env={HOOK: MOE_CELL}) for j in ("1", "2")}
    assert killed["1"].stdout == killed["2"].stdout
    assert killed["1"].returncode == 1 and not killed["1"].stderr
    before, after = _cells(baseline.stdout), _cells(killed["1"].stdout)
    assert len(before) == len(after)
    for old, new in zip(before, after):
        if new["cell_id"] != MOE_CELL:
            assert new == old
            continue
        assert new["status"] == "error"
        (error,) = new["errors"]
        assert error["code"] == "engine_failure"
        assert "SIGSEGV" in error["message"] and len(error["message"]) <= 300
        assert all(p["status"] == "error" and not p["eligible"] for p in new["points"])


def test_a_retried_worker_gives_the_same_bytes_with_any_jobs():
    baseline = _run("classify", "--no-cache", *_examples(), "--format", "json")
    for jobs in ("1", "2"):
        once = _run("classify", "--no-cache", *_examples(), "--format", "json", "--jobs", jobs,
                    env={HOOK: MOE_CELL + ":once"})
        assert (once.returncode, once.stdout) == (baseline.returncode, baseline.stdout)


def test_library_survives_a_crashing_engine_and_recovers(monkeypatch):
    monkeypatch.setenv(HOOK, MOE_CELL)
    policy = api.load_policy()
    report = api.classify(_examples(), policy)
    failed = [c for c in report.cells if any(e.code == "engine_failure" for e in c.errors)]
    assert [c.cell_id for c in failed] == [MOE_CELL]
    monkeypatch.delenv(HOOK)
    policy.classifier.close()  # the next worker is forked without the hook
    again = api.classify([str(EXAMPLES / "moe-tp-approved-skip")], policy)
    assert again.cells[0].status == "ok"


def test_the_parent_process_never_imports_durable():
    code = ("import sys; from kvrules import api; "
            f"r = api.classify({_examples()!r}); "
            "assert 'durable' not in sys.modules and 'durable_rules_engine' not in sys.modules;"
            "print(len(r.cells))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=TIMEOUT)
    assert result.returncode == 0, result.stderr[-2000:]


def test_structural_cells_never_reach_the_engine(monkeypatch):
    policy = api.load_policy()
    facts = extract_cell(load_cell(discover([str(EXAMPLES / "dense-native-skip-format")])[0]))
    facts.diagnostics.append(evidence_error(RANK_SET_MISMATCH, "dp.rank 0 appears twice", "x"))

    def boom(*args, **kwargs):
        raise AssertionError("the engine was called")
    monkeypatch.setattr(EngineSupervisor, "evaluate", boom)
    verdict = policy.classifier.classify_facts(facts)
    assert verdict.status == "error"
    assert [e.code for e in verdict.errors] == [RANK_SET_MISMATCH]
    assert all(p.status == "error" and not p.eligible for p in verdict.points)


def test_repeated_fact_ids_are_refused_before_the_engine(monkeypatch):
    policy = api.load_policy()
    facts = extract_cell(load_cell(discover([str(EXAMPLES / "dense-native-skip-format")])[0]))
    facts.facts.append(facts.facts[0])
    monkeypatch.setattr(EngineSupervisor, "evaluate", lambda *a, **k: pytest.fail("engine"))
    verdict = policy.classifier.classify_facts(facts)
    assert verdict.status == "error"
    assert {e.code for e in verdict.errors} == {"fact_invalid"}
    assert any("appears twice" in e.message for e in verdict.errors)


@pytest.mark.parametrize("value, refused", [
    (None, False), (True, False), (2**63 - 1, False), (2**70, False), (1.5e-7, False),
    ("x" * encode.MAX_STRING_BYTES, False), ({"a": [1, "b"]}, False),
    ("\u00e9" * (encode.MAX_STRING_BYTES // 2), False),
    (math.inf, True), (-math.inf, True), (math.nan, True), (NonFiniteNumber("NaN"), True),
    ("x" * (encode.MAX_STRING_BYTES + 1), True), (["x" * (encode.MAX_STRING_BYTES + 1)], True),
    # the limit is in bytes as the engine holds them: UTF-8, escapes written out
    ("\u00e9" * (encode.MAX_STRING_BYTES // 2 + 1), True), ("\u00e9" * 32_768, True),
    ('"' * (encode.MAX_STRING_BYTES // 2 + 1), True), ("\x01" * 11_000, True),
    ({1: "a"}, True), ({"a", "b"}, True), (b"bytes", True), (("tuple",), True),
    # containers reach the engine as bounded ASCII text (encode.encode_container), so a
    # non-finite number or a long string nested inside one is harmless (raw kvwarm and
    # engine blocks hold whatever fields nobody validates)
    ([1, {"k": math.inf}], False), ({"a": [NonFiniteNumber("NaN")]}, False),
    ({"a": "x" * (encode.MAX_STRING_BYTES + 1)}, False),
])
def test_only_json_values_reach_the_engine(value, refused):
    assert (encode.value_problem(value) is not None) is refused


def test_containers_reach_the_engine_as_bounded_text():
    big = {"a": "x" * (encode.MAX_STRING_BYTES + 1), "b": [NonFiniteNumber("NaN"), "\ud800"]}
    text = encode.encode_scalar(big)
    assert text.startswith("h:") and len(text) < 100 and text.isascii()
    assert encode.encode_scalar(dict(big)) == text
    assert encode.encode_scalar({"a": ["\ud800"]}) == 'j:{"a":["\\ud800"]}'


def _children(pid: int) -> list[str]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    try:
        return path.read_text().split()
    except OSError:
        return []


def _engine_running(pid: int) -> bool:
    """Whether a child of ``pid`` has loaded durable-rules: the engine worker, forked once
    the run has its job and policy (the first child is the command-line parser)."""
    for child in _children(pid):
        try:
            if "durable_rules_engine" in Path(f"/proc/{child}/maps").read_text():
                return True
        except OSError:
            continue
    return False


@pytest.fixture(scope="module")
def big_corpus(tmp_path_factory) -> list[str]:
    root = tmp_path_factory.mktemp("big")
    paths = []
    for i in range(30):
        for example in _examples():
            target = root / f"{i:02d}-{Path(example).name}"
            shutil.copytree(example, target)
            paths.append(str(target))
    return paths


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")
@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
@pytest.mark.parametrize("jobs", ["1", "2"])
def test_interrupt_exits_promptly_without_output(tmp_path, big_corpus, sig, code, jobs):
    out = tmp_path / "report.json"
    env = {k: v for k, v in os.environ.items() if k != HOOK}
    proc = subprocess.Popen([sys.executable, "-m", "kvrules", "classify", "--no-cache", *big_corpus,
                             "--format", "json", "--jobs", jobs, "-o", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 60
        while not _engine_running(proc.pid) and proc.poll() is None \
                and time.monotonic() < deadline:
            time.sleep(0.01)  # the engine worker exists: classification has started
        assert proc.poll() is None, "the run ended before it could be interrupted"
        proc.send_signal(sig)
        stdout, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == code, stderr[-2000:]
    assert stdout == ""
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == []  # no temporary file left either


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")
def test_interrupt_with_extraction_workers_running_leaves_no_process(tmp_path, big_corpus):
    """Ctrl-C once the engine worker and both extraction workers run: the command exits
    130 without output, and none of its workers outlives it."""
    out = tmp_path / "report.jsonl"
    env = {k: v for k, v in os.environ.items() if k != HOOK}
    proc = subprocess.Popen([sys.executable, "-m", "kvrules", "classify", "--no-cache",
                             *big_corpus, "--format", "jsonl", "--jobs", "2", "-o", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    seen: set[str] = set()
    try:
        deadline = time.monotonic() + 60
        while len(_children(proc.pid)) < 3 and proc.poll() is None \
                and time.monotonic() < deadline:
            time.sleep(0.005)
        seen.update(_children(proc.pid))
        assert proc.poll() is None and len(seen) >= 3, "no moment with three workers"
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, stderr[-2000:]
    assert stdout == "" and not out.exists()
    deadline = time.monotonic() + 5
    while any(map(_running, seen)) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert [pid for pid in seen if _running(pid)] == []


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")
def test_a_finished_run_leaves_no_process_and_its_whole_report(tmp_path, big_corpus):
    """The command ends without the interpreter's clean-up (``cli.app._end``) and stops its
    engine worker before the report's last sync: none of its workers outlives it, and the
    report it wrote, or printed on stdout, is whole (the same bytes either way)."""
    out = tmp_path / "report.jsonl"
    env = {k: v for k, v in os.environ.items() if k != HOOK}
    args = [sys.executable, "-m", "kvrules", "classify", "--no-cache", *big_corpus,
            "--format", "jsonl", "--jobs", "2"]
    proc = subprocess.Popen([*args, "-o", str(out)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    seen: set[str] = set()
    try:
        while proc.poll() is None:
            seen.update(_children(proc.pid))
            time.sleep(0.002)
        stderr = proc.communicate(timeout=60)[1]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 1, stderr[-2000:]  # the examples hold evidence errors
    assert len(seen) >= 3, "never saw the engine worker and both extraction workers"
    deadline = time.monotonic() + 5
    while any(map(_running, seen)) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert [pid for pid in seen if _running(pid)] == []
    printed = subprocess.run(args, capture_output=True, env=env, timeout=120)
    assert printed.returncode == 1
    report = out.read_bytes()
    assert printed.stdout == report
    lines = report.splitlines()
    assert json.loads(lines[0])["kind"] == "report" and json.loads(lines[-1])["kind"] == "summary"
    assert json.loads(lines[-1])["cells"] == len(big_corpus)


def _running(pid: str) -> bool:
    """Whether process ``pid`` exists and is not a zombie (one waiting to be reaped)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")
def _interruptible() -> None:
    """In the child: SIGINT as an interactive shell gives it. A process that starts with
    SIGINT ignored keeps it ignored (Python's rule for background jobs), and a test session
    started in the background passes that on: the script then looped on, classifying,
    after the test's Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])


def test_keyboard_interrupt_in_the_library_propagates(tmp_path):
    script = tmp_path / "loop.py"
    script.write_text(
        "import faulthandler, signal, sys\n"
        "faulthandler.register(signal.SIGUSR1, all_threads=True)  # where it hangs, if it does\n"
        "from kvrules import api\n"
        "policy = api.load_policy()\n"
        f"paths = {_examples()!r}\n"
        "while True:\n"
        "    policy.classifier._memo.clear()  # every cell goes to the engine\n"
        "    report = api.classify(paths, policy)\n"
        "    bad = [e for c in report.cells for e in c.errors if e.code == 'engine_failure']\n"
        "    print('FAILURE' if bad else 'ok', flush=True)\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != HOOK}
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env,
                            preexec_fn=_interruptible)
    try:
        assert proc.stdout is not None
        for _ in range(3):
            assert proc.stdout.readline().strip() == "ok"
        proc.send_signal(signal.SIGINT)
        try:
            stdout, stderr = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGUSR1)
            time.sleep(1)
            proc.kill()
            stdout, stderr = proc.communicate()
            pytest.fail(f"no exit 30 s after SIGINT; {stdout.count('ok')} runs; "
                        f"stacks:\n{stderr[-6000:]}")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert "FAILURE" not in stdout
    assert "KeyboardInterrupt" in stderr
    assert proc.returncode in (1, -signal.SIGINT)  # 3.11+ re-raises SIGINT at exit


def _example_facts() -> list:
    return [extract_cell(load_cell(ref)) for ref in discover(_examples())]


def test_the_pipelined_stream_gives_what_one_cell_at_a_time_gives():
    """classify_stream overlaps the engine with preparing the next cell: same verdicts,
    same order, also when cells repeat (memo hits behind an evaluation in flight)."""
    cells = _example_facts()
    cells = cells + cells[::-1] + cells[:3]
    one_by_one = [api.load_policy().classifier.classify_facts(c).to_dict() for c in cells]
    policy = api.load_policy()
    streamed = [v.to_dict() for v in policy.classifier.classify_stream(iter(cells))]
    assert streamed == one_by_one
    assert policy.classifier.evaluations < len(cells)


def test_an_abandoned_stream_leaves_the_classifier_usable():
    cells = _example_facts()
    policy = api.load_policy()
    stream = policy.classifier.classify_stream(iter(cells))
    first = next(stream)  # the next cell's evaluation may now be in flight
    stream.close()
    again = list(policy.classifier.classify_stream(iter(cells)))
    assert again[0].to_dict() == first.to_dict() and len(again) == len(cells)


def test_a_crash_inside_the_stream_costs_exactly_that_cell(monkeypatch):
    monkeypatch.setenv(HOOK, MOE_CELL)
    cells = _example_facts()
    policy = api.load_policy()
    verdicts = list(policy.classifier.classify_stream(iter(cells)))
    assert [v.cell_id for v in verdicts] == [c.cell_id for c in cells]
    failed = [v.cell_id for v in verdicts if any(e.code == "engine_failure" for e in v.errors)]
    assert failed == [MOE_CELL]
