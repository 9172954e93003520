"""Chart shapes any plan kind can fill: a stacked time breakdown, the cluster as a graph,
resources against capacity, sweeps, a roofline and a Gantt timeline. Kinds pass numbers
they read from their plan and estimate; these only draw them (axis titles with units)."""

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go
from plotly.colors import qualitative

# Colours by category, reused across charts so a part keeps its colour on the page.
PALETTE = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#eeca3b",
           "#9d755d", "#bab0ac", "#ff9da6")

# For more kinds than PALETTE tells apart (an instruction set's classes): plotly's Dark24.
WIDE_PALETTE = tuple(qualitative.Dark24)


def colours_for(names: Sequence[str], order: Sequence[str] = (),
             palette: Sequence[str] = PALETTE) -> dict[str, str]:
    """A colour per name: by place in `order` where listed (so a category keeps its colour
    from chart to chart), the rest after."""
    every = list(dict.fromkeys([*order, *names]))
    return {n: palette[every.index(n) % len(palette)] for n in names}


def stacked_breakdown(parts: dict[str, dict[str, float]], scale: float, unit: str,
                      x_title: str, order: Sequence[str] = ()) -> go.Figure:
    """One stacked bar per group (`parts[group][category]` seconds), shown x `scale`;
    `order` fixes the categories' colours."""
    groups = list(parts)
    categories = list(dict.fromkeys(c for g in parts.values() for c in g))
    colour = colours_for(categories, order)
    fig = go.Figure([
        go.Bar(name=c, x=groups, y=[parts[g].get(c, 0.0) * scale for g in groups],
               marker_color=colour[c],
               hovertemplate=f"%{{x}} · {c}: %{{y:,.3f}} {unit}<extra></extra>")
        for c in categories])
    fig.update_layout(barmode="stack", xaxis_title=x_title, yaxis_title=f"time ({unit})")
    return fig


@dataclass(frozen=True)
class Node:
    """A device drawn at (x, y): `use` is its binding resource's fraction used."""

    label: str
    x: float
    y: float
    use: float
    binding: str


def cluster_graph(nodes: Sequence[Node], links: dict[tuple[int, int], float], per: str,
                  axis_titles: tuple[str, str]) -> go.Figure:
    """Devices coloured by their binding resource's use; links between node indices drawn
    with a width proportional to the bytes they carry `per` token or inference."""
    fig = go.Figure()
    most = max(links.values(), default=0.0) or 1.0
    widths: dict[float, tuple[list, list]] = {}  # one trace per link width: a ring of
    for (a, b), nbytes in links.items():  # thousands draws its links in one or two traces
        xs, ys = widths.setdefault(nbytes, ([], []))
        xs += [nodes[a].x, nodes[b].x, None]  # None: a break between segments
        ys += [nodes[a].y, nodes[b].y, None]
    for nbytes, (xs, ys) in widths.items():
        fig.add_trace(go.Scatter(
            x=xs, y=ys, mode="lines", showlegend=False, hoverinfo="skip",
            line={"width": 1 + 11 * nbytes / most, "color": "#8896ab"}))
    if links:  # hover the middle of each link for its bytes
        mids = [((nodes[a].x + nodes[b].x) / 2, (nodes[a].y + nodes[b].y) / 2,
                 f"{nodes[a].label} → {nodes[b].label}: {n:,.0f} bytes per {per}")
                for (a, b), n in links.items()]
        fig.add_trace(go.Scatter(
            x=[m[0] for m in mids], y=[m[1] for m in mids], mode="markers", name="link",
            marker={"size": 6, "color": "#8896ab"}, text=[m[2] for m in mids],
            hovertemplate="%{text}<extra></extra>", showlegend=False))
    fig.add_trace(go.Scatter(
        x=[n.x for n in nodes], y=[n.y for n in nodes], mode="markers+text",
        text=[n.label for n in nodes] if len(nodes) <= 16 else None, textposition="top center",
        customdata=[[n.label, n.binding, 100 * n.use] for n in nodes], showlegend=False,
        hovertemplate="%{customdata[0]}: %{customdata[1]} %{customdata[2]:.0f}% used"
                      "<extra></extra>",
        marker={"size": 26 if len(nodes) <= 16 else 12, "color": [100 * n.use for n in nodes],
                "colorscale": "YlOrRd", "cmin": 0, "cmax": 100, "line": {"width": 1},
                "colorbar": {"title": {"text": "binding resource used (%)"}}}))
    fig.update_layout(xaxis_title=axis_titles[0], yaxis_title=axis_titles[1])
    fig.update_xaxes(showgrid=False, zeroline=False)
    fig.update_yaxes(showgrid=False, zeroline=False)
    return fig


