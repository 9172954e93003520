"""`archi serve --report`'s page: the latency distributions of the run (TTFT, TPOT, end to
end, each a CDF with its P50/P90/P99 and target), the throughput-latency curve up to
saturation with the capacity marked, the cost per million tokens against the rate, and
tables of the run's figures; laid out by report/page.py like every other page. Every
figure marked on a chart is read from the run's `--json` object, not computed again."""

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from archipelago.output_file import write_atomically
from archipelago.report.charts import PALETTE, log_ticks
from archipelago.report.page import Chart, Headline, KindPage, TableBlock, render
from archipelago.serving.metrics import PERCENTILES, latencies
from archipelago.serving.simulate import Outcome
from archipelago.serving.sweep import (
    MAX_FRONT_REPLICAS,
    SWEEP_REQUESTS,
    CostOf,
    Service,
    cost_front,
    latency_curve,
)

CDF_POINTS = 2001  # a CDF drawn through at most this many quantiles (exact below it)
TARGET = "#d62728"
# (JSON key, panel title, unit, scale, target key or None)
_PANELS = (("ttft_s", "time to first token", "ms", 1e3, "ttft_s"),
           ("tpot_s", "time per output token", "ms", 1e3, "tpot_s"),
           ("e2e_s", "end to end", "s", 1.0, None))


def _axis(fig: go.Figure, values: list[float], col: int, title: str, axis: str = "x"
          ) -> Callable[[float], float]:
    """Panel `col`'s axis covering `values`, titled: log (1-2-5 ticks) where they span a
    decade or more (a target far from the data), linear otherwise. Returns where a value
    falls, as a share of the axis from its start."""
    low, high = max(min(values), 1e-9), max(values)
    update = fig.update_xaxes if axis == "x" else fig.update_yaxes
    if high / low >= 10:
        ends = math.log10(low / 1.2), math.log10(high * 1.2)
        update(type="log", title_text=title, tickvals=log_ticks(low, high), tickformat=",~g",
               range=list(ends), row=1, col=col)
        return lambda v: (math.log10(v) - ends[0]) / (ends[1] - ends[0])
    pad = 0.08 * (high - low) or 0.1 * high
    start, end = max(0.0, low - pad), high + pad
    update(title_text=title, range=[start, end], row=1, col=col)
    return lambda v: (v - start) / (end - start)


def _label(fig: go.Figure, col: int, axis: str, at: float, text: str, colour: str,
           after: bool) -> None:
    """A line across panel `col` at `at` on its `axis` (set by `_axis`) and its label
    beside it (after it, or before); placed by hand, as plotly's own line labels miss on
    a log axis (they take the value where the axis wants its logarithm)."""
    ref = "" if col == 1 else str(col)
    log = fig.layout[f"{axis}axis{ref}"].type == "log"
    pos = math.log10(at) if log else at
    if axis == "x":
        fig.add_vline(x=at, line_dash="dash", line_color=colour, row=1, col=col)
        fig.add_annotation(x=pos, xref=f"x{ref}", y=0.03, yref=f"y{ref} domain", text=text,
                           showarrow=False, font={"color": colour, "size": 11},
                           xanchor="left" if after else "right", xshift=4 if after else -4)
    else:
        fig.add_hline(y=at, line_dash="dash", line_color=colour, row=1, col=col)
        fig.add_annotation(y=pos, yref=f"y{ref}", x=0.01, xref=f"x{ref} domain", text=text,
                           showarrow=False, font={"color": colour, "size": 11},
                           xanchor="left", yanchor="bottom" if after else "top")


