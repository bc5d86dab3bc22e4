"""``kvrules publish``: merge a rows file into the published tables of a root (spec 6.3)."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kvrules.cli import options as opt
from kvrules.cli.common import usage_errors, write_text
from kvrules.cli.destination import Kind, check_destination

HELP = (
    "Merge formal rows into a published table under a file lock (spec 6.3).\n\n"
    "Merge ROWS (the .parquet of kvrules aggregate) into <root>/<system>/<backend>/"
    "<backend_version>/fpm_forward_perf.parquet and its commit record, under a file lock, "
    "atomically. A cell already published by another run is skipped (first publisher wins); "
    "a published row never changes: a different row is a conflicting FPM database row and "
    "nothing is written.\n\n"
    "Exit status: 0 published, 1 refused (conflict, damaged table), 2 usage error.")
EPILOG = "Example:\n\nkvrules publish rows.parquet --root published"


def publish(rows: Annotated[Path, typer.Argument(metavar="ROWS", show_default=False,
                                                 help="Rows written by kvrules aggregate.")],
            root: Annotated[Path, typer.Option(
                "--root", metavar="DIR", show_default=False, help="The publication root "
                "(written into; never ROWS or a --rules folder, nor inside one).")],
            rules: opt.KnownRules = None, fmt: opt.FormatOption = opt.Format.text,
            lock_timeout: Annotated[float, typer.Option(
                "--lock-timeout", metavar="SECONDS", min=0,
                help="How long to wait for another publisher's lock before giving up "
                     "(nothing is written then).")] = 600.0) -> None:
    from kvrules.consumers.publish import publish_file
    from kvrules.consumers.render import render_json, render_publication
    with usage_errors():
        check_destination(root, (), (rows, *(rules or ())), Kind.ROOT, option="--root")
        result = publish_file(rows, root, opt.known_policies(rules), lock_timeout,
                              on_wait=lambda message: typer.echo(f"kvrules: {message}",
                                                                 err=True))
        write_text(render_json(result) if fmt is opt.Format.json
                   else render_publication(result), None)
    raise typer.Exit(result.exit_code)


def register(app: typer.Typer) -> None:
    """Add ``publish`` to the root app."""
    app.command("publish", help=HELP, epilog=EPILOG, no_args_is_help=True)(publish)
