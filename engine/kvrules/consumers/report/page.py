"""The HTML page: one self-contained file with the data, plotly, the style and the script.

The summary, the policy and the list of changes are written here as escaped HTML (readable
before any script runs); the cells are drawn by ``report.js`` from the embedded document.
The document is embedded as ``application/json`` with ``<``, ``>``, ``&`` and the two JSON
line separators written as ``\\uXXXX`` escapes, so no evidence string can close the script
element or open a comment. A Content-Security-Policy forbids every network request, and the
output is byte-identical for the same document (sorted keys, no clock).
"""
from __future__ import annotations

import html
import json
import math
import re
from importlib import resources
from typing import Any

from kvrules.diagnostics import KvrulesUsageError

CSP = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
       "img-src data: blob:; font-src data:; connect-src 'none'")
"""Inline scripts and styles only: the page cannot fetch anything, even by accident."""
PLOTLY_PACKAGE = "plotly"
"""The Python package whose ``package_data/plotly.min.js`` the page inlines."""
PLOTLY_HINT = ("kvrules report needs the plotly package for its inlined plotly.min.js: "
               "pip install 'kvrules[report]' (or pip install plotly)")
_JSON_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026",
                 "\u2028": "\\u2028", "\u2029": "\\u2029"}
_CLOSE_SCRIPT = re.compile(r"</(script)", re.IGNORECASE)


def plotly_js() -> str:
    """The text of the plotly.min.js the installed plotly package ships.

    Raises KvrulesUsageError with an install hint when plotly is missing.
    """
    try:
        source = resources.files(PLOTLY_PACKAGE) / "package_data" / "plotly.min.js"
        text = source.read_text(encoding="utf-8")
    except (ModuleNotFoundError, FileNotFoundError, OSError) as exc:
        raise KvrulesUsageError(PLOTLY_HINT) from exc
    return inline_script(text)


def inline_script(text: str) -> str:
    """Script text that cannot end its ``<script>`` element early (``</script`` escaped)."""
    return _CLOSE_SCRIPT.sub(r"<\\/\1", text)


def _asset(name: str) -> str:
    return (resources.files("kvrules.consumers.report") / name).read_text(encoding="utf-8")


def _finite(value: Any) -> Any:
    """The document with non-finite floats as null (JSON has no NaN or Infinity)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


POINT_FIELDS = ("benchmark_id", "point_type", "batch_size", "total_prefill_tokens",
                "total_kv_read_tokens", "native_regime", "kv_seed_regime", "eligible", "status",
                "decided_by")
"""Order of a point's values in the embedded document (a list per point, not an object)."""
STRING_FIELDS = ("point_type", "native_regime", "kv_seed_regime", "status", "decided_by")
"""Point fields embedded as an index into the document's ``strings`` (they repeat a lot)."""
_ROW_FROM_POINT = (("workload_kind", "point_type"), ("batch_size", "batch_size"),
                   ("total_prefill_tokens", "total_prefill_tokens"),
                   ("total_kv_read_tokens", "total_kv_read_tokens"))