def cdf(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(x, share of requests in %) of the linear interpolation between order statistics,
    numpy's percentile: a line through every P-th percentile (exact up to CDF_POINTS)."""
    kept = values[~np.isnan(values)]
    shares = np.linspace(0, 100, min(len(kept), CDF_POINTS))
    return (np.percentile(kept, shares) if kept.size else kept), shares


def distributions(result: dict[str, Any], outcome: Outcome) -> go.Figure:
    lat = latencies(outcome)
    tg, pct = result["targets"], result["targets"]["percentile"]
    fig = make_subplots(rows=1, cols=3, horizontal_spacing=0.07)
    for col, (key, title, unit, scale, target) in enumerate(_PANELS, start=1):
        x, y = cdf(lat[key])
        fig.add_trace(go.Scatter(x=x * scale, y=y, mode="lines", name=title, meta=key,
                                 line={"color": PALETTE[col - 1]},
                                 hovertemplate=f"%{{y:.1f}}% within %{{x:,.3f}} {unit}"
                                               "<extra></extra>"), row=1, col=col)
        shown = [float(x[0]) * scale, float(x[-1]) * scale] if x.size else []
        at = tg[target] * scale if target else None
        share = _axis(fig, shown + ([at] if at else []), col, f"{title} ({unit})")
        if at:
            _label(fig, col, "x", at, f"P{pct:g} target {_short(at)} {unit}", TARGET,
                   after=share(at) < 0.5)
        if not x.size:  # no TPOT: every answer one token
            continue
        marks = [result[key][f"p{q}"] * scale for q in PERCENTILES]
        # Labels above-left of the curve, or below-right where it hugs the axis: a CDF
        # leaves both empty.
        fig.add_trace(go.Scatter(
            x=marks, y=list(PERCENTILES), mode="markers+text", name=f"{title} percentiles",
            meta=f"{key}.percentiles", marker={"color": "#222", "size": 8},
            text=[f"P{q} {_short(m)}" for q, m in zip(PERCENTILES, marks, strict=True)],
            cliponaxis=False, textposition=["top left" if share(m) > 0.3 else "bottom right"
                          for m in marks], textfont={"size": 11},
            hovertemplate=f"%{{text}} {unit}<extra></extra>"), row=1, col=col)
    fig.update_yaxes(range=[0, 103], ticksuffix="%")
    fig.update_yaxes(title_text="share of requests within it", row=1, col=1)
    fig.update_layout(showlegend=False)
    return fig


def curve_chart(result: dict[str, Any], points: list[dict[str, Any]]) -> go.Figure:
    """Two panels over the throughput served: the targets' percentile of TTFT and of TPOT,
    each with its target, and the capacity as a vertical line."""
    tg, cap = result["targets"], result["capacity"]
    pct = f"P{tg['percentile']:g}"
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1)
    xs = [p["served_requests_per_s"] for p in points]
    for col, (key, title) in enumerate((("ttft_s", "time to first token"),
                                        ("tpot_s", "time per output token")), start=1):
        ys = [p[key] * 1e3 for p in points]
        fig.add_trace(go.Scatter(
            x=xs, y=ys, mode="lines+markers", name=f"{pct} {title}", meta=key,
            line={"color": PALETTE[col - 1]},
            marker={"symbol": ["circle" if p["meets"] else "x" for p in points], "size": 9},
            customdata=[p["rate"] for p in points],
            hovertemplate="arrivals %{customdata:,.3~r} req/s, served %{x:,.3~r} req/s: "
                          "%{y:,.4~r} ms<extra></extra>"), row=1, col=col)
        at = tg[key] * 1e3
        _axis(fig, [*ys, at], col, f"{pct} {title} (ms)", "y")
        _label(fig, col, "y", at, f"target {_short(at)} ms", TARGET, after=True)
        if cap["rate"] > 0:
            fig.add_vline(x=cap["rate"], line_dash="dot", line_color="#222", row=1, col=col)
            fig.add_annotation(x=cap["rate"], xref="x" if col == 1 else f"x{col}", y=0.55,
                               yref=f"y{'' if col == 1 else col} domain", showarrow=False,
                               text=f"capacity {'' if cap['bounded'] else '≥ '}"
                                    f"{_short(cap['rate'])} req/s", xanchor="left", xshift=4,
                               font={"size": 11})
        fig.update_xaxes(title_text="throughput served (requests/s)", row=1, col=col,
                         range=[0, 1.3 * max(*xs, cap["rate"])])
    fig.update_layout(showlegend=False)
    return fig