def ring_positions(count: int) -> list[tuple[float, float]]:
    """Devices round a circle, rank 0 at the top, clockwise."""
    if count == 1:
        return [(0.0, 0.0)]
    return [(round(math.sin(2 * math.pi * r / count), 9),
             round(math.cos(2 * math.pi * r / count), 9)) for r in range(count)]


# Up to this many devices, each has its own bar group; above, runs of devices alike (the
# same share of every resource) share one, so a ring of thousands draws a handful of bars.
OWN_BARS_MAX = 16


def alike_runs(devices: Sequence[str], columns: Sequence[tuple]) -> list[tuple[str, int]]:
    """Runs of consecutive devices whose `columns` are equal: (label, first index) each,
    labelled 'A … B (N alike)' for a run of several."""
    runs: list[tuple[str, int]] = []
    start = 0
    for i in range(1, len(devices) + 1):
        if i == len(devices) or columns[i] != columns[start]:
            count = i - start
            runs.append((devices[start] if count == 1 else
                         f"{devices[start]} … {devices[i - 1]} ({count} alike)", start))
            start = i
    return runs


def resource_bars(devices: Sequence[str], fractions: dict[str, Sequence[float]],
                  details: dict[str, Sequence[str]]) -> go.Figure:
    """One bar group per device (above OWN_BARS_MAX devices, per run of devices alike), one
    bar per resource as % of capacity; each device's binding (largest) resource drawn with
    a thick black outline."""
    names = list(fractions)
    table = np.array([fractions[n] for n in names]) * 100  # resources x devices
    labels, keep = list(devices), list(range(len(devices)))
    if len(devices) > OWN_BARS_MAX:
        columns = [tuple(table[:, j]) + tuple(details[n][j] for n in names)
                   for j in range(len(devices))]
        labels, keep = (list(t) for t in zip(*alike_runs(devices, columns), strict=True))
    table = table[:, keep]
    binding = table.argmax(axis=0)
    fig = go.Figure()
    for i, name in enumerate(names):
        fig.add_trace(go.Bar(
            name=name, x=labels, y=table[i], marker_color=PALETTE[i % len(PALETTE)],
            marker_line_width=[3 if b == i else 0 for b in binding],
            marker_line_color="black", customdata=[details[name][j] for j in keep],
            hovertemplate=f"%{{x}} · {name}: %{{y:.1f}}% (%{{customdata}})<extra></extra>"))
    fig.add_hline(y=100, line_dash="dash", line_color="#b00",
                  annotation_text="capacity", annotation_position="top left")
    fig.update_layout(barmode="group", xaxis_title="device",
                      yaxis_title="used (% of the device's capacity)")
    return fig


def sweep_lines(x: Sequence[float], series: dict[str, Sequence[float]], x_title: str,
                y_title: str, log_x: bool = False, mark: tuple[float, float] | None = None,
                log_y: bool = False) -> go.Figure:
    """Lines over a sweep; `mark` is the plan's own point. `log_y` for series decades apart
    (a prompt's time beside a token's), which a linear axis would flatten to zero. Both
    axes' ranges are set to cover every point and the mark, with a margin, so no line runs
    off the chart."""
    fig = go.Figure([go.Scatter(x=list(x), y=list(y), mode="lines+markers", name=name,
                                line={"color": PALETTE[i % len(PALETTE)]})
                     for i, (name, y) in enumerate(series.items())])
    if mark is not None:
        fig.add_trace(go.Scatter(x=[mark[0]], y=[mark[1]], mode="markers", name="this plan",
                                 marker={"size": 14, "symbol": "star", "color": "#e45756"}))
    fig.update_layout(xaxis_title=x_title, yaxis_title=y_title)
    xs = [*x, *([mark[0]] if mark else [])]
    ys = [v for y in series.values() for v in y] + ([mark[1]] if mark else [])
    fig.update_xaxes(type="log" if log_x else "linear", range=_span(xs, log_x))
    fig.update_yaxes(type="log" if log_y else "linear", range=_span(ys, log_y, not log_y))
    return fig


