"""The work of ``kvrules classify`` once its command line is parsed: the options as one
job, run against the library."""
from __future__ import annotations

from dataclasses import dataclass

import os
import shutil
import sys
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

from kvrules.cli.common import CellProgress, usage_errors, write_lines
from kvrules.cli.destination import Kind, check_destination
from kvrules.cli.execution import ExecutorName, jobs, verdict_cache
from kvrules.cli.execution import run as classification

if TYPE_CHECKING:  # the library is imported when the job runs, not for --help
    from kvrules.cache.verdicts import VerdictCache
    from kvrules.verdicts.model import CellVerdict, PolicyIdentity


class Format(str, Enum):
    text = "text"
    json = "json"
    jsonl = "jsonl"
    github = "github"
    parquet = "parquet"


@dataclass(frozen=True)
class ClassifyJob:
    """``kvrules classify`` as parsed: the options' values, nothing derived from them yet."""

    paths: list[str]
    rules: Path | None = None
    plan: Path | None = None
    fmt: Format = Format.text
    output: Path | None = None
    no_dense_synthetic_kv: bool = False
    jobs: int | None = None
    max_errors: int = 20
    cache: Path | None = None
    no_cache: bool = False
    executor: ExecutorName = ExecutorName.local
    scheduler: str | None = None
    progress: bool = False
    overwrite: bool = False
    no_verify: bool = False


def run(job: ClassifyJob) -> int:
    """Classify, write the report; the exit status (0 every cell classified, 1 some cell has
    an evidence error; a usage error raises ``SystemExit(2)`` after its message)."""
    from kvrules import api
    plan_arg = str(job.plan) if job.plan is not None else None
    workers = jobs(job.jobs)
    cache = verdict_cache(job.cache, job.no_cache)
    fmt, output = job.fmt, job.output
    with usage_errors(job.max_errors):
        _check_destination(job)
        parameters = {"dense_synthetic_kv": False} if job.no_dense_synthetic_kv else None
        policy = api.load_policy(job.rules, parameters=parameters, verify=not job.no_verify)
        shared_tty = fmt is not Format.text and output is None and sys.stdout.isatty()
        with CellProgress(enabled=not shared_tty, force=job.progress) as progress, \
                classification(job.executor, workers, job.scheduler, cache) as where:
            cells = _ExitTap(api.iter_classify(job.paths, policy, plan=plan_arg, jobs=workers,
                                               progress=progress, cache=where.cache,
                                               executor=where.executor),
                             # the command classifies nothing after these cells: the engine
                             # worker is stopped while the report's end is written and synced
                             done=lambda: policy.close(wait=False))
            if fmt is Format.parquet:
                from kvrules.verdicts.dataset import write_dataset
                write_dataset(cells, output, job.overwrite)  # type: ignore[arg-type]
            else:
                write_lines(_lines(fmt, policy, cells, output), output)
        _cache_summary(cache, job.progress)
    return cells.exit_code


class _ExitTap:
    """Pass cell verdicts through while remembering whether any cell was in error; ``done``
    is called once the last verdict has been taken."""

    def __init__(self, cells: Iterable[CellVerdict], done: Callable[[], None]) -> None:
        self._cells = cells
        self._done = done
        self.exit_code = 0

    def __iter__(self) -> Iterator[CellVerdict]:
        for cell in self._cells:
            if cell.status == "error":
                self.exit_code = 1
            yield cell
        self._done()


def _policy_identity(policy: Any) -> "PolicyIdentity":
    from kvrules.verdicts.model import PolicyIdentity
    identity = getattr(policy, "identity", None)
    if not isinstance(identity, PolicyIdentity):
        raise TypeError(f"load_policy() returned {type(policy).__name__} without a "
                        "PolicyIdentity 'identity' attribute")
    return identity


def _lines(fmt: Format, policy: Any, cells: Iterable["CellVerdict"],
           output: Path | None) -> Iterable[str]:
    """The report in the chosen format, produced as the cells arrive (jsonl and json are
    written cell by cell; the table keeps one short row per cell until the end). On a
    terminal the table fits its width; in a file or a pipe it is never wrapped."""
    from kvrules.verdicts.render import iter_github, iter_json, iter_jsonl
    identity = _policy_identity(policy)
    if fmt is Format.jsonl:
        return iter_jsonl(identity, cells)
    if fmt is Format.json:
        return iter_json(identity, cells)
    if fmt is Format.github:
        return iter_github(cells)
    from kvrules.verdicts.table import TABLE_WIDTH, table_of  # the table's module, for it only
    if output is None and sys.stdout.isatty():
        width = shutil.get_terminal_size((TABLE_WIDTH, 24)).columns
        return [table_of(identity, cells, width=width, color=not os.environ.get("NO_COLOR"),
                         ascii_only=not _encodes(sys.stdout, "\u2500"))]
    return [table_of(identity, cells, ascii_only=output is None
                     and not _encodes(sys.stdout, "\u2500"))]


def _encodes(stream: Any, text: str) -> bool:
    """Whether ``stream``'s encoding can write ``text`` (``PYTHONIOENCODING=ascii``)."""
    try:
        text.encode(getattr(stream, "encoding", None) or "utf-8")
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def _check_destination(job: ClassifyJob) -> None:
    """A report goes to a file or stdout, a parquet dataset to a folder named by --output;
    neither over nor inside what the run reads (checked before any cell is classified)."""
    parquet = job.fmt is Format.parquet
    if parquet and (job.output is None or job.output == Path("-")):
        from kvrules.diagnostics import KvrulesUsageError
        raise KvrulesUsageError("--format parquet writes a folder: give it with --output DIR")
    check_destination(job.output, job.paths, (job.plan, job.rules),
                      Kind.FOLDER if parquet else Kind.FILE, job.overwrite)


def _cache_summary(cache: "VerdictCache | None", asked: bool = False) -> None:
    """How many cells came from the cache, on a terminal's stderr (or with ``--progress``)
    only: the report, logs and pipes keep the same bytes whether cells were cached or not."""
    if cache is not None and (asked or sys.stderr.isatty()):
        total = cache.hits + cache.misses
        sys.stderr.write(f"kvrules: {cache.hits} of {total} cells from the verdict cache "
                         f"({cache.root})\n")
