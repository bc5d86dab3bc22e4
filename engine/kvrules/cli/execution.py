"""Where a command's classifications run: worker processes, executor and verdict cache."""
from __future__ import annotations

from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

if TYPE_CHECKING:  # the library is imported when a command runs
    from kvrules import api
    from kvrules.cache.verdicts import VerdictCache


class ExecutorName(str, Enum):
    local = "local"
    dask = "dask"
    dask_local = "dask-local"


def jobs(given: int | None) -> int:
    """``--jobs``, or as many workers as the machine has cores for when it is omitted."""
    from kvrules.workers import default_jobs
    return default_jobs() if given is None else given


def verdict_cache(folder: Path | None, off: bool) -> "VerdictCache | None":
    """The verdict cache of this run: --cache DIR, else the user's; None when turned off."""
    from kvrules.cache.verdicts import VerdictCache, default_root
    root = folder if folder is not None else default_root()
    return None if off or root is None else VerdictCache(root)


@contextmanager
def run(executor: ExecutorName, jobs: int, scheduler: str | None,
        cache: "VerdictCache | None" = None) -> Iterator["api.Run"]:
    """The command's :class:`kvrules.api.Run`: the chosen executor (closed afterwards) and
    verdict cache, passed to every classification the command makes."""
    from kvrules import api
    from kvrules.executors.choose import executor as open_executor
    with open_executor(executor.value, jobs, scheduler) as chosen:
        yield api.Run(chosen, cache)
