"""The comparison page's views beside the Pareto chart: throughput per dollar, time to first
token against time per output token (with the latency target), and the served cost per
million tokens where the rows carry it (`compare --rate`). Each reads the rows of
`comparison_dict` as they are, a missing figure leaving its row off that view."""

from collections.abc import Callable
from typing import Any

import plotly.graph_objects as go

from archipelago.report.charts import PALETTE

_MS = 1e3
TARGET_TRACE = "latency target"

Row = dict[str, Any]


def _colour(summary: dict[str, Any]) -> dict[str, str]:
    """One colour per strategy, as the Pareto chart gives them."""
    names = list(dict.fromkeys(r["strategy"] for r in summary["rows"]))
    return {n: PALETTE[i % len(PALETTE)] for i, n in enumerate(names)}


def served_usd_per_million(row: Row) -> float | None:
    """The row's served cost per million tokens (`compare --rate`), None where it has none."""
    value = (row.get("serving") or {}).get("usd_per_million_tokens")
    return value if isinstance(value, int | float) else None


def target_line(fig: go.Figure, summary: dict[str, Any], x: list[float]) -> None:
    """The latency target as a dashed horizontal line across `x`'s span (a trace, so its
    y is in the figure's data and its name in the legend)."""
    target = summary.get("latency_target")
    if not target or not x:
        return
    ms = target["seconds"] * _MS
    fig.add_trace(go.Scatter(
        x=[min(x), max(x)], y=[ms, ms], mode="lines", name=TARGET_TRACE,
        line={"color": "#b00", "dash": "dash"},
        hovertemplate=f"latency target: {ms:,.4g} ms<extra></extra>"))


def _bars(summary: dict[str, Any], value: Callable[[Row], float | None], unit: str,
          most_first: bool) -> go.Figure:
    """One bar per row that has `value`, best first, coloured by strategy."""
    rows = [r for r in summary["rows"] if value(r) is not None]
    rows.sort(key=lambda r: value(r), reverse=most_first)
    colour = _colour(summary)
    fig = go.Figure()
    for name in dict.fromkeys(r["strategy"] for r in rows):
        mine = [r for r in rows if r["strategy"] == name]
        fig.add_trace(go.Bar(
            x=[r["label"] for r in mine], y=[value(r) for r in mine], name=name,
            marker_color=colour[name],
            hovertemplate="%{x}: %{y:,.4g} " + unit + "<extra></extra>"))
    fig.update_xaxes(categoryorder="array", categoryarray=[r["label"] for r in rows])
    return fig


def per_dollar_chart(summary: dict[str, Any]) -> go.Figure | None:
    """Output tokens per second per million US$ of boards, most first (None: no price)."""
    if not any(r["tokens_per_s_per_million_usd"] is not None for r in summary["rows"]):
        return None
    fig = _bars(summary, lambda r: r["tokens_per_s_per_million_usd"], "tokens/s per M$", True)
    fig.update_layout(xaxis_title="combination", barmode="group",
                      yaxis_title="throughput per dollar (tokens/s per M$ upfront)")
    return fig


def served_cost_chart(summary: dict[str, Any]) -> go.Figure | None:
    """US$ per million tokens served at the rate, cheapest first (None: no row served)."""
    if not any(served_usd_per_million(r) is not None for r in summary["rows"]):
        return None
    fig = _bars(summary, served_usd_per_million, "$/M tokens", False)
    fig.update_layout(xaxis_title="combination", barmode="group",
                      yaxis_title="cost per token (US$ per million tokens served)")
    return fig


def first_token_chart(summary: dict[str, Any]) -> go.Figure:
    """Time to first token against time per output token (log axes), one colour per
    strategy; the latency target, where given, as the line the end-to-end latency must
    stay under, drawn on the first-token axis it bounds too."""
    colour = _colour(summary)
    fig = go.Figure()
    for name in dict.fromkeys(r["strategy"] for r in summary["rows"]):
        mine = [r for r in summary["rows"] if r["strategy"] == name]
        fig.add_trace(go.Scatter(
            x=[r["decode_s_per_token"] * _MS for r in mine],
            y=[r["prefill_s"] * _MS for r in mine], mode="markers", name=name,
            marker={"color": colour[name], "size": 9}, text=[r["label"] for r in mine],
            hovertemplate="%{text}: %{x:,.3f} ms per token, first token %{y:,.2f} ms"
                          "<extra></extra>"))
    target_line(fig, summary, [r["decode_s_per_token"] * _MS for r in summary["rows"]
                               if r["decode_s_per_token"] > 0])
    fig.update_layout(xaxis_title="time per output token (ms)",
                      yaxis_title="time to first token (ms)", xaxis_type="log",
                      yaxis_type="log")
    return fig
