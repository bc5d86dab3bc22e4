"""``kvrules rules check|test``: tools for policy authors (a typer sub-app named ``app``)."""
from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from kvrules.authoring.lint_ids import CHECK_IDS
from kvrules.cli.common import usage_errors, write_text
from kvrules.diagnostics import KvrulesUsageError

app = typer.Typer(name="rules", no_args_is_help=True, add_completion=False,
                  help="Check and test policy rule files.")


@app.callback()
def _rules() -> None:
    """Check and test policy rule files."""


class Format(str, Enum):
    text = "text"
    json = "json"
    github = "github"
    sarif = "sarif"


PathsArg = Annotated[Optional[list[str]], typer.Argument(
    metavar="[PATH]...", help="Policy folders, or rule and case files (each checks the "
    "policy it belongs to). Default: ./rules when it holds a policy, else the shipped one.",
    show_default=False)]
FormatOpt = Annotated[Format, typer.Option(
    "--format", "-f", case_sensitive=False,
    help="text for people, json for tools, github for workflow annotations, sarif for "
    "code scanning and editors.")]

CHECK_HELP = (
    "Validate a policy against the rule schema and analyse it: unknown facts, fields and "
    "parameters, type mismatches, contradictory conditions, rules that can never fire, "
    "derived facts nothing reads, duplicate ids, regimes decided without an order, and "
    "regimes or error codes outside the declared vocabulary.\n\n"
    "Exit status: 0 no error findings (warnings allowed), 1 error findings, "
    "2 unusable input (no such directory, no rule files, unknown check id).\n\n"
    f"Check ids (for --disable): {', '.join(CHECK_IDS)}.")
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
    paths: PathsArg = None,
    fmt: FormatOpt = Format.text,
    disable: Annotated[list[str], typer.Option(
        "--disable", metavar="ID", help="Skip a lint check (repeatable).",
        show_default=False)] = [],
    max_errors: Annotated[int, typer.Option(
        "--max-errors", min=0, metavar="N", help="Show at most N findings (0: all).")] = 0,
) -> None:
    from kvrules.authoring.check import check_policy
    from kvrules.authoring.ci_formats import render_check_github, render_check_sarif_runs
    from kvrules.authoring.locate import policy_folders
    from kvrules.authoring.render import render_check_json, render_check_text
    with usage_errors():
        results = [check_policy(folder, disable) for folder in policy_folders(paths or [])]
        if fmt is Format.sarif:
            text = render_check_sarif_runs(results)
        elif fmt is Format.json:
            text = "".join(render_check_json(r) for r in results)
        elif fmt is Format.github:
            text = "".join(render_check_github(r) for r in results)
        else:
            text = "".join(render_check_text(r, max_errors or None) for r in results)
        write_text(text, None)
    raise typer.Exit(max(r.exit_code for r in results))


class TestFormat(str, Enum):
    text = "text"
    json = "json"
    github = "github"
    junit = "junit"


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
    paths: PathsArg = None,
    tests: Annotated[Optional[Path], typer.Option(
        "--tests", metavar="PATH", help="Test file or folder (default: DIR/tests/).",
        show_default=False)] = None,
    fmt: Annotated[TestFormat, typer.Option(
        "--format", "-f", case_sensitive=False,
        help="text for people, json for tools, github for workflow annotations, junit "
        "for CI test reports.")] = TestFormat.text,
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
    from kvrules.authoring.ci_formats import render_test_github, render_test_junit
    from kvrules.authoring.locate import policy_folders
    from kvrules.authoring.testing import run_policy_tests
    from kvrules.authoring.testing_report import render_test_json, render_test_pretty
    limits = (min_coverage, min_condition_coverage)
    with usage_errors():
        folders = policy_folders(paths or [])
        if tests is not None and len(folders) > 1:
            raise KvrulesUsageError("--tests takes one policy; "
                                    f"these paths name {len(folders)}")
        runs = [run_policy_tests(folder, str(tests) if tests else None) for folder in folders]
        render = {TestFormat.json: render_test_json, TestFormat.github: render_test_github,
                  TestFormat.junit: render_test_junit}.get(fmt)
        text = "".join(render(run, *limits) if render else
                       render_test_pretty(run, *limits, verbose) for run in runs)
        write_text(text, None)
    raise typer.Exit(max(run.exit_code(*limits) for run in runs))
