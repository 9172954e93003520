"""The report page every plan kind shares: a headline of figures read from the kind's JSON
summary, feasibility with its reasons, then the kind's charts, as one self-contained HTML
file that opens offline.

A kind contributes a `KindPage` (headline keys and charts) from the `page` hook it
registers; this module owns the layout, so a new kind adds a page without touching it.
plotly.js (4.8 MB minified) is inlined gzip-compressed and unpacked by the browser's own
DecompressionStream, which keeps a page well under 5 MB. A tiny collector records every
JavaScript error into the page (`#js-errors`), and `body[data-rendered]` says how many
charts finished drawing, so a headless browser's DOM dump tells whether the page works.
"""

import base64
import gzip
import html
import json
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import plotly.graph_objects as go
from plotly.offline import get_plotlyjs


@dataclass(frozen=True)
class Headline:
    """One headline figure: `key` is its dotted path in the kind's JSON summary (so the page
    and `--json` show the same number), shown as value x `scale` with `unit`."""

    label: str
    key: str
    unit: str = ""
    scale: float = 1.0
    digits: int = 3


@dataclass(frozen=True)
class Chart:
    """A titled figure with the one line that says what to read from it."""

    title: str
    caption: str
    figure: go.Figure


@dataclass(frozen=True)
class TableBlock:
    """A titled table of text cells, shown after the charts (a comparison's ranked rows)."""

    title: str
    columns: list[str]
    rows: list[list[str]]
    sortable: bool = False  # a click on a heading sorts the rows by it (again: reversed)


@dataclass
class KindPage:
    """What a plan kind puts on the page; `notes` are lines shown under the charts (e.g. a
    sweep the strategy does not allow). A kind whose report gives a summary marks its
    headline figures there (estimate.summary.Figure.headline) and lists none here."""

    charts: list[Chart]
    headline: list[Headline] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    tables: list[TableBlock] = field(default_factory=list)


def lookup(summary: dict[str, Any], key: str) -> Any:
    value: Any = summary
    for part in key.split("."):
        value = value[part]
    return value


def _figure(h: Headline, summary: dict[str, Any]) -> str:
    value = lookup(summary, h.key)
    shown = f"{value * h.scale:,.{h.digits}f}" if isinstance(value, float) else f"{value:,}"
    return (f'<div class="figure" data-key="{html.escape(h.key)}" '
            f'data-value="{html.escape(json.dumps(value))}" data-scale="{h.scale!r}">'
            f'<span class="label">{html.escape(h.label)}</span>'
            f'<span class="value">{shown}</span> <span class="unit">{html.escape(h.unit)}'
            f'</span></div>')


def _feasibility(summary: dict[str, Any]) -> str:
    """The verdict and its reasons, where the kind's summary gives them."""
    if "feasible" not in summary:
        return ""
    ok = bool(summary["feasible"])
    reasons = "".join(f"<li>{html.escape(r)}</li>" for r in summary.get("reasons", []))
    verdict = "feasible: fits every device's resources" if ok else "infeasible"
    return (f'<div id="feasibility" class="{"ok" if ok else "bad"}" data-feasible='
            f'"{str(ok).lower()}"><b>{verdict}</b>{f"<ul>{reasons}</ul>" if reasons else ""}'
            "</div>")


def _chart(index: int, chart: Chart) -> tuple[str, str]:
    """The chart's section and the JavaScript call that draws it."""
    fig = chart.figure
    if not fig.layout.xaxis.title.text or not fig.layout.yaxis.title.text:
        raise ValueError(f"chart '{chart.title}' lacks an axis title")  # a kind's bug, not input
    # a chart of many rows (a kernel per row) sets its own height; the rest are 420 px
    fig.update_layout(margin={"t": 30, "b": 60, "l": 70, "r": 20},
                      height=fig.layout.height or 420, template="plotly_white")
    div = f"chart-{index}"
    section = (f'<section class="chart"><h2>{html.escape(chart.title)}</h2>'
               f'<p class="caption">{html.escape(chart.caption)}</p>'
               f'<div id="{div}" class="plot"></div></section>')
    return section, f"draw('{div}', {fig.to_json()});"


@lru_cache(maxsize=1)
def _packed_plotly() -> str:
    return base64.b64encode(gzip.compress(get_plotlyjs().encode(), 9, mtime=0)).decode()


_COLLECTOR = """<script>
window.__errors = [];
function noteError(text) {
  window.__errors.push(text);
  var box = document.getElementById('js-errors');
  if (box) box.textContent = window.__errors.join('\\n');
}
window.addEventListener('error', function (e) { noteError(String(e.message)); });
window.addEventListener('unhandledrejection', function (e) { noteError(String(e.reason)); });
var started = performance.now(), pending = [];
function draw(div, fig) { pending.push([div, fig]); }
</script>"""

