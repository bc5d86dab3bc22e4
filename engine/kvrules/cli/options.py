"""Options shared by the commands: declared once, so every command spells ``--rules``,
``--plan``, ``--no-dense-synthetic-kv``, ``--jobs``, ``--format`` and the executor and cache
options alike."""
from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Sequence

import typer

# re-exported: the commands read these here, beside the options they serve
from kvrules.cli.execution import ExecutorName as ExecutorName
from kvrules.cli.execution import jobs as jobs
from kvrules.cli.execution import run as run
from kvrules.cli.execution import verdict_cache as verdict_cache

if TYPE_CHECKING:  # the commands import the library only when they run
    from kvrules import api


class Format(str, Enum):
    text = "text"
    json = "json"


Campaigns = Annotated[list[str], typer.Argument(
    metavar="CAMPAIGN", help="Campaign folders (or cell folders with --plan), in order.",
    show_default=False)]
Rules = Annotated[Path | None, typer.Option(
    "--rules", metavar="DIR", help="Policy directory to use instead of the shipped one.",
    show_default=False)]
KnownRules = Annotated[list[Path] | None, typer.Option(
    "--rules", metavar="DIR", help="A policy directory whose version is also known "
    "(besides the shipped policy); repeatable.", show_default=False)]
Plan = Annotated[Path | None, typer.Option(
    "--plan", metavar="FILE", help="collection-plan.json for a single cell folder.",
    show_default=False)]
NoDense = Annotated[bool, typer.Option(
    "--no-dense-synthetic-kv", help="Turn dense synthetic KV classification off (D1): "
    "the legacy classification, exactly.")]
JOBS_HELP = "Cells classified in parallel (default: one per CPU core, at most 8)."
Jobs = Annotated[int | None, typer.Option("--jobs", "-j", min=1, metavar="N", help=JOBS_HELP,
                                          show_default=False)]


Executor = Annotated[ExecutorName, typer.Option(
    "--executor", case_sensitive=False, help="Where cells are classified: local (--jobs "
    "processes), dask (the cluster of --scheduler; its workers need kvrules installed) or "
    "dask-local (a LocalCluster of --jobs worker processes). Dask needs "
    "pip install 'kvrules[dask]'.")]
Scheduler = Annotated[str | None, typer.Option(
    "--scheduler", metavar="tcp://HOST:PORT", help="The Dask scheduler of --executor dask.",
    show_default=False)]
CacheDir = Annotated[Path | None, typer.Option(
    "--cache", metavar="DIR", help="Verdict cache folder: unchanged cells are not "
    "evaluated again [default: the user cache directory].", show_default=False)]
NoCache = Annotated[bool, typer.Option(
    "--no-cache", help="Evaluate every cell; read and write no cached verdict.")]
FormatOption = Annotated[Format, typer.Option(
    "--format", "-f", help="text (a table) for people, json one document.", case_sensitive=False)]


def policy(rules: Path | None, no_dense_synthetic_kv: bool) -> api.Policy:
    """The policy of ``--rules`` (default: shipped) with ``--no-dense-synthetic-kv`` applied."""
    from kvrules import api
    parameters = {"dense_synthetic_kv": False} if no_dense_synthetic_kv else None
    return api.load_policy(rules, parameters=parameters)


def known_policies(rules: Sequence[Path] | None) -> list[api.Policy]:
    """The policies of every ``--rules DIR`` (their versions become known)."""
    from kvrules import api
    return [api.load_policy(r) for r in rules or ()]


def plan_arg(plan: Path | None) -> str | None:
    return str(plan) if plan is not None else None