def cost_chart(result: dict[str, Any], points: list[dict[str, Any]]) -> go.Figure:
    """$ per million tokens against the arrival rate, each point labelled with its
    replicas; the run's own point as a star."""
    fig = go.Figure()
    for i, (key, name) in enumerate((("usd_per_million_output_tokens", "output tokens"),
                                     ("usd_per_million_tokens", "prompt + output tokens"))):
        fig.add_trace(go.Scatter(
            x=[p["rate"] for p in points], y=[p[key] for p in points], meta=key,
            mode="lines+markers+text", name=f"$ per million {name}",
            line={"color": PALETTE[i], "shape": "linear"},
            text=[f"×{p['replicas']}" if k == 0 or p["replicas"] != points[k - 1]["replicas"]
                  else "" for k, p in enumerate(points)] if i == 0 else None,
            textposition="top center", customdata=[p["replicas"] for p in points],
            hovertemplate="%{x:,.3~r} req/s on %{customdata} replicas: $%{y:,.4f}"
                          "<extra></extra>"))
    own = result["cost"].get("usd_per_million_output_tokens")
    if own is not None:
        fig.add_trace(go.Scatter(
            x=[result["rate"]], y=[own], mode="markers", meta="this run",
            name=f"this run ({_replicas(result['replicas'])}"
                 f"{', past its capacity' if result['rate'] > result['capacity']['rate'] else ''}"
                 ", output tokens)",
            marker={"symbol": "star", "size": 15, "color": "#222"},
            hovertemplate="this run: %{x:,.3~r} req/s, $%{y:,.4f}<extra></extra>"))
    rates = [p["rate"] for p in points] + [result["rate"]]
    fig.update_xaxes(type="log", tickvals=log_ticks(min(rates), max(rates)),
                     tickformat=",~g", title_text="arrival rate (requests/s)")
    fig.update_yaxes(title_text="US$ per million tokens", rangemode="tozero")
    fig.update_layout(legend={"orientation": "h", "y": -0.2})
    return fig


def _short(value: float) -> str:
    """Three significant digits, never in e-notation (41,800, not 4.18e+04)."""
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def _replicas(n: int) -> str:
    return f"{n} replica{'s' if n > 1 else ''}"


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.3f}"


def tables(result: dict[str, Any]) -> list[TableBlock]:
    """The run's latencies by percentile, then its rates, capacity and cost."""
    lat = TableBlock("Latency (ms)", ["", "P50", "P90", "P99", "mean"], [
        [label, *(_ms(result[key][k]) for k in ("p50", "p90", "p99", "mean"))]
        for key, label in (("ttft_s", "time to first token"), ("tpot_s", "time per output "
                           "token"), ("e2e_s", "end to end"), ("queue_s", "queueing delay"))])
    cap, c, busy = result["capacity"], result["cost"], result["busy_share"]
    rows = [
        ["arrival rate", f"{result['rate']:,.3f} requests/s ({result['arrivals']})"],
        ["requests simulated", f"{result['requests']:,} (seed {result['seed']})"],
        ["throughput", f"{result['throughput_requests_per_s']:,.3f} requests/s · "
                       f"{result['throughput_tokens_per_s']:,.1f} output tokens/s · "
                       f"{result['throughput_prompt_tokens_per_s']:,.1f} prompt tokens/s"],
        ["goodput", f"{result['goodput_requests_per_s']:,.3f} requests/s "
                    f"({100 * result['met_share']:.1f}% of requests meet both targets)"],
        ["busy share", f"{100 * sum(busy) / len(busy):.1f}% mean, "
                       f"{100 * max(busy):.1f}% busiest replica"],
        ["capacity", f"{'' if cap['bounded'] else '≥ '}{cap['rate']:,.3f} requests/s "
                     f"({cap['simulations']} simulations x {cap['seeds']} seeds x "
                     f"{cap['requests']:,} requests)"],
        ["KV cache", f"{result['kv_cache_tokens']:,} tokens per replica"],
        ["iterations", f"{result['iterations']:,}"]]
    if c["reason"] is None:
        bought = " + ".join(f"{i['count']} x {i['name']}" for i in c["items"])
        rows += [["capital", f"${c['capital_usd']:,.0f} ({bought}) over "
                             f"{c['lifetime_years']:g} years: ${c['capital_usd_per_h']:,.3f}/h"],
                 ["energy", f"{c['full_power_w']:,.0f} W x {100 * c['utilization']:.1f}% at "
                            f"${c['electricity_usd_per_kwh']:g}/kWh: "
                            f"${c['energy_usd_per_h']:,.3f}/h"],
                 ["$ per million tokens", f"{_usd(c['usd_per_million_output_tokens'])} output"
                  f" · {_usd(c['usd_per_million_tokens'])} prompt + output"]]
    else:
        rows.append(["$ per million tokens", f"- ({c['reason']})"])
    if result["clipped"]:
        rows.append(["clipped to the model's positions", f"{result['clipped']:,} requests"])
    return [lat, TableBlock("The run's figures (as --json)", ["figure", "value"], rows)]


def _usd(value: float | None) -> str:
    return "-" if value is None else f"${value:,.4f}"


