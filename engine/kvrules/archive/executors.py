"""Choose where cells are classified: ``--executor local|dask|dask-local``.

``local`` is the default pipeline (``--jobs`` extraction processes, one engine). ``dask``
connects to a running scheduler (``--scheduler tcp://HOST:PORT``) whose workers have kvrules
installed; ``dask-local`` starts a LocalCluster of ``--jobs`` worker processes with one
thread each, for one big machine. dask.distributed is an optional extra
(``pip install 'kvrules[dask]'``), imported only here and only for a Dask executor.
"""
from __future__ import annotations

import logging
from contextlib import contextmanager
from typing import Any, Iterator

from kvrules.api import Executor
from kvrules.diagnostics import KvrulesUsageError

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


@contextmanager
def executor(name: str, jobs: int = 1, scheduler: str | None = None) -> Iterator[Executor | None]:
    """The executor of one run (None: the plain local pipeline), closed afterwards."""
    if scheduler is not None and name != "dask":
        raise KvrulesUsageError("--scheduler is for --executor dask")
    if name == "local":
        yield None
        return
    if name == "dask" and scheduler is None:
        raise KvrulesUsageError("--executor dask needs --scheduler tcp://HOST:PORT "
                                "(or use --executor dask-local)")
    if name not in EXECUTORS:
        raise KvrulesUsageError(f"--executor {name}: expected one of {', '.join(EXECUTORS)}")
    distributed = _distributed(name)
    from kvrules.archive.cluster import DaskExecutor
    with _client(distributed, name, jobs, scheduler) as client:
        yield DaskExecutor(client)


@contextmanager
def _client(distributed: Any, name: str, jobs: int, scheduler: str | None) -> Iterator[Any]:
    """A client of the named scheduler, or of a LocalCluster of ``jobs`` processes."""
    if name == "dask":
        try:
            client = distributed.Client(scheduler, timeout="10s")
        except (OSError, TimeoutError, ValueError) as exc:
            raise KvrulesUsageError(f"--scheduler {scheduler}: cannot connect: {exc}") from None
        with client:
            yield client
        return
    with distributed.LocalCluster(n_workers=jobs, threads_per_worker=1, processes=True,
                                  dashboard_address=":0", silence_logs=logging.ERROR) as cluster:
        with distributed.Client(cluster) as client:
            yield client