class _Strings:
    """A table of distinct strings, in first-seen order (deterministic)."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}

    def ref(self, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        return self.index.setdefault(value, len(self.index))


def _compact_cell(cell: dict[str, Any], strings: _Strings) -> dict[str, Any]:
    """Points as value lists and rows as ``[point, latency_ms, regime]`` (report.js expands).

    A row whose point is unknown or whose coordinate is not its point's stays an object.
    """
    points = cell["points"]
    packed = [[strings.ref(p[f]) if f in STRING_FIELDS else p[f] for f in POINT_FIELDS]
              for p in points]
    rows: list[Any] = []
    for row in cell["rows"]:
        i = row.get("point")
        if i is not None and all(row[r] == points[i][f] for r, f in _ROW_FROM_POINT):
            rows.append([i, row["latency_ms"], strings.ref(row["kv_seed_regime"])])
        else:
            rows.append(row)
    changes = [[i, p["change"]] for i, p in enumerate(points) if "change" in p]
    return {**cell, "points": packed, "rows": rows, "point_changes": changes}


def compact(doc: dict[str, Any]) -> dict[str, Any]:
    """The document as embedded: the same data with points and rows packed (~3x smaller)."""
    strings = _Strings()
    cells = [_compact_cell(c, strings) for c in doc["cells"]]
    return {**doc, "cells": cells, "encoding": "kvrules-report-1",
            "point_fields": list(POINT_FIELDS), "string_fields": list(STRING_FIELDS),
            "strings": list(strings.index)}


def embed_json(doc: dict[str, Any]) -> str:
    """``doc`` as JSON that is safe inside a ``<script type="application/json">`` element."""
    text = json.dumps(_finite(doc), sort_keys=True, ensure_ascii=True, separators=(",", ":"),
                      allow_nan=False)
    return "".join(_JSON_ESCAPES.get(ch, ch) for ch in text)


def _e(value: Any) -> str:
    return html.escape("-" if value is None else str(value), quote=True)


def _table(head: list[str], rows: list[list[str]], numeric: frozenset[int] = frozenset()) -> str:
    """A table of already escaped cells (``numeric`` column indexes align right)."""
    def cls(i: int) -> str:
        return ' class="num"' if i in numeric else ""
    out = ["<div class=\"scroll\"><table><tr>"]
    out += [f"<th{cls(i)}>{h}</th>" for i, h in enumerate(head)]
    out.append("</tr>")
    for row in rows:
        out.append("<tr>" + "".join(f"<td{cls(i)}>{c}</td>" for i, c in enumerate(row)) + "</tr>")
    out.append("</table></div>")
    return "".join(out)


def _swatch(doc: dict[str, Any], regime: str) -> str:
    colour = doc["colours"].get(regime, "#000000")
    return f'<span class="swatch" style="background:{_e(colour)}"></span>'


def _policy_block(policy: dict[str, Any], title: str) -> str:
    params = ", ".join(f"{k}={json.dumps(v)}" for k, v in sorted(policy["parameters"].items()))
    items = [("name", policy["name"]), ("version", policy["version"]),
             ("digest", policy["digest"]), ("parameters", params or "(none)"),
             ("source", policy.get("source"))]
    body = "".join(f"<tr><th>{_e(k)}</th><td><code>{_e(v)}</code></td></tr>" for k, v in items)
    return f'<div class="policy"><h3>{_e(title)}</h3><table>{body}</table></div>'


def _summary(doc: dict[str, Any]) -> str:
    s = doc["summary"]
    cells = s["cells"]
    camp_rows = [[_e(c["campaign"]), str(c["cells"]), str(c["ready"]), str(c["blocked"]),
                  str(c["incomplete"]), "yes" if c["ready_for_full_collection"] else "no"]
                 for c in s["campaigns"]]
    camp_rows.append(["<b>all</b>", str(cells["total"]), str(cells["ready"]),
                      str(cells["blocked"]), str(cells["incomplete"]), ""])
    campaigns = _table(["campaign", "cells", "ready", "blocked", "incomplete",
                        "ready for full collection"], camp_rows, frozenset({1, 2, 3, 4}))
    points = s["points"]
    regimes = [r for r in doc["regimes"] if r in points["by_regime"] or r in s["rows"]["by_regime"]]
    regime_rows = [[_swatch(doc, r) + _e(r), str(points["by_regime"].get(r, 0)),
                    str(points["eligible_by_regime"].get(r, 0)),
                    str(s["rows"]["by_regime"].get(r, 0))] for r in regimes]
    regime_rows.append(["<b>all</b>", str(points["total"]), str(points["eligible"]),
                        str(s["rows"]["total"])])
    by_regime = _table(["formal regime", "points", "eligible", "formal rows"], regime_rows,
                       frozenset({1, 2, 3}))
    policies = _policy_block(doc["policy"], "policy" if "base_policy" not in doc else "head policy")
    if "base_policy" in doc:
        policies = _policy_block(doc["base_policy"], "base policy") + policies
    return ('<section id="summary"><h2>Summary</h2><div class="summary-grid">'
            f"<div><h3>campaigns and cells by readiness</h3>{campaigns}</div>"
            f"<div><h3>points by formal regime</h3>{by_regime}</div>"
            f"{policies}</div></section>")


def _legend(doc: dict[str, Any]) -> str:
    items = [f"<span>{_swatch(doc, r)}{_e(r)}</span>" for r in doc["regimes"]]
    items.append('<span><span class="swatch filled"></span>filled: eligible</span>')
    items.append('<span><span class="swatch open"></span>open: not eligible</span>')
    if doc.get("mode") == "diff":
        items.append('<span><span class="swatch diamond"></span>diamond: changed by the '
                     "policy change</span>")
    items.append("<span>one line per batch size; total_kv_read_tokens 0 is drawn at 0.5</span>")
    return f'<div class="legend" id="legend">{"".join(items)}</div>'


def _changes(doc: dict[str, Any]) -> str:
    """The diff groups, each with its rules and its points linked to their cells."""
    diff = doc.get("changes")
    if diff is None:
        return ""
    index = {(c["campaign"], c["cell_id"]): i for i, c in enumerate(doc["cells"])}
    parts = [f'<section id="changes"><h2>Changes: {diff["changed"]} of {diff["points"]} '
             f'points in {diff["cells"]} cells</h2>']
    if not diff["groups"]:
        parts.append("<p>No point changed status, regime or eligibility.</p>")
    for g in diff["groups"]:
        rules = "; ".join(f"{_e(r['old'])} \u2192 {_e(r['new'])} ({r['count']})"
                          for r in g["rules"])
        parts.append(f"<h3>{_e(g['old'])} \u2192 {_e(g['new'])}: {g['count']} "
                     f"point{'s' if g['count'] != 1 else ''}</h3>"
                     f'<div class="muted">rules: {rules}</div><ul class="changes">')
        for p in g["points"]:
            i = index.get((p["campaign"], p["cell_id"]))
            name = f"{_e(p['campaign'])} {_e(p['cell_id'])}"
            link = f'<a href="#cell-{i}">{name}</a>' if i is not None else name
            parts.append(f"<li>{link} benchmark {_e(p['benchmark_id'])}</li>")
        parts.append("</ul>")
    parts.append("</section>")
    return "".join(parts)


def _filters(doc: dict[str, Any]) -> str:
    changed = ('<label><input type="checkbox" id="filter-changed"> changed only</label>'
               if doc.get("mode") == "diff" else "")
    return ('<div class="filters" id="filters">'
            '<label>readiness <select id="filter-readiness"><option value="">all</option>'
            '<option value="ready">ready</option><option value="blocked">blocked</option>'
            '<option value="incomplete">incomplete</option></select></label>'
            '<label>regime <select id="filter-regime"><option value="">all</option>'
            "</select></label>"
            '<input type="search" id="filter-text" placeholder="filter cells: id, campaign, '
            'error code, message, rule" aria-label="filter cells by text">'
            f'{changed}<span id="filter-count" class="muted"></span></div>')


def render_page(doc: dict[str, Any]) -> str:
    """The whole HTML page for a report document (see :mod:`.model`)."""
    policy = doc["policy"]
    title = ("kvrules diff" if doc.get("mode") == "diff" else "kvrules report") + \
        f": {policy['name']} {policy['version']}"
    return "".join([
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n",
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n',
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n',
        f"<title>{_e(title)}</title>\n<style>\n{_asset('report.css')}</style>\n</head>\n<body>\n",
        f"<h1>{_e(title)}</h1>\n",
        f'<div class="muted">kvrules {_e(doc["kvrules_version"])}; {len(doc["cells"])} cells. '
        "Latencies are the formal rows of kvrules aggregate (per campaign); colours are "
        "formal regimes from the verdicts.</div>\n",
        _summary(doc), "\n", _changes(doc), "\n",
        '<section id="cells-section"><h2>Cells</h2>', _legend(doc), _filters(doc),
        '<noscript>The cell plots need JavaScript.</noscript><div id="cells"></div></section>\n',
        f'<script type="application/json" id="kvrules-data">{embed_json(compact(doc))}</script>\n',
        f"<script>{plotly_js()}</script>\n",
        f"<script>{inline_script(_asset('report.js'))}</script>\n",
        "</body></html>\n"])
