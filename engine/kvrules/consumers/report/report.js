/* kvrules report: draws the cells of the embedded document, one cell when it is first seen.
 *
 * Every string from the evidence is put in the page with textContent (never as HTML); hover
 * text for plotly is entity-escaped because plotly reads a small HTML subset there.
 */
(function () {
  "use strict";
  /* The embedded points are value lists and the rows [point, latency_ms, regime] (page.py
   * compact); expand them back into the objects of the report document. */
  function expand(doc) {
    if (doc.encoding !== "kvrules-report-1") { return doc; }
    var strings = doc.strings;
    var isString = {};
    doc.string_fields.forEach(function (f) { isString[f] = true; });
    doc.cells.forEach(function (cell) {
      cell.points = cell.points.map(function (values) {
        var point = {};
        doc.point_fields.forEach(function (f, i) {
          point[f] = isString[f] && values[i] !== null ? strings[values[i]] : values[i];
        });
        return point;
      });
      cell.point_changes.forEach(function (pair) { cell.points[pair[0]].change = pair[1]; });
      cell.rows = cell.rows.map(function (row) {
        if (!Array.isArray(row)) { return row; }
        var p = cell.points[row[0]];
        var out = {point: row[0], workload_kind: p.point_type, batch_size: p.batch_size,
                   total_prefill_tokens: p.total_prefill_tokens,
                   total_kv_read_tokens: p.total_kv_read_tokens, latency_ms: row[1],
                   kv_seed_regime: strings[row[2]], benchmark_id: p.benchmark_id,
                   native_regime: p.native_regime, eligible: p.eligible,
                   decided_by: p.decided_by, changed: Boolean(p.change)};
        if (p.change) { out.change = p.change; }
        return out;
      });
    });
    return doc;
  }

  var doc = expand(JSON.parse(document.getElementById("kvrules-data").textContent));
  var colours = doc.colours;
  var LINE_COLOURS = ["#555555", "#1f77b4", "#8c564b", "#17becf", "#bcbd22", "#7f7f7f",
                      "#9467bd", "#2ca02c"];
  var ZERO_KV_X = 0.5;
  var container = document.getElementById("cells");
  var sections = [];
  var pending = 0;

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) { node.className = cls; }
    if (text !== undefined && text !== null) { node.textContent = String(text); }
    return node;
  }

  function plotlyText(value) {
    return String(value === null || value === undefined ? "-" : value)
      .replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  }

  function colourOf(regime) {
    return colours[regime === null || regime === undefined ? "error" : regime] || "#000000";
  }

  function swatch(regime) {
    var s = el("span", "swatch");
    s.style.background = colourOf(regime);
    return s;
  }

  function haystack(cell) {
    var parts = [cell.campaign, cell.cell_id, cell.workload_kind, cell.status, cell.readiness];
    cell.errors.concat(cell.left_out).forEach(function (e) {
      parts.push(e.code, e.message, e.file, e.pointer, e.rule);
    });
    cell.points.forEach(function (p) { parts.push(p.decided_by, p.native_regime); });
    cell.blockers.forEach(function (b) { parts.push(b); });
    return parts.filter(function (x) { return x; }).join("\n").toLowerCase();
  }

  function header(cell, index) {
    var h = el("h3", "cell-title");
    h.appendChild(el("span", "badge " + cell.readiness, cell.readiness));
    var link = el("a", "cell-id", cell.cell_id);
    link.href = "#cell-" + index;
    h.appendChild(link);
    var meta = el("div", "cell-meta");
    var text = cell.campaign + " \u00b7 " + (cell.workload_kind || "-") + " \u00b7 " +
      cell.status + " \u00b7 " + cell.points_eligible + "/" + cell.points_total + " eligible";
    if (doc.mode === "diff" && cell.changed) { text += " \u00b7 " + cell.changed + " changed"; }
    meta.appendChild(el("span", null, text));
    Object.keys(cell.counts).forEach(function (regime) {
      var tag = el("span", "count");
      tag.appendChild(swatch(regime));
      tag.appendChild(document.createTextNode(regime + " " + cell.counts[regime]));
      meta.appendChild(tag);
    });
    var wrap = el("div");
    wrap.appendChild(h);
    wrap.appendChild(meta);
    return wrap;
  }

  function seriesKey(row, mixed) {
    return (mixed ? row.workload_kind + " " : "") + "batch " + row.batch_size;
  }

  function hoverText(row) {
    var lines = ["benchmark " + plotlyText(row.benchmark_id),
                 "native regime: " + plotlyText(row.native_regime),
                 "formal regime: " + plotlyText(row.kv_seed_regime),
                 "eligible: " + (row.eligible ? "yes" : "no"),
                 "decided by: " + plotlyText(row.decided_by),
                 "batch " + row.batch_size + ", kv " + row.total_kv_read_tokens +
                   ", prefill " + row.total_prefill_tokens,
                 "latency_ms: " + plotlyText(row.latency_ms)];
    if (row.change) {
      lines.push("changed: " + plotlyText(row.change.old) + " \u2192 " + plotlyText(row.change.new));
    }
    return lines.join("<br>");
  }

  function traces(cell) {
    var rows = cell.rows.filter(function (r) { return r.latency_ms !== null; });
    var kinds = {};
    rows.forEach(function (r) { kinds[r.workload_kind] = true; });
    var mixed = Object.keys(kinds).length > 1;
    var groups = {};
    var order = [];
    rows.forEach(function (r) {
      var key = seriesKey(r, mixed);
      if (!groups[key]) { groups[key] = []; order.push(key); }
      groups[key].push(r);
    });
    return order.map(function (key, i) {
      var members = groups[key].slice().sort(function (a, b) {
        return a.total_kv_read_tokens - b.total_kv_read_tokens;
      });
      var markerColours = members.map(function (r) { return colourOf(r.kv_seed_regime); });
      return {
        type: "scatter", mode: "lines+markers", name: key,
        x: members.map(function (r) { return r.total_kv_read_tokens > 0 ? r.total_kv_read_tokens : ZERO_KV_X; }),
        y: members.map(function (r) { return r.latency_ms; }),
        text: members.map(hoverText),
        hovertemplate: "%{text}<extra>" + plotlyText(key) + "</extra>",
        line: {color: LINE_COLOURS[i % LINE_COLOURS.length], width: 1.2},
        marker: {
          size: members.map(function (r) { return r.changed ? 13 : 9; }),
          color: markerColours,
          symbol: members.map(function (r) {
            return (r.changed ? "diamond" : "circle") + (r.eligible ? "" : "-open");
          }),
          line: {width: 2, color: markerColours}
        }
      };
    });
  }

  function drawPlot(target, cell) {
    var data = traces(cell);
    var layout = {
      height: 320, margin: {l: 56, r: 12, t: 12, b: 48}, hovermode: "closest",
      xaxis: {type: "log", title: {text: "total_kv_read_tokens (log)"}, automargin: true},
      yaxis: {title: {text: "latency_ms"}, automargin: true, rangemode: "tozero"},
      legend: {orientation: "h", y: -0.25}, showlegend: true,
      paper_bgcolor: "#ffffff", plot_bgcolor: "#fbfbfb"
    };
    var config = {responsive: true, displaylogo: false, modeBarButtonsToRemove: ["select2d", "lasso2d"]};
    pending += 1;
    return window.Plotly.newPlot(target, data, layout, config).then(function () {
      target.setAttribute("data-marks", String(cell.rows.filter(function (r) { return r.latency_ms !== null; }).length));
      pending -= 1;
    }, function (err) {
      pending -= 1;
      throw err;
    });
  }

  function conditions(cell) {
    var box = el("div", "conditions");
    cell.qualifications.forEach(function (q) {
      var title = el("div", "qual-title", q.group + ": " +
        (!q.evaluated ? "not evaluated" : (q.eligible ? "eligible" : "not eligible")));
      box.appendChild(title);
      var list = el("ul", "marks");
      q.conditions.forEach(function (c) {
        var state = !q.evaluated ? "unknown" : (c.passed ? "pass" : "fail");
        var item = el("li", "mark " + state);
        item.title = c.description;
        item.appendChild(el("span", "mark-sign", state === "pass" ? "\u2713" : (state === "fail" ? "\u2717" : "?")));
        item.appendChild(el("span", "mark-id", c.id));
        item.appendChild(el("span", "mark-desc", c.description));
        c.reasons.forEach(function (r) { item.appendChild(el("div", "mark-reason", r)); });
        list.appendChild(item);
      });
      box.appendChild(list);
    });
    return box;
  }

  function diagnostics(title, items) {
    var box = el("div", "errors");
    box.appendChild(el("div", "errors-title", title));
    var list = el("ul");
    items.forEach(function (e) {
      var item = el("li");
      item.appendChild(el("code", "code", e.code));
      item.appendChild(el("span", "message", " " + e.message));
      var where = el("div", "where");
      where.appendChild(el("span", null, "file "));
      where.appendChild(el("code", null, e.file || "-"));
      where.appendChild(el("span", null, " pointer "));
      where.appendChild(el("code", null, e.pointer || "(whole file)"));
      if (e.rule) {
        where.appendChild(el("span", null, " rule "));
        where.appendChild(el("code", null, e.rule));
      }
      item.appendChild(where);
      list.appendChild(item);
    });
    box.appendChild(list);
    return box;
  }

  function pointsTable(cell) {
    var details = el("details", "points");
    details.appendChild(el("summary", null, "points (" + cell.points.length + ")"));
    details.addEventListener("toggle", function () {
      if (!details.open || details.querySelector("table")) { return; }
      var wrap = el("div", "scroll");
      var table = el("table");
      var cols = ["benchmark_id", "point_type", "batch_size", "total_prefill_tokens",
                  "total_kv_read_tokens", "native_regime", "kv_seed_regime", "eligible",
                  "status", "decided_by"];
      if (doc.mode === "diff") { cols.push("change"); }
      var head = el("tr");
      cols.forEach(function (c) { head.appendChild(el("th", null, c)); });
      table.appendChild(head);
      cell.points.forEach(function (p) {
        var tr = el("tr", p.change ? "changed" : null);
        cols.forEach(function (c) {
          var v = p[c];
          if (c === "change") { v = p.change ? p.change.old + " \u2192 " + p.change.new : ""; }
          if (c === "eligible") { v = p.eligible ? "yes" : "no"; }
          var td = el("td", null, v === null || v === undefined ? "-" : v);
          if (c === "kv_seed_regime") { td.insertBefore(swatch(p.kv_seed_regime), td.firstChild); }
          tr.appendChild(td);
        });
        table.appendChild(tr);
      });
      wrap.appendChild(table);
      details.appendChild(wrap);
    });
    return details;
  }

  function renderBody(entry) {
    if (entry.rendered) { return; }
    entry.rendered = true;
    var cell = entry.cell;
    var body = entry.body;
    body.textContent = "";
    if (cell.errors.length) { body.appendChild(diagnostics("evidence errors", cell.errors)); }
    if (cell.left_out.length) {
      body.appendChild(diagnostics("left out of the formal rows", cell.left_out));
    }
    if (cell.blockers.length) {
      var blockers = el("ul", "blockers");
      cell.blockers.forEach(function (b) { blockers.appendChild(el("li", null, b)); });
      body.appendChild(blockers);
    }
    if (cell.rows.length) {
      var plot = el("div", "plot");
      body.appendChild(plot);
      drawPlot(plot, cell);
    } else {
      body.appendChild(el("p", "no-rows", "No formal rows: nothing to plot."));
    }
    body.appendChild(conditions(cell));
    body.appendChild(pointsTable(cell));
    entry.section.setAttribute("data-rendered", "1");
  }

  function matches(entry, filter) {
    var cell = entry.cell;
    if (filter.readiness && cell.readiness !== filter.readiness) { return false; }
    if (filter.regime && !(filter.regime in cell.counts)) { return false; }
    if (filter.changed && !cell.changed) { return false; }
    return !filter.text || entry.haystack.indexOf(filter.text) >= 0;
  }

  function currentFilter() {
    var changed = document.getElementById("filter-changed");
    return {
      readiness: document.getElementById("filter-readiness").value,
      regime: document.getElementById("filter-regime").value,
      text: document.getElementById("filter-text").value.trim().toLowerCase(),
      changed: Boolean(changed && changed.checked)
    };
  }

  function applyFilter() {
    var filter = currentFilter();
    var shown = 0;
    sections.forEach(function (entry) {
      var ok = matches(entry, filter);
      entry.section.hidden = !ok;
      if (ok) { shown += 1; }
    });
    document.getElementById("filter-count").textContent =
      shown + " of " + sections.length + " cells shown";
  }

  function setupFilter() {
    var select = document.getElementById("filter-regime");
    doc.regimes.forEach(function (regime) {
      var option = el("option", null, regime);
      option.value = regime;
      select.appendChild(option);
    });
    ["filter-readiness", "filter-regime", "filter-changed"].forEach(function (id) {
      var node = document.getElementById(id);
      if (node) { node.addEventListener("change", applyFilter); }
    });
    document.getElementById("filter-text").addEventListener("input", applyFilter);
  }

  function build() {
    var observer = null;
    if ("IntersectionObserver" in window) {
      observer = new IntersectionObserver(function (items) {
        items.forEach(function (item) {
          if (item.isIntersecting) {
            var entry = sections[Number(item.target.getAttribute("data-index"))];
            renderBody(entry);
            observer.unobserve(item.target);
          }
        });
      }, {rootMargin: "400px 0px"});
    }
    doc.cells.forEach(function (cell, index) {
      var section = el("section", "cell " + cell.readiness + (cell.changed ? " changed" : ""));
      section.id = "cell-" + index;
      section.setAttribute("data-index", String(index));
      section.setAttribute("data-readiness", cell.readiness);
      section.appendChild(header(cell, index));
      var body = el("div", "cell-body");
      body.appendChild(el("p", "placeholder", "drawn when scrolled into view"));
      section.appendChild(body);
      container.appendChild(section);
      var entry = {cell: cell, section: section, body: body, rendered: false,
                   haystack: haystack(cell)};
      sections.push(entry);
      if (observer) { observer.observe(section); } else { renderBody(entry); }
    });
    setupFilter();
    applyFilter();
  }

  window.kvrulesReport = {
    document: doc,
    renderAll: function () {
      sections.forEach(function (entry) { if (!entry.section.hidden) { renderBody(entry); } });
    },
    pending: function () { return pending; },
    rendered: function () {
      return sections.filter(function (entry) { return entry.rendered; }).length;
    }
  };
  build();
}());
