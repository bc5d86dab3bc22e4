"""Choose where cells are classified: ``--executor local|dask|dask-local``.

``local`` is :class:`kvrules.api.LocalExecutor` (``--jobs`` extraction processes, one engine). ``dask``
connects to a running scheduler (``--scheduler tcp://HOST:PORT``) whose workers have kvrules
installed; ``dask-local`` starts a LocalCluster of ``--jobs`` worker processes with one
thread each, for one big machine. dask.distributed is an optional extra
(``pip install 'kvrules[dask]'``), imported only here and only for a Dask executor.
"""
from __future__ import annotations

import importlib.util
from contextlib import ExitStack, contextmanager
from itertools import chain
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

from kvrules.api import Executor, LocalExecutor
from kvrules.diagnostics import KvrulesUsageError

if TYPE_CHECKING:
    from kvrules.api import Policy
    from kvrules.artifacts.discover import CellRef
    from kvrules.verdicts.model import CellVerdict

EXECUTORS = ("local", "dask", "dask-local")
MISSING_DASK = ("--executor {name} needs dask.distributed, which is not installed: "
                "pip install 'kvrules[dask]'")


def _distributed(name: str) -> Any:
    """The dask.distributed module, or a usage error saying how to install it."""
    try:
        import distributed
    except ImportError:
        raise KvrulesUsageError(MISSING_DASK.format(name=name)) from None
    return distributed


def _require_distributed(name: str) -> None:
    """A usage error now when dask.distributed is not installed, without importing it
    (its import costs a quarter of a second a warm run does not need)."""
    try:
        found = importlib.util.find_spec("distributed") is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise KvrulesUsageError(MISSING_DASK.format(name=name))


@contextmanager
def executor(name: str, jobs: int = 1, scheduler: str | None = None) -> Iterator[Executor]:
    """The executor of one run, closed afterwards.

    A scheduler is connected to at once (a wrong address fails before any output); a
    LocalCluster starts only when a batch needs evaluating, so a warm run starts none.
    """
    if scheduler is not None and name != "dask":
        raise KvrulesUsageError("--scheduler is for --executor dask")
    if name == "local":
        yield LocalExecutor(jobs)
        return
    if name == "dask" and scheduler is None:
        raise KvrulesUsageError("--executor dask needs --scheduler tcp://HOST:PORT "
                                "(or use --executor dask-local)")
    if name not in EXECUTORS:
        raise KvrulesUsageError(f"--executor {name}: expected one of {', '.join(EXECUTORS)}")
    _require_distributed(name)
    from kvrules.executors.dask_cluster import DaskExecutor
    with ExitStack() as stack:
        if name == "dask":
            yield DaskExecutor(stack.enter_context(_scheduler_client(_distributed(name),
                                                                     scheduler)))
        else:
            yield OnDemand(lambda: DaskExecutor(stack.enter_context(
                _local_client(_distributed(name), jobs))))


class OnDemand:
    """An executor made by ``start`` when the first batch with cells comes (and not at all
    when the cache holds every cell)."""

    def __init__(self, start: Callable[[], Executor]) -> None:
        from kvrules.executors.dask_cluster import BATCH_CELLS
        self.batch_cells = BATCH_CELLS
        self._start = start
        self._started: Executor | None = None

    def classify_batches(self, policy: Policy, batches: Iterator[list[CellRef]]
                         ) -> Iterator[Iterable[CellVerdict]]:
        """Empty batches answered here until one has cells; then all by the started one."""
        for batch in batches:
            if not batch:
                yield []
                continue
            if self._started is None:
                self._started = self._start()
            yield from self._started.classify_batches(policy, chain([batch], batches))
            return

    @property
    def started(self) -> Executor | None:
        """The executor, once started (for tests and the cluster's client)."""
        return self._started


@contextmanager
def _scheduler_client(distributed: Any, scheduler: str | None) -> Iterator[Any]:
    try:
        client = distributed.Client(scheduler, timeout="10s")
    except (OSError, TimeoutError, ValueError) as exc:
        raise KvrulesUsageError(f"--scheduler {scheduler}: cannot connect: {exc}") from None
    with client:
        yield client


@contextmanager
def _local_client(distributed: Any, jobs: int) -> Iterator[Any]:
    """A client of a LocalCluster of ``jobs`` worker processes, one thread each."""
    import logging  # here: dask-local only (logging costs every local run ~4 ms)
    with distributed.LocalCluster(n_workers=jobs, threads_per_worker=1, processes=True,
                                  dashboard_address=":0", silence_logs=logging.ERROR) as cluster:
        with distributed.Client(cluster) as client:
            yield client
