"""The typer app of ``kvrules``: the root command (``--version``) and the commands of
:data:`kvrules.cli.app.COMMANDS` and :data:`~kvrules.cli.app.GROUPS`, each registered by its
own module. Kept out of :mod:`kvrules.cli.app` so the entry point starts without typer."""
from __future__ import annotations

from importlib import import_module
from typing import Annotated

import typer

from kvrules.cli.app import COMMANDS, GROUPS

FORMAT_ALIASES = {"table": "text", "pretty": "text"}
"""Earlier names of the human ``--format``, still accepted: every command now calls it
``text`` (click normalizes choice values, and only them, through this table)."""


def _version(value: bool) -> None:
    """kvrules, the engine it drives and the shipped policy: what a bug report needs."""
    if value:
        from importlib.metadata import PackageNotFoundError, version

        from kvrules.policy.compiler import default_digest
        from kvrules.verdicts.model import KVRULES_VERSION
        try:
            engine = version("durable-rules")
        except PackageNotFoundError:
            engine = "not installed"
        typer.echo(f"kvrules {KVRULES_VERSION}\ndurable-rules {engine}\n"
                   f"shipped policy {default_digest()}")
        raise typer.Exit(0)


def _root(version: Annotated[bool, typer.Option(
        "--version", callback=_version, is_eager=True,
        help="Print the versions of kvrules and durable-rules and the shipped policy's "
             "digest, and exit.")] = False) -> None:
    """Classify the KV seed regime of forward-pass benchmark points with a declarative
    policy, and decide which points may be used."""


def build_app(only: str | None = None) -> typer.Typer:
    """The command line with every command, or with the command ``only`` alone."""
    root = typer.Typer(
        name="kvrules", no_args_is_help=True, add_completion=True,
        pretty_exceptions_enable=False,
        context_settings={"help_option_names": ["-h", "--help"],
                          "token_normalize_func": lambda t: FORMAT_ALIASES.get(t, t)},
        help="Classify the KV seed regime of forward-pass benchmark points with a "
             "declarative policy, and decide which points may be used.")
    root.callback()(_root)
    for name in COMMANDS:
        if only in (None, name):
            import_module(f"kvrules.cli.{name}").register(root)
    for name in GROUPS:
        if only in (None, name):
            root.add_typer(import_module(f"kvrules.cli.{name}").app, name=name)
    return root