def log_ticks(low: float, high: float) -> list[float]:
    """1-2-5 ticks covering [low, high]: plotly's own ticks on a log axis spanning less than
    a few decades are bare mantissas (2, 3, 5 between 10 and 100) that read as numbers."""
    first = math.floor(math.log10(low))
    ticks = [m * 10.0 ** e for e in range(first, math.ceil(math.log10(high)) + 1)
             for m in (1, 2, 5)]
    inside = [t for t in ticks if low <= t <= high]
    below = [t for t in ticks if t < low][-1:]
    above = [t for t in ticks if t > high][:1]
    return below + inside + above


def _span(values: Sequence[float], log: bool, from_zero: bool = False) -> list[float] | None:
    """An axis range over `values` with 6% to spare each side (in decades on a log axis,
    whose range plotly takes as exponents); None (plotly's own) where nothing to span."""
    finite = [float(v) for v in values if math.isfinite(v) and (v > 0 or not log)]
    if not finite:
        return None
    if log:
        low, high = math.log10(min(finite)), math.log10(max(finite))
    else:
        low, high = (min(0.0, min(finite)) if from_zero else min(finite)), max(finite)
    pad = 0.06 * (high - low) or (0.1 if log else abs(high) * 0.1 or 1.0)
    return [low if from_zero and low == 0 else low - pad, high + pad]


@dataclass(frozen=True)
class OpPoint:
    """One operator on the roofline: `ops` operations moving `nbytes` in `seconds`; `roof`
    names the memory slope it sits under where a chart draws several (the KV cache's
    on-chip store beside the weights' HBM), "" for the chart's own."""

    name: str
    group: str
    ops: float
    nbytes: float
    seconds: float
    roof: str = ""


def roofline(points: Sequence[OpPoint], peak_ops: float, bandwidth_Bps: float,
             ops_unit: str, memory: str, roofs: dict[str, float] | None = None,
             labelled: int = 0) -> go.Figure:
    """Operators by arithmetic intensity against the compute roof and the `memory`
    bandwidth slope (log-log), plus a dashed slope per other memory in `roofs` (name: bytes
    per second) that points name as theirs. Every point's name shows on hover; the
    `labelled` points taking the most time also as text beside them."""
    useful = [p for p in points if p.ops > 0 and p.nbytes > 0 and p.seconds > 0]
    slopes = {"": bandwidth_Bps, **(roofs or {})}
    intensity = [p.ops / p.nbytes for p in useful]
    ridges = [peak_ops / b for b in slopes.values()]
    low = min([*intensity, *ridges]) / 4
    high = max([*intensity, *ridges]) * 4
    xs = np.geomspace(low, high, 64)
    fig = go.Figure([go.Scatter(
        x=xs, y=np.minimum(peak_ops, xs * bandwidth_Bps) / 1e9, mode="lines",
        name=f"roof: {peak_ops / 1e9:,.0f} G{ops_unit}/s, {memory} {bandwidth_Bps / 1e9:,.0f} GB/s",
        line={"color": "#222"})])
    for i, (name, rate) in enumerate((roofs or {}).items()):
        fig.add_trace(go.Scatter(
            x=xs, y=np.minimum(peak_ops, xs * rate) / 1e9, mode="lines",
            name=f"roof: {name} {rate / 1e9:,.0f} GB/s",
            line={"color": PALETTE[-1 - i % len(PALETTE)], "dash": "dash"}))
    texts = _point_labels(useful, labelled)
    for i, group in enumerate(dict.fromkeys(p.group for p in useful)):
        mine = [(j, p) for j, p in enumerate(useful) if p.group == group]
        fig.add_trace(go.Scatter(
            x=[p.ops / p.nbytes for _, p in mine], y=[p.ops / p.seconds / 1e9 for _, p in mine],
            mode="markers+text" if labelled else "markers", name=group,
            customdata=[[p.name, p.roof or memory] for _, p in mine],
            text=[texts.get(j, "") for j, _ in mine],
            textposition=[_PLACES[list(texts).index(j) % 2] if j in texts else _PLACES[0]
                          for j, _ in mine],
            marker={"size": 10, "color": PALETTE[i % len(PALETTE)]},
            hovertemplate="%{customdata[0]} (" + group + ", under %{customdata[1]}): %{x:.3g} "
                          + ops_unit + "/byte, %{y:.3g} G" + ops_unit + "/s<extra></extra>"))
    fig.update_xaxes(type="log", title_text=f"arithmetic intensity ({ops_unit} per byte)")
    fig.update_yaxes(type="log", title_text=f"attained performance (G{ops_unit}/s)")
    return fig


