"""``kvrules report``: one self-contained HTML page of what the policy decided, cell by cell.

Library entry points (the CLI is a thin layer over them)::

    >>> from kvrules import api
    >>> from kvrules.consumers import report
    >>> page = report.report_html(["examples/dense-sliding-window"], api.load_policy())
    >>> page.startswith("<!DOCTYPE html>")
    True

:func:`report_document` gives the same page as data. The latencies are the formal rows of
:mod:`kvrules.consumers.aggregate`, the readiness that of :mod:`kvrules.consumers.readiness`;
nothing here decides a regime or an eligibility.
"""
from __future__ import annotations

from typing import Any, Sequence

from kvrules import api
from kvrules.consumers.report.model import Change, Key, build_document, policy_info
from kvrules.consumers.report.page import plotly_js, render_page
from kvrules.verdicts.model import Report

__all__ = ["Change", "Key", "diff_document", "diff_html", "plotly_js", "render_page",
           "report_document", "report_html"]


def report_document(paths: Sequence[str], policy: api.Policy | None = None,
                    plan: str | None = None, run: api.Run = api.Run()) -> dict[str, Any]:
    """Classify ``paths`` on ``run`` and return the report as a JSON-ready document."""
    policy = policy or api.load_policy()
    verdicts = run.classify(paths, policy, plan)
    return {**build_document(verdicts, policy_info(policy), plan), "mode": "report"}


def report_html(paths: Sequence[str], policy: api.Policy | None = None,
                plan: str | None = None, run: api.Run = api.Run()) -> str:
    """Classify ``paths`` on ``run`` and return the whole HTML page (raises
    KvrulesUsageError)."""
    plotly_js()  # fail on a missing plotly before classifying anything
    return render_page(report_document(paths, policy, plan, run))


def diff_document(head_report: Report, head: api.Policy, base: api.Policy,
                  changes: dict[Key, Change], diff: dict[str, Any],
                  plan: str | None = None) -> dict[str, Any]:
    """The report of ``head_report`` with the changed points of a policy diff marked.

    ``changes`` maps ``(campaign, cell_id, benchmark_id)`` to the point's old and new outcome
    and ``diff`` is the diff as a dictionary (``kvrules.authoring.diff.diff_dict``).
    """
    extra = {"mode": "diff", "base_policy": policy_info(base).to_dict(), "changes": diff}
    return build_document(head_report, policy_info(head), plan, changes, extra)


def diff_html(head_report: Report, head: api.Policy, base: api.Policy,
              changes: dict[Key, Change], diff: dict[str, Any],
              plan: str | None = None) -> str:
    """:func:`diff_document` as the HTML page."""
    return render_page(diff_document(head_report, head, base, changes, diff, plan))
