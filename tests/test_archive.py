"""Executors on a real dask.distributed cluster: the same bytes as a local run whatever the
workers do (a killed worker, a failing task), the verdict cache in front of the cluster, and
the installed ``kvrules`` against a scheduler and workers started by hand."""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import distributed
import pytest

from kvrules import api
from kvrules.executors import dask_cluster as cluster
from kvrules.executors.dask_cluster import DaskExecutor
from kvrules.executors.choose import OnDemand
from kvrules.executors.choose import executor as open_executor
from kvrules.cache.verdicts import VerdictCache
from kvrules.diagnostics import ENGINE_FAILURE, KvrulesUsageError
from kvrules.verdicts.render import iter_jsonl

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    """Two worker processes of one thread each, as ``--executor dask-local -j 2`` starts."""
    with open_executor("dask-local", jobs=2) as chosen:
        assert isinstance(chosen, OnDemand) and chosen.started is None
        assert report(api.load_policy(), chosen)  # starts the cluster
        assert isinstance(chosen.started, DaskExecutor)
        yield chosen.started.client


@pytest.fixture(scope="module")
def policy() -> api.Policy:
    return api.load_policy()


@pytest.fixture(scope="module")
def local_report(policy: api.Policy) -> str:
    return report(policy, None)


def report(policy: api.Policy, executor: Any, cache: VerdictCache | None = None,
           paths: list[str] | None = None) -> str:
    cells = api.iter_classify(paths or [str(EXAMPLES)], policy, cache=cache, executor=executor)
    return "".join(iter_jsonl(policy.identity, cells))


def small_batches(client: Any, window: int = 3) -> DaskExecutor:
    """One cell per task and few in flight: many tasks, and the window is exercised."""
    executor = DaskExecutor(client, window=window)
    executor.batch_cells = 1
    return executor


def test_dask_gives_the_local_bytes_whatever_the_batching(
        client: Any, policy: api.Policy, local_report: str) -> None:
    assert report(policy, DaskExecutor(client)) == local_report
    assert report(policy, small_batches(client)) == local_report


def test_workers_killed_mid_run_lose_no_cell(client: Any, policy: api.Policy,
                                             local_report: str) -> None:
    """Every worker is killed while busy (the one holding the shipped policy too): the
    nannies restart them, Dask recomputes what was lost, and the report is the local one."""
    executor = small_batches(client, window=6)
    cells = api.iter_classify([str(EXAMPLES)], policy, executor=executor)
    first = next(cells)  # tasks are in flight now
    for address in list(client.scheduler_info()["workers"]):
        os.kill(client.run(os.getpid, workers=[address])[address], signal.SIGKILL)
    rest = list(cells)
    assert [e.message for c in rest for e in c.errors if e.code == ENGINE_FAILURE] == []
    assert "".join(iter_jsonl(policy.identity, [first, *rest])) == local_report
    client.wait_for_workers(2, timeout=60)  # restarted for the next tests


def test_a_failing_task_gives_its_cells_an_engine_failure(client: Any,
                                                          policy: api.Policy) -> None:
    def broken(compiled: Any, refs: list[Any]) -> list[Any]:
        raise RuntimeError("injected failure")

    executor = small_batches(client)
    executor.task = broken
    cells = list(api.iter_classify([str(EXAMPLES / "dense-native-skip-format")], policy,
                                   executor=executor))
    assert cells and all(c.status == "error" for c in cells)
    assert [e.message for c in cells for e in c.errors] == \
        ["dask task failed: RuntimeError: injected failure"] * len(cells)
    assert all(p.status == "error" and not p.eligible for c in cells for p in c.points)


def test_the_cache_serves_a_second_dask_run_and_an_edit_misses_one_cell(
        client: Any, policy: api.Policy, tmp_path: Path) -> None:
    archive = tmp_path / "archive"
    shutil.copytree(EXAMPLES, archive, ignore=shutil.ignore_patterns("*.py", "*.md"))
    uncached = report(policy, None, paths=[str(archive)])
    cold, warm = VerdictCache(tmp_path / "v"), VerdictCache(tmp_path / "v")
    assert report(policy, DaskExecutor(client), cold, [str(archive)]) == uncached
    assert cold.hits == 0 and cold.misses > 0
    assert report(policy, DaskExecutor(client), warm, [str(archive)]) == uncached
    assert warm.misses == 0 and warm.hits == cold.misses
    rank = next(archive.rglob("benchmark*.json"))
    rank.write_bytes(rank.read_bytes().replace(b"{", b"{ ", 1))
    edited = VerdictCache(tmp_path / "v")
    assert report(policy, DaskExecutor(client), edited, [str(archive)]) == uncached
    assert edited.misses == 1


def test_workers_with_another_kvrules_are_refused(client: Any,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cluster, "KVRULES_VERSION", "0.0.0-client")
    with pytest.raises(KvrulesUsageError, match="workers run kvrules"):
        DaskExecutor(client)