_PLACES = ("top center", "bottom center")  # labels of busy spots alternate, to overlap less


def _point_labels(points: Sequence[OpPoint], labelled: int) -> dict[int, str]:
    """Text for the `labelled` spots of the chart that take the most time: points
    drawn within a quarter decade of each other (q, k and v alike) share one label naming
    them (the first four)."""
    spots: dict[tuple, list[int]] = {}
    for j, p in enumerate(points):
        spot = (round(4 * math.log10(p.ops / p.nbytes)), round(4 * math.log10(p.ops / p.seconds)))
        spots.setdefault(spot, []).append(j)
    busiest = sorted(spots.values(), key=lambda js: -sum(points[j].seconds for j in js))
    labels = {}
    for js in busiest[:labelled]:
        names = list(dict.fromkeys(points[j].name for j in js))
        labels[js[0]] = ", ".join(names[:4]) + (f" +{len(names) - 4}" if len(names) > 4 else "")
    return labels


@dataclass(frozen=True)
class Span:
    """One bar of a timeline: `row` (a device, a kernel), [start, finish) seconds."""

    row: str
    start: float
    finish: float
    label: str
    kind: str


def _bars(spans: Sequence[Span], kind: str, colour: str, scale: float, unit: str,
          **trace: object) -> go.Bar:
    """One trace of a timeline: `spans` of one kind as horizontal bars."""
    return go.Bar(
        orientation="h", name=kind, y=[s.row for s in spans],
        base=[s.start * scale for s in spans],
        x=[(s.finish - s.start) * scale for s in spans], text=[s.label for s in spans],
        marker_color=colour, textposition="none",
        hovertemplate="%{y} · %{text}: from %{base:,.3f} for %{x:,.3f} " + unit
                      + "<extra></extra>", **trace)


def _timeline_layout(fig: go.Figure, spans: Sequence[Span], unit: str, row_title: str
                     ) -> go.Figure:
    rows = list(dict.fromkeys(s.row for s in spans))
    fig.update_layout(barmode="overlay", xaxis_title=f"time ({unit})", yaxis_title=row_title)
    fig.update_yaxes(categoryorder="array", categoryarray=rows[::-1])
    return fig


def gantt(spans: Sequence[Span], scale: float, unit: str, row_title: str,
          order: Sequence[str] = ()) -> go.Figure:
    """Horizontal bars per row, coloured by kind (`order` fixes the colours), time x
    `scale` in `unit`."""
    fig = go.Figure()
    kinds = list(dict.fromkeys(s.kind for s in spans))
    colour = colours_for(kinds, order)
    for kind in kinds:
        fig.add_trace(_bars([s for s in spans if s.kind == kind], kind, colour[kind], scale,
                            unit))
    return _timeline_layout(fig, spans, unit, row_title)


def gantt_per_group(groups: dict[str, Sequence[Span]], scale: float, unit: str,
                    row_title: str, order: Sequence[str] = ()) -> go.Figure:
    """`gantt` whose rows fall in groups (the cores of a ring): each group its own set of
    traces, one per kind (the trace's `meta` names the group), a kind keeping its colour and
    one legend entry across groups, so clicking it hides that kind on every group."""
    every = [s for spans in groups.values() for s in spans]
    kinds = list(dict.fromkeys(s.kind for s in every))
    colour = colours_for(kinds, order, PALETTE if len(kinds) <= len(PALETTE) else WIDE_PALETTE)
    fig, listed = go.Figure(), set()
    for group, spans in groups.items():
        for kind in kinds:
            mine = [s for s in spans if s.kind == kind]
            if mine:
                fig.add_trace(_bars(mine, kind, colour[kind], scale, unit, legendgroup=kind,
                                    showlegend=kind not in listed, meta=group))
                listed.add(kind)
    return _timeline_layout(fig, every, unit, row_title)
