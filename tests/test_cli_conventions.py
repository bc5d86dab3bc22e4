"""Command-line conventions users expect of a CLI tool, run as whole processes."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
from helpers import DENSE, EXAMPLES, copy_example

from kvrules import api
from kvrules.diagnostics import KvrulesWarning


def _kvrules(*args: str, cwd: Path, env: dict[str, str] | None = None
             ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kvrules", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=120, env={**os.environ, **(env or {})})


def test_a_campaign_given_twice_is_reported_once_with_a_warning(tmp_path: Path) -> None:
    campaign = str(EXAMPLES / DENSE)
    done = _kvrules("classify", campaign, campaign + "/", "-f", "jsonl", cwd=tmp_path)
    records = [json.loads(line) for line in done.stdout.splitlines()]
    assert done.returncode == 0
    assert [r["kind"] for r in records].count("cell") == 1
    assert records[-1]["cells"] == 1
    assert done.stderr == (f"kvrules: warning: {campaign}/: 1 cell already given by an "
                           "earlier path, reported once\n")


def test_the_library_warns_with_a_standard_warning() -> None:
    campaign = str(EXAMPLES / DENSE)
    with pytest.warns(KvrulesWarning, match="reported once"):
        report = api.classify([campaign, campaign])
    assert len(report.cells) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(api.classify([campaign]).cells) == 1


def test_shell_completion_completes_commands_and_options(tmp_path: Path) -> None:
    env = {"_KVRULES_COMPLETE": "complete_bash", "COMP_WORDS": "kvrules cla", "COMP_CWORD": "1"}
    done = subprocess.run(["kvrules"], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, **env}, timeout=60)
    assert done.stdout.split() == ["classify"]
    env.update(COMP_WORDS="kvrules classify --for", COMP_CWORD="2")
    done = subprocess.run(["kvrules"], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, **env}, timeout=60)
    assert done.stdout.split() == ["--format"]
    # typer takes the shell from the command's parent process, as when a user types it in
    # bash (a test runner started by no shell has none; "; exit" keeps bash from exec-ing)
    line = f"'{sys.executable}' -m kvrules --show-completion bash; exit $?"
    script = subprocess.run(["bash", "-c", line], capture_output=True, text=True,
                            cwd=tmp_path, timeout=120)
    assert script.returncode == 0 and "_KVRULES_COMPLETE" in script.stdout


@pytest.mark.parametrize("fmt", ["table", "jsonl"])
def test_any_stdout_encoding_works_without_a_traceback(tmp_path: Path, fmt: str) -> None:
    campaign = copy_example(tmp_path, DENSE, dest="campagne-\u00e9t\u00e9")
    done = _kvrules("classify", str(campaign), "-f", fmt, cwd=tmp_path,
                    env={"PYTHONIOENCODING": "ascii"})
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and done.stdout.isascii()
    if fmt == "table":
        assert "--------" in done.stdout and "campagne-" in done.stdout
    else:  # JSON stays valid JSON: the characters are escaped, not replaced
        header = json.loads(done.stdout.splitlines()[-2])
        assert header["kind"] == "cell" and "\u00e9" in header["campaign"]
    missing = _kvrules("classify", str(tmp_path / "nulle-part-\u00e9"), cwd=tmp_path,
                       env={"PYTHONIOENCODING": "ascii"})
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    assert "no such file" in missing.stderr


@pytest.fixture(scope="module")
def campaigns(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from corpus import generate
    # enough cells that every command is still at work 0.2 s after its workers start (120
    # cells were, until loading a rank file took half the time; then a readiness run could
    # end before the signal came)
    corpus = generate(tmp_path_factory.mktemp("corpus"), cells=480, ranks=1, points=300)
    return [str(p) for p in sorted(corpus.iterdir())]


def _has_children(pid: int) -> bool:
    """The command started its engine worker: it is classifying."""
    try:
        return bool(Path(f"/proc/{pid}/task/{pid}/children").read_text().split())
    except OSError:
        return False


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")
@pytest.mark.parametrize("sig, code, word", [(signal.SIGTERM, 143, "terminated"),
                                             (signal.SIGINT, 130, "interrupted")])
@pytest.mark.parametrize("command", [["readiness", "-f", "json"], ["report"],
                                     ["aggregate"]])
def test_every_command_stops_cleanly_on_a_signal(tmp_path: Path, campaigns: list[str],
                                                 sig: int, code: int, word: str,
                                                 command: list[str]) -> None:
    """Not only classify: a signal unwinds the command, no partial or temporary file."""
    out = tmp_path / "out" / {"aggregate": "rows.parquet", "report": "page.html"}.get(
        command[0], "out.json")
    out.parent.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "kvrules", command[0], *campaigns,
                             *command[1:], "-o", str(out)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                            env={**os.environ,  # an empty cache: every cell is classified
                                 "KVRULES_CACHE_DIR": str(tmp_path / "cache")})
    deadline = time.monotonic() + 60
    while not _has_children(proc.pid) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)
    assert proc.poll() is None, proc.communicate()[1]
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=60)
    assert (proc.returncode, stderr) == (code, f"kvrules: {word}\n")
    assert list(out.parent.iterdir()) == []


SWALLOWED = """
import os, signal, sys
from kvrules.cli import app as cli

