"""``kvrules cache info|prune``: look at and empty the verdict cache."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(no_args_is_help=True, help="Inspect or prune the cell verdict cache.")

CacheDir = Annotated[Path | None, typer.Option(
    "--cache", metavar="DIR", help="Verdict cache folder [default: the user cache directory].",
    show_default=False)]


def _root(folder: Path | None) -> Path:
    from kvrules.cache.verdicts import default_root
    root = folder if folder is not None else default_root()
    if root is None:
        typer.echo("kvrules: caching is turned off (KVRULES_NO_CACHE)", err=True)
        raise typer.Exit(2)
    return root


@app.command("info", help="Where the verdict cache is, how many verdicts and bytes it holds.")
def info(cache: CacheDir = None) -> None:
    from kvrules.cache import verdicts
    root = _root(cache)
    entries, size = verdicts.info(root)
    typer.echo(f"{root}: {entries} verdicts, {size} bytes")


@app.command("prune", help="Delete cached verdicts (all, or those unused for DAYS days).")
def prune(cache: CacheDir = None, older_than: Annotated[float | None, typer.Option(
        "--older-than", min=0, metavar="DAYS", help="Only verdicts not used for DAYS days.",
        show_default=False)] = None) -> None:
    from kvrules.cache import verdicts
    root = _root(cache)
    typer.echo(f"{root}: {verdicts.prune(root, older_than)} verdicts deleted")
