"""A comparison's report page (`archi compare --report`): latency against upfront cost, one
colour per strategy, the Pareto front drawn through its rows, then the ranked table and why
the other combinations are absent; laid out by report/page.py like every plan's page."""

from typing import Any

import plotly.graph_objects as go

from archipelago.compare.page_views import (
    first_token_chart,
    per_dollar_chart,
    served_cost_chart,
    target_line,
)
from archipelago.compare.summary import rows_from_dict
from archipelago.compare.table import (
    cells,
    columns,
    engine_lines,
    engine_names,
    not_compared_lines,
)
from archipelago.report.charts import PALETTE, log_ticks
from archipelago.report.page import Chart, Headline, KindPage, TableBlock, render

_MS = 1e3


def pareto_chart(summary: dict[str, Any]) -> go.Figure:
    """Every row of known price as a point (log axes: costs and latencies span decades);
    the front as a staircase from the cheapest to the fastest."""
    priced = [r for r in summary["rows"] if r["upfront_usd"] is not None]
    names = list(dict.fromkeys(r["strategy"] for r in summary["rows"]))
    fig = go.Figure()
    for i, name in enumerate(names):
        mine = [r for r in priced if r["strategy"] == name]
        if not mine:
            continue
        fig.add_trace(go.Scatter(
            x=[r["upfront_usd"] for r in mine], y=[r["latency_s"] * _MS for r in mine],
            mode="markers", name=name, marker={"color": PALETTE[i % len(PALETTE)], "size": 9},
            text=[r["label"] for r in mine],
            hovertemplate="%{text}: $%{x:,.0f}, %{y:,.2f} ms<extra></extra>"))
    front = [r for r in priced if r["front"]]
    front.sort(key=lambda r: (r["upfront_usd"], r["latency_s"]))
    fig.add_trace(go.Scatter(
        x=[r["upfront_usd"] for r in front], y=[r["latency_s"] * _MS for r in front],
        mode="lines+markers", name="Pareto front", line={"shape": "hv", "color": "#222"},
        marker={"symbol": "star", "size": 13, "color": "#222"},
        text=[r["label"] for r in front],
        hovertemplate="front: %{text}: $%{x:,.0f}, %{y:,.2f} ms<extra></extra>"))
    xs = [r["upfront_usd"] for r in priced]
    ys = [r["latency_s"] * _MS for r in priced]
    target_line(fig, summary, xs)
    if summary.get("latency_target"):  # the target's line inside the axis range
        ys.append(summary["latency_target"]["seconds"] * _MS)
    fig.update_layout(xaxis_title="upfront cost (US$, boards x price)",
                      yaxis_title="latency (ms)", xaxis_type="log", yaxis_type="log",
                      xaxis_tickvals=log_ticks(min(xs), max(xs)), xaxis_tickformat=",.0f",
                      yaxis_tickvals=log_ticks(min(ys), max(ys)), yaxis_tickformat=",~g")
    return fig


def comparison_page(summary: dict[str, Any]) -> KindPage:
    head = summary["headline"]
    headline = [Headline("combinations that fit", "headline.combinations")]
    if head["combinations"]:
        headline += [Headline("fastest latency", "headline.fastest_latency_s", "ms", _MS, 2),
                     Headline("best throughput", "headline.best_tokens_per_s", "tokens/s", 1,
                              1),
                     Headline("rows on the Pareto front", "headline.front_size")]
    charts = []
    target = summary["latency_target"]
    line = " The dashed line is the latency target." if target else ""
    if any(r["upfront_usd"] is not None for r in summary["rows"]):
        charts.append(Chart("Latency against upfront cost", "Each point a strategy on COUNT "
                            "boards; the staircase joins the rows no other row beats on both "
                            "latency and cost." + line, pareto_chart(summary)))
    charts += _views(summary, line)
    rows = rows_from_dict(summary)
    names, formats = engine_names(rows), bool(summary.get("precision"))
    marks = ["#", "★", *(["≤ target"] if target else [])]
    table = TableBlock("Ranked by " + summary["sort"] + " (click a heading to sort by it)",
                       [*marks, *columns(formats)],
                       [[str(d["rank"]), "★" if d["front"] else "",
                         *([_within(d, target)] if target else []),
                         *cells(r, names, formats)]
                        for d, r in zip(summary["rows"], rows, strict=True)], sortable=True)
    notes = engine_lines(names) + [r["line"] for r in summary["refused"]
                                   + summary["infeasible"]]
    if target:
        notes.insert(0, f"latency target {target['seconds'] * _MS:,.3g} ms: "
                        f"{len(target['meeting'])} rows meet it; cheapest: "
                        f"{target['cheapest'] or 'none of known price'}")
    notes += not_compared_lines(summary["not_applicable"])
    if summary["unknown_cost"]:
        notes.append(f"no price for {', '.join(summary['unknown_cost'])}: left off the chart")
    notes.append(f"energy: {summary['power_model']['statement']}")
    return KindPage(charts, headline, notes, [table])


def _within(row: dict[str, Any], target: dict[str, Any]) -> str:
    """✓ for a row within the latency target, else ✗, and by how much it is under or over
    (so sorting the column puts the rows with most to spare first)."""
    over = (row["latency_s"] - target["seconds"]) * _MS
    return f"{'✓' if row['meets_target'] else '✗'} {over:+,.3g} ms"


def _views(summary: dict[str, Any], line: str) -> list[Chart]:
    """Throughput per dollar, first token against per token, and the served cost per
    token, each where the rows carry its figures."""
    charts = [Chart("Time to first token against time per output token", "Each row's "
                    "prompt phase (time to first token) and mean decode step (time per "
                    "output token), log axes: what a user waits before the reply starts and "
                    "between its tokens." + line, first_token_chart(summary))]
    per_dollar = per_dollar_chart(summary)
    if per_dollar is not None:
        charts.append(Chart("Throughput per dollar", "Output tokens per second per million "
                            "US$ of boards (boards x price), most first: what each dollar "
                            "of hardware buys.", per_dollar))
    served = served_cost_chart(summary)
    if served is not None:
        charts.append(Chart("Cost per token served", "US$ per million tokens served at the "
                            "rate (compare --rate: the replicas it takes), cheapest first.",
                            served))
    return charts


def comparison_html(summary: dict[str, Any]) -> str:
    title = f"{summary['model']} · {summary['tokens']} tokens · archi compare"
    subtitle = (f"devices {', '.join(summary['devices'])} · counts "
                f"{', '.join(map(str, summary['counts']))} · batch "
                f"{', '.join(map(str, summary['batches']))}"
                + (f" · precision {', '.join(summary['precision'])}"
                   if summary.get("precision") else ""))
    return render(title, subtitle, summary, comparison_page(summary))
