"""``kvrules rules check|test``: tools for policy authors (a typer sub-app named ``app``)."""
from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from kvrules.authoring.lint import CHECKS
from kvrules.cli.common import usage_errors, write_text

app = typer.Typer(name="rules", no_args_is_help=True, add_completion=False,
                  help="Check and test policy rule files.")


@app.callback()
def _rules() -> None:
    """Check and test policy rule files."""


class Format(str, Enum):
    text = "text"
    json = "json"


DirArg = Annotated[Optional[Path], typer.Argument(
    metavar="[DIR]", help="Policy directory (default: the shipped policy).",
    show_default=False)]
FormatOpt = Annotated[Format, typer.Option("--format", "-f", case_sensitive=False,
                                           help="text for people, json for tools.")]

CHECK_HELP = (
    "Validate a policy against the rule schema and analyse it: unknown facts, fields and "
    "parameters, type mismatches, contradictory conditions, rules that can never fire, "
    "derived facts nothing reads, duplicate ids, regimes decided without an order, and "
    "regimes or error codes outside the declared vocabulary.\n\n"
    "Exit status: 0 no error findings (warnings allowed), 1 error findings, "
    "2 unusable input (no such directory, no rule files, unknown check id).\n\n"
    f"Check ids (for --disable): {', '.join(CHECKS)}.")
CHECK_EPILOG = (
    "Example: my-policy/ holds the shipped policy.yaml and an extra.yaml of one line:\n\n"
    "rules: [{id: empty_range, description: d, reason: r, then: {fail: {group: "
    "dense_synthetic_kv, condition: D9, reason: r}}, when: [{fact: point, where: "
    "{total_kv_read_tokens: {lt: 1}, all: [{total_kv_read_tokens: {gt: 5}}]}}]}]\n\n"
    "kvrules rules check my-policy/ reports (among warnings for derived facts no rule "
    "reads)\n\n"
    "my-policy/extra.yaml:1:212: rule_contradictory_conditions: point: total_kv_read_tokens "
    "lt 1 and total_kv_read_tokens gt 5 can never hold together, so the rule can never fire "
    "(rule: empty_range)")


@app.command("check", help=CHECK_HELP, epilog=CHECK_EPILOG)
def check(
    directory: DirArg = None,
    fmt: FormatOpt = Format.text,
    disable: Annotated[list[str], typer.Option(
        "--disable", metavar="ID", help="Skip a lint check (repeatable).",
        show_default=False)] = [],
    max_errors: Annotated[int, typer.Option(
        "--max-errors", min=0, metavar="N", help="Show at most N findings (0: all).")] = 0,
) -> None:
    from kvrules.authoring.check import check_policy
    from kvrules.authoring.render import render_check_json, render_check_text
    with usage_errors():
        result = check_policy(str(directory) if directory else None, disable)
        text = render_check_json(result) if fmt is Format.json \
            else render_check_text(result, max_errors or None)
        write_text(text, None)
    raise typer.Exit(result.exit_code)


class TestFormat(str, Enum):
    pretty = "pretty"
    json = "json"


TEST_HELP = (
    "Run the policy's test cases (YAML files in DIR/tests/, or --tests) and report coverage: "
    "rules that fired in at least one case, and conditions seen both true and false where "
    "they decided their pattern.\n\n"
    "Exit status: 0 every case passed and coverage meets the thresholds, 1 a case failed or "
    "coverage is below a threshold, 2 unusable input (invalid policy or test files).")
TEST_EPILOG = (
    "Example: my-policy/tests/dense.yaml with\n\n"
    "cases: [{note: sliding window fails D9, facts: {...}, "
    "want: {dense_synthetic_kv: {failed: [D9]}, regime: fake_fallback}}]\n\n"
    "kvrules rules test my-policy/ --min-coverage 100")


@app.command("test", help=TEST_HELP, epilog=TEST_EPILOG)
def test(
    directory: DirArg = None,
    tests: Annotated[Optional[Path], typer.Option(
        "--tests", metavar="PATH", help="Test file or folder (default: DIR/tests/).",
        show_default=False)] = None,
    fmt: Annotated[TestFormat, typer.Option("--format", "-f", case_sensitive=False,
                                            help="pretty for people, json for tools.")]
    = TestFormat.pretty,
    min_coverage: Annotated[float, typer.Option(
        "--min-coverage", min=0, max=100, metavar="N",
        help="Fail when rule coverage is below N percent.")] = 0,
    min_condition_coverage: Annotated[float, typer.Option(
        "--min-condition-coverage", min=0, max=100, metavar="N",
        help="Fail when condition coverage is below N percent.")] = 0,
    verbose: Annotated[bool, typer.Option(
        "--verbose", "-v", help="Also list passing cases and partly covered conditions.")]
    = False,
) -> None:
    from kvrules.authoring.testing import run_policy_tests
    from kvrules.authoring.testing_report import render_test_json, render_test_pretty
    with usage_errors():
        run = run_policy_tests(str(directory) if directory else None,
                               str(tests) if tests else None)
        text = render_test_json(run, min_coverage, min_condition_coverage) \
            if fmt is TestFormat.json \
            else render_test_pretty(run, min_coverage, min_condition_coverage, verbose)
        write_text(text, None)
    raise typer.Exit(run.exit_code(min_coverage, min_condition_coverage))