def test_a_missing_dask_is_a_usage_error_naming_the_extra(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed fails
    with pytest.raises(KvrulesUsageError, match=r"pip install 'kvrules\[dask\]'"):
        with open_executor("dask-local", jobs=1):
            pass


def test_executor_options_are_checked() -> None:
    with pytest.raises(KvrulesUsageError, match="needs --scheduler"):
        with open_executor("dask"):
            pass
    with pytest.raises(KvrulesUsageError, match="--scheduler is for --executor dask"):
        with open_executor("local", scheduler="tcp://127.0.0.1:1"):
            pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_installed_cli_against_a_scheduler_and_workers_started_by_hand(
        tmp_path: Path) -> None:
    bin_dir = Path(sys.executable).parent
    dask_cli, kvrules_cli = str(bin_dir / "dask"), str(bin_dir / "kvrules")
    address = f"tcp://127.0.0.1:{_free_port()}"
    env = {**os.environ, "KVRULES_NO_CACHE": "1"}
    started = [subprocess.Popen([dask_cli, "scheduler", "--host", "127.0.0.1", "--port",
                                 address.rsplit(":", 1)[1], "--no-dashboard"], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        started.append(subprocess.Popen(
            [dask_cli, "worker", address, "--nworkers", "2", "--nthreads", "1",
             "--no-dashboard"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        with distributed.Client(address, timeout="30s") as c:
            c.wait_for_workers(2, timeout=30)
        args = ["classify", str(EXAMPLES), "--format", "jsonl"]
        local = subprocess.run([kvrules_cli, *args], env=env, capture_output=True, timeout=120)
        remote = subprocess.run([kvrules_cli, *args, "--executor", "dask", "--scheduler",
                                 address], env=env, capture_output=True, timeout=120)
        assert remote.returncode == local.returncode == 1, remote.stderr  # examples hold errors
        assert remote.stdout == local.stdout and local.stdout
    finally:
        for proc in reversed(started):
            proc.terminate()
        deadline = time.monotonic() + 20
        for proc in reversed(started):
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()


class Recording:
    """An executor running batches locally and remembering their sizes."""

    batch_cells = 2

    def __init__(self) -> None:
        self.batches: list[int] = []

    def classify_batches(self, policy: api.Policy,
                         batches: Iterator[list[Any]]) -> Iterator[list[Any]]:
        for batch in batches:
            self.batches.append(len(batch))
            yield [v for done in api.LocalExecutor().classify_batches(policy, iter([batch]))
                   for v in done]


def test_library_calls_given_a_run_use_its_executor(policy: api.Policy,
                                                    local_report: str) -> None:
    from kvrules.consumers.readiness import readiness
    recording = Recording()
    run = api.Run(recording)
    classified = run.classify([str(EXAMPLES)], policy)
    readiness([str(EXAMPLES)], policy, run=run)
    assert "".join(iter_jsonl(policy.identity, classified.cells)) == local_report
    assert sum(recording.batches) == 2 * len(classified.cells)
    assert max(recording.batches) == 2


def test_diff_runs_on_dask_local_with_the_local_result(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from kvrules.cli.app import app
    args = ["diff", str(EXAMPLES / "dense-native-skip-format"), "--head-param",
            "dense_synthetic_kv=false", "--format", "json"]
    local = CliRunner().invoke(app, args)
    remote = CliRunner().invoke(app, [*args, "--executor", "dask-local", "--jobs", "1"])
    assert remote.exit_code == local.exit_code and remote.stdout == local.stdout
    assert '"changed"' in local.stdout


def test_a_warm_run_starts_no_cluster(policy: api.Policy, tmp_path: Path,
                                      local_report: str) -> None:
    def no_cluster() -> Any:
        raise AssertionError("a cluster was started for a cell the cache holds")

    cache = tmp_path / "v"
    report(policy, None, VerdictCache(cache))
    lazy = OnDemand(no_cluster)
    assert report(policy, lazy, VerdictCache(cache)) == local_report
    assert lazy.started is None


def test_the_documented_duckdb_query_reads_the_parquet_dataset(tmp_path: Path) -> None:
    import re

    import doc_pages
    import duckdb
    from typer.testing import CliRunner

    from kvrules.cli.app import app
    query = re.search(r'^duckdb -c "(.*?)"$', doc_pages.all_text(), re.S | re.M)
    assert query is not None
    done = CliRunner().invoke(app, ["classify", str(EXAMPLES), "--format", "parquet",
                                    "--output", str(tmp_path / "verdicts")])
    assert done.exit_code == 1  # the examples hold error cells
    sql = query.group(1).replace("verdicts/", f"{tmp_path}/verdicts/")
    rows = duckdb.sql(sql).fetchall()
    assert (f"{EXAMPLES}/dense-legacy-stamp-format", "skip:dense_model_content_insensitive",
            2, 2) in rows
    assert sum(points for _, _, points, _ in rows) == 18


WARM_DASK_LOCAL = """
import sys
from pathlib import Path
from kvrules import api
from kvrules.executors.choose import executor
from kvrules.cache.verdicts import VerdictCache
paths, folder = sys.argv[1:-1], sys.argv[-1]
policy = api.load_policy()
cache = VerdictCache(Path(folder))
with executor("dask-local", jobs=1) as runner:
    cells = list(api.iter_classify(paths, policy, cache=cache, executor=runner))
print(len(cells), cache.hits, "distributed" in sys.modules)
"""


def test_a_warm_dask_local_run_does_not_import_dask(tmp_path: Path) -> None:
    """Every cell from the cache: no cluster is started and dask.distributed is not even
    imported (a quarter of a second of a warm run)."""
    paths = [str(EXAMPLES / "dense-native-skip-format"), str(EXAMPLES / "dp2-peer-ineligible")]
    run = [sys.executable, "-c", WARM_DASK_LOCAL, *paths, str(tmp_path / "v")]
    cold = subprocess.run(run, capture_output=True, text=True, timeout=300)
    assert cold.returncode == 0, cold.stderr
    n, hits, imported = cold.stdout.split()
    assert hits == "0" and imported == "True"
    warm = subprocess.run(run, capture_output=True, text=True, timeout=300)
    assert warm.returncode == 0, warm.stderr
    assert warm.stdout.split() == [n, n, "False"]