class Collected:
    def __del__(self):  # where Python swallows exceptions: the signal's included
        os.kill(os.getpid(), signal.SIG{name})
        sum(range(1000))

def command(**options):
    Collected()
    print("done")
    sys.exit(0)

cli.build_app = lambda only=None: command
cli.main()
"""


@pytest.mark.parametrize("name, code, word", [("INT", 130, "interrupted"),
                                              ("TERM", 143, "terminated")])
def test_a_signal_swallowed_in_a_finaliser_still_stops_the_run(name: str, code: int,
                                                               word: str) -> None:
    """The command did not unwind, but the run ends as stopped, without a traceback."""
    done = subprocess.run([sys.executable, "-c", SWALLOWED.replace("{name}", name)],
                          capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr) == (code, f"kvrules: {word}\n")


WRAPPED = """
import os, signal, sys
from kvrules.cli import app as cli

class Named:
    def __set_name__(self, owner, name):  # an exception here reaches the class statement
        os.kill(os.getpid(), signal.SIG{name})  # as a RuntimeError (whose cause it is)
        sum(range(1000))

def command(**options):
    class Defined:  # a module being imported when the signal arrives defines classes
        field = Named()
    print("done")
    sys.exit(0)

cli.build_app = lambda only=None: command
cli.main()
"""


@pytest.mark.parametrize("name, code, word", [("INT", 130, "interrupted"),
                                              ("TERM", 143, "terminated")])
def test_a_signal_that_python_wraps_in_another_error_still_stops_the_run(name: str, code: int,
                                                                         word: str) -> None:
    """Seen in CI: a SIGTERM landing while the pipeline was imported ended the run with a
    RuntimeError traceback and status 1 instead of 143."""
    done = subprocess.run([sys.executable, "-c", WRAPPED.replace("{name}", name)],
                          capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr, done.stdout) == (code, f"kvrules: {word}\n", "")


def test_the_library_takes_one_path_or_a_sequence_of_str_or_path() -> None:
    one = EXAMPLES / DENSE
    reports = [api.classify(str(one)), api.classify(one), api.classify([one]),
               api.classify((str(one),))]
    assert {len(r.cells) for r in reports} == {1}
    assert {r.cells[0].campaign for r in reports} == {str(one)}
    with pytest.raises(TypeError, match="not bytes"):
        api.classify(bytes(str(one), "utf-8"))  # type: ignore[arg-type]


def test_classify_github_annotates_each_evidence_error_on_its_file(tmp_path: Path) -> None:
    campaign = f"{EXAMPLES}/dp2-peer-ineligible"
    done = _kvrules("classify", campaign, f"{EXAMPLES}/{DENSE}", "-f", "github", cwd=tmp_path)
    error, notice = done.stdout.splitlines()
    assert done.returncode == 1
    assert error.startswith(f"::error file={campaign}/cells/fpm-llama31-8b-decode-tp1-dp2/raw/")
    assert ",title=dp_warmup_disagreement::fpm-llama31-8b-decode-tp1-dp2: rank 1 " in error
    assert notice == "::notice title=kvrules::2 cells (1 in error), 2/4 points eligible"


@pytest.mark.parametrize("old, command", [("table", ["classify", f"{EXAMPLES}/{DENSE}"]),
                                          ("pretty", ["rules", "test"])])
def test_one_format_vocabulary_earlier_names_still_work(tmp_path: Path, old: str,
                                                        command: list[str]) -> None:
    text = _kvrules(*command, "-f", "text", cwd=tmp_path)
    assert text.returncode == 0 and _kvrules(*command, "-f", old, cwd=tmp_path).stdout == \
        text.stdout
    for name in ("classify", "readiness", "aggregate", "publish", "verify", "explain",
                 "diff", "rules check", "rules test"):
        shown = _kvrules(*name.split(), "--help", cwd=tmp_path, env={"COLUMNS": "200"}).stdout
        assert "<text|json" in shown, name


def _on_a_terminal(args: list[str], columns: int, cwd: Path) -> str:
    """What ``kvrules ARGS`` shows on a terminal ``columns`` wide (a pseudo-terminal)."""
    import pty
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "kvrules", *args], stdout=follower,
                            stderr=subprocess.DEVNULL, cwd=cwd,
                            env={**os.environ, "COLUMNS": str(columns), "NO_COLOR": "1"})
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    assert proc.wait(timeout=120) in (0, 1)
    return b"".join(chunks).decode().replace("\r\n", "\n")


def test_the_table_on_an_80_column_terminal_is_the_documented_one() -> None:
    import re

    import doc_pages
    block = re.match(r"\$ (.*?)\n(.*)", doc_pages.block("table-80", "text"), re.S)
    assert block is not None
    command, shown = block.groups()
    printed = _on_a_terminal(command.split()[1:], 80, doc_pages.ROOT)
    digest = re.compile(r"sha256:[0-9a-f]+")
    assert digest.sub("sha256:...", printed) == digest.sub("sha256:...", shown)
    assert all(len(line) <= 80 for line in printed.splitlines()  # but a single path
               if " " in line.strip())
    for line in printed.splitlines():  # every cell id and regime whole on its line
        for word in ("fpm-llama31-8b-decode-tp1", "skip:dense_model_content_insensitive"):
            if word[:8] in line:
                assert word in line


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")
def test_a_killed_run_leaves_no_worker_behind(tmp_path: Path, campaigns: list[str]) -> None:
    """SIGKILL (or the OOM killer) gives the command no chance to stop its workers: they end
    with it instead of waiting forever on pipes their siblings hold open."""
    proc = subprocess.Popen([sys.executable, "-m", "kvrules", "classify", *campaigns,
                             "--jobs", "2", "-o", str(tmp_path / "out.jsonl")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp_path,
                            env={**os.environ, "KVRULES_CACHE_DIR": str(tmp_path / "cache")})
    deadline = time.monotonic() + 60
    while len(_children(proc.pid)) < 3 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)  # the engine worker and two extraction workers
    workers = _children(proc.pid)
    assert len(workers) == 3 and proc.poll() is None
    proc.kill()
    proc.wait(timeout=60)
    deadline = time.monotonic() + 10
    while any(Path(f"/proc/{pid}").exists() for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    alive = [pid for pid in workers if Path(f"/proc/{pid}").exists()
             and "Z" not in Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[:1]]
    assert alive == []