_LOADER = """<script>
async function loadPlotly() {
  var packed = await fetch('data:application/gzip;base64,' +
                           document.getElementById('plotly-gz').textContent);
  var stream = packed.body.pipeThrough(new DecompressionStream('gzip'));
  var script = document.createElement('script');
  script.textContent = await new Response(stream).text();
  document.head.appendChild(script);
}
loadPlotly().then(function () {
  document.body.dataset.plotlyMs = String(Math.round(performance.now() - started));
  return Promise.all(pending.map(function (p) {
    return Plotly.newPlot(p[0], p[1].data, p[1].layout, {responsive: true,
                                                         displaylogo: false});
  }));
}).then(function () {
  document.body.dataset.renderMs = String(Math.round(performance.now() - started));
  document.body.dataset.rendered = String(pending.length);
}).catch(function (e) { noteError('drawing failed: ' + e); });
</script>"""

_STYLE = """<style>
body { font-family: system-ui, sans-serif; margin: 24px auto; max-width: 1100px;
       color: #222; }
h1 { margin-bottom: 4px; font-size: 26px; white-space: nowrap; overflow: hidden;
     text-overflow: ellipsis; } .sub { color: #555; margin-top: 0; }
#headline { display: flex; flex-wrap: wrap; gap: 12px; margin: 16px 0; }
.figure { border: 1px solid #ddd; border-radius: 6px; padding: 8px 14px; min-width: 150px; }
.figure .label { display: block; color: #555; font-size: 13px; }
.figure .value { font-size: 24px; font-weight: 600; }
#feasibility { padding: 8px 14px; border-radius: 6px; }
#feasibility.ok { background: #e8f5e9; } #feasibility.bad { background: #fdecea; }
.chart { margin-top: 28px; } .chart h2 { margin-bottom: 2px; font-size: 19px; }
.caption { color: #444; margin-top: 0; font-size: 14px; }
.notes { color: #555; font-size: 14px; } #js-errors { color: #b00; }
</style>"""


_TABLE_STYLE = ("<style>table { border-collapse: collapse; font-size: 13px; } th, td { "
                "border-bottom: 1px solid #ddd; padding: 3px 8px; text-align: right; } "
                "td { white-space: nowrap; } table.sortable th { cursor: pointer; } "
                "th[data-sort=asc]::after { content: ' ▲'; } "
                "th[data-sort=desc]::after { content: ' ▼'; }</style>")


# Sorts a table.sortable by the clicked heading's column: numbers (a cell that is a number,
# after marks like ✓ and before a unit; thousands' commas dropped) before text, empty and
# unknown ("?") cells last; a second click on the same heading reverses. Plain DOM.
_SORTER = r"""<script>
var NUMBER = /^[^\w.+-]*([-+]?\d*\.?\d+(?:e[-+]?\d+)?)(?:\s|$)/i;
function cellKey(td) {
  var text = td.textContent.trim(), m = text.replace(/,/g, '').match(NUMBER);
  return m ? [0, parseFloat(m[1])] : (text && text !== '?' ? [1, text] : [2, '']);
}
function sortTable(th) {
  var table = th.closest('table'), body = table.tBodies[0], col = th.cellIndex;
  var down = th.dataset.sort === 'asc';
  table.querySelectorAll('th').forEach(function (h) { delete h.dataset.sort; });
  th.dataset.sort = down ? 'desc' : 'asc';
  var rows = Array.from(body.rows).map(function (r) { return [cellKey(r.cells[col]), r]; });
  rows.sort(function (a, b) {
    var x = a[0], y = b[0];
    if (x[0] !== y[0]) return x[0] - y[0];
    var c = x[1] < y[1] ? -1 : x[1] > y[1] ? 1 : 0;
    return down ? -c : c;
  });
  rows.forEach(function (r) { body.appendChild(r[1]); });
}
document.addEventListener('click', function (e) {
  var th = e.target.closest && e.target.closest('table.sortable th');
  if (th) sortTable(th);
});
</script>"""


def _table(block: TableBlock) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in block.columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>"
                    for row in block.rows)
    sort = (' class="sortable"', _SORTER) if block.sortable else ("", "")
    return (f'<section class="table">{_TABLE_STYLE}<h2>{html.escape(block.title)}</h2>'
            f"<table{sort[0]}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
            f"{sort[1]}</section>")


def render(title: str, subtitle: str, summary: dict[str, Any], page: KindPage) -> str:
    """The whole HTML document of one plan's report."""
    sections, calls = zip(*(_chart(i, c) for i, c in enumerate(page.charts)), strict=True) \
        if page.charts else ((), ())
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in page.notes)
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title>", _COLLECTOR, _STYLE, "</head><body>",
        f"<h1 title='{html.escape(title)}'>{html.escape(title)}</h1>",
        f"<p class='sub'>{html.escape(subtitle)}</p>",
        '<section id="headline">', *(_figure(h, summary) for h in page.headline), "</section>",
        _feasibility(summary), *sections, *(_table(t) for t in page.tables),
        f'<ul class="notes">{notes}</ul>' if notes else "",
        '<pre id="js-errors"></pre>',
        f'<script type="application/octet-stream" id="plotly-gz">{_packed_plotly()}</script>',
        "<script>", *calls, "</script>", _LOADER, "</body></html>"])
