"""``kvrules verify``: check the commit record of every published table (spec 6.3)."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kvrules.cli import options as opt
from kvrules.cli.common import usage_errors, write_text

HELP = (
    "Verify the commit records of published tables (spec 6.3).\n\n"
    "Verify every published table under DIR (a root or one table folder): the parquet "
    "digest and row count, the schema version (6 is historical), the record's identity, and "
    "the kv_seed_classification marker. A marker policy is known when it is the shipped "
    "policy or one given with --rules.\n\n"
    "Exit status: 0 every table verifies, 1 some table fails, 2 usage error.")
EPILOG = "Example:\n\nkvrules verify published"


def verify(root: Annotated[Path, typer.Argument(metavar="DIR", show_default=False,
                                                help="A publication root or table folder.")],
           rules: opt.KnownRules = None, fmt: opt.FormatOption = opt.Format.text) -> None:
    from kvrules.consumers.render import render_json, render_verification
    from kvrules.consumers.verify import verify as check
    with usage_errors():
        result = check(root, opt.known_policies(rules))
        write_text(render_json(result) if fmt is opt.Format.json
                   else render_verification(result), None)
    raise typer.Exit(result.exit_code)


def register(app: typer.Typer) -> None:
    """Add ``verify`` to the root app."""
    app.command("verify", help=HELP, epilog=EPILOG, no_args_is_help=True)(verify)