def serve_page(result: dict[str, Any], outcome: Outcome, curve: list[dict[str, Any]],
               front: list[dict[str, Any]]) -> KindPage:
    tg, cap = result["targets"], result["capacity"]
    pct = f"P{tg['percentile']:g}"
    q = tg["percentile"] if tg["percentile"] in PERCENTILES else 90  # else the P90s
    headline = [Headline(f"P{q:g} time to first token", f"ttft_s.p{q:g}", "ms", 1e3, 1),
                Headline(f"P{q:g} time per output token", f"tpot_s.p{q:g}", "ms", 1e3, 2),
                Headline("throughput", "throughput_tokens_per_s", "output tokens/s", 1, 1),
                Headline("capacity", "capacity.rate", "requests/s", 1, 3)]
    if result["cost"].get("usd_per_million_output_tokens") is not None:
        headline.append(Headline("cost", "cost.usd_per_million_output_tokens",
                                 "$ per million output tokens", 1, 4))
    sweep = curve[0]["requests"]
    charts = [
        Chart("Latency distributions", f"Share of the run's {result['requests']:,} requests "
              "within each latency (an axis spanning a decade or more is logarithmic); dots "
              f"mark P50, P90 and P99, dashed lines the {pct} targets.",
              distributions(result, outcome)),
        Chart("Throughput against latency, up to saturation",
              f"Arrival rates from {_short(curve[0]['rate'])} to {_short(curve[-1]['rate'])} "
              f"requests/s, each point one simulation of {sweep:,} requests (seed "
              f"{result['seed']}), drawn at the throughput it served while requests kept "
              f"arriving (past saturation it stops growing as the latency climbs); o: "
              f"within both targets, x: not; the dotted line is the capacity searched "
              f"over {cap['requests']:,} requests x {cap['seeds']} seeds, so a point near "
              "it may fall either side of a target.",
              curve_chart(result, curve))]
    notes = []
    if front:
        counts = sorted({p["requests"] for p in front})
        shown = f"{counts[0]:,}" + (f" to {counts[-1]:,}" if len(counts) > 1 else "")
        charts.append(Chart(
            "Cost against arrival rate", f"Each rate on the fewest replicas (×N, up to "
            f"{MAX_FRONT_REPLICAS}) whose simulation ({shown} requests, at most "
            f"{SWEEP_REQUESTS:,} per replica) meets both targets, at the rate's own "
            "throughput; boards, hosts and energy as the run's cost (★, over its whole "
            "span, the drain after the last arrival included).", cost_chart(result, front)))
    else:
        notes.append("no cost against rate: " + (
            result["cost"]["reason"] or ("no rate meets the targets" if cap["rate"] == 0 else
                                         "no replica count up to the sweep's bound meets the "
                                         "targets")))
    return KindPage(charts, headline, notes, tables(result))


def serve_html(result: dict[str, Any], outcome: Outcome, service: Service, cost_of: CostOf
               ) -> str:
    """The page of a run: its `--json` object and its outcome at the run's rate; the
    sweeps simulated here on `service`."""
    cap, replicas = result["capacity"], result["replicas"]
    reference = cap["rate"] if cap["bounded"] and cap["rate"] > 0 else result["rate"]
    curve = latency_curve(service, reference, replicas)
    front = (cost_front(service, cap["rate"] / replicas, result["rate"], cost_of)
             if cap["rate"] > 0 and result["cost"]["reason"] is None else [])
    tg = result["targets"]
    title = f"{result['model']} · {result['strategy']} on {result['cluster']} · archi serve"
    subtitle = (f"{_replicas(replicas)} ({result['router']}) · "
                f"{result['policy']} batching, max {result['max_batch']} · "
                f"{result['rate']:g} requests/s · prompts {result['prompt']}, outputs "
                f"{result['output']} tokens · targets P{tg['percentile']:g} TTFT ≤ "
                f"{_short(tg['ttft_s'] * 1e3)} ms, TPOT ≤ {_short(tg['tpot_s'] * 1e3)} ms")
    return render(title, subtitle, result, serve_page(result, outcome, curve, front))


def write_page(out: Path, force: bool, result: dict[str, Any], outcome: Outcome,
               service: Service, cost_of: CostOf) -> None:
    """The page at `out` (checked before the run by report.html.check_target)."""
    write_atomically(out, serve_html(result, outcome, service, cost_of), "--report", force)
