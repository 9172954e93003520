"""Charts for more than a page can draw one by one: a heat map of resources for clusters over
OWN_BARS_MAX devices (72 FPGAs x 3 bars read as noise), a timeline that bins calls it
cannot draw one bar each (every row's drawn busy time is still its busy time), a cluster
graph grouped by switch, and axes that keep every label."""

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace

import plotly.graph_objects as go

from archipelago.report.charts import (
    OWN_BARS_MAX,
    Node,
    Span,
    cluster_graph,
    colours_for,
    gantt,
    resource_bars,
)

# A timeline draws each call as its own bar up to this many; above, it bins time.
OWN_SPANS_MAX = 600
TIME_BINS = 200
# A heat map names every device up to this many (9-pixel labels on a 1,000-pixel chart).
LABELLED_CELLS_MAX = 96


def resource_heatmap(devices: Sequence[str], fractions: dict[str, Sequence[float]],
                     details: dict[str, Sequence[str]]) -> go.Figure:
    """One column per device, one row per resource, the cell coloured by its % of the
    device's capacity (hover: the counts behind it); a cell over 100% is outlined by the
    colour scale's top (dark red)."""
    names = list(fractions)
    z = [[100 * v for v in fractions[n]] for n in names]
    top = max(100.0, *(v for row in z for v in row))
    fig = go.Figure(go.Heatmap(
        x=list(devices), y=names, z=z, zmin=0, zmax=top, colorscale="YlOrRd", xgap=1, ygap=1,
        customdata=[list(details[n]) for n in names],
        colorbar={"title": {"text": "used (% of capacity)"}},
        hovertemplate="%{x} · %{y}: %{z:.1f}% (%{customdata})<extra></extra>"))
    fig.update_layout(xaxis_title="device", yaxis_title="resource")
    if len(devices) <= LABELLED_CELLS_MAX:  # beyond, plotly picks which to name; hover all
        fig.update_xaxes(tickmode="array", tickvals=list(devices))
    fig.update_xaxes(tickangle=-90, tickfont={"size": 9}, automargin=True)
    return fig


def resource_chart(devices: Sequence[str], fractions: dict[str, Sequence[float]],
                   details: dict[str, Sequence[str]]) -> go.Figure:
    """Resources against capacity: a bar group per device up to OWN_BARS_MAX devices, a heat
    map above (every device keeps its own cell, unlike bars of runs alike)."""
    if len(devices) <= OWN_BARS_MAX:
        return resource_bars(devices, fractions, details)
    return resource_heatmap(devices, fractions, details)


def _check_rows(spans: Sequence[Span]) -> None:
    """A row runs one span at a time; overlapping spans would count their time twice."""
    last: dict[str, float] = {}
    for s in sorted(spans, key=lambda s: (s.row, s.start)):
        if s.start < last.get(s.row, s.start) - 1e-12 * max(1.0, abs(s.start)):
            raise ValueError(f"timeline row '{s.row}' has overlapping spans")  # a kind's bug
        last[s.row] = s.finish


def binned_gantt(spans: Sequence[Span], scale: float, unit: str, row_title: str,
                 order: Sequence[str] = (), most: int = OWN_SPANS_MAX, bins: int = TIME_BINS
                 ) -> go.Figure:
    """`gantt` up to `most` spans; above, time is cut into `bins` equal bins and each row
    draws, per bin and kind, one bar as long as its busy time in that bin (left-aligned in
    the bin), so a row's bars add up to its busy time. Each row's label gives its busy share
    of the run, and a note on the chart says what was aggregated."""
    if len(spans) <= most:
        return gantt(spans, scale, unit, row_title, order)
    _check_rows(spans)
    end = max(s.finish for s in spans)
    width = end / bins
    busy: dict[tuple[str, str, int], float] = defaultdict(float)
    calls: dict[tuple[str, str, int], int] = defaultdict(int)
    def bin_of(t: float) -> int:
        return min(int(t / width), bins - 1)

    for s in spans:
        calls[s.row, s.kind, bin_of(s.start)] += 1
        for b in range(bin_of(s.start), bin_of(s.finish) + 1):
            overlap = min(s.finish, (b + 1) * width) - max(s.start, b * width)
            if overlap > 0:
                busy[s.row, s.kind, b] += overlap
    rows = list(dict.fromkeys(s.row for s in spans))
    total = {r: sum(v for (row, _, _), v in busy.items() if row == r) for r in rows}
    label = {r: f"{r} ({100 * total[r] / end:.1f}% busy)" for r in rows}
    kinds = list(dict.fromkeys(s.kind for s in spans))
    colour = colours_for(kinds, order)
    offset: dict[tuple[str, int], float] = defaultdict(float)  # stacked kinds in a bin
    fig = go.Figure()
    for kind in kinds:
        keys = sorted((k for k in busy if k[1] == kind), key=lambda k: (rows.index(k[0]), k[2]))
        base = []
        for row, _, b in keys:
            base.append((b * width + offset[row, b]) * scale)
            offset[row, b] += busy[row, kind, b]
        fig.add_trace(go.Bar(
            orientation="h", name=kind, y=[label[k[0]] for k in keys], base=base,
            x=[busy[k] * scale for k in keys], marker_color=colour[kind], marker_line_width=0,
            customdata=[[k[2] * width * scale, (k[2] + 1) * width * scale, calls[k],
                         100 * busy[k] / width] for k in keys],
            hovertemplate="%{y} · " + kind + ": %{x:,.3f} " + unit + " busy in "
                          "%{customdata[0]:,.1f}–%{customdata[1]:,.1f} " + unit
                          + " (%{customdata[3]:.0f}%), "
                          "%{customdata[2]} calls began<extra></extra>"))
    fig.update_layout(barmode="overlay", bargap=0.25, xaxis_title=f"time ({unit})",
                      yaxis_title=row_title, legend_title_text="busy with")
    fig.update_yaxes(categoryorder="array", categoryarray=[label[r] for r in rows[::-1]],
                     automargin=True)
    fig.add_annotation(
        xref="paper", yref="paper", x=0, y=1.0, yanchor="bottom", showarrow=False,
        xanchor="left", font={"size": 11}, name="aggregated",
        text=f"{len(spans):,} calls aggregated into {bins} bins of {width * scale:,.2f} {unit}: "
             "a bar is a row's busy time in its bin, left-aligned")
    return fig


def every_label(fig: go.Figure, axis: str, labels: Sequence[str], px_each: int = 18) -> None:
    """Show every category of a crowded axis (plotly drops every other one when they are
    close): all ticks listed, the chart tall (a y axis) or the labels turned (an x axis)."""
    ticks = {"tickmode": "array", "tickvals": list(labels), "automargin": True}
    if axis == "y":
        fig.update_yaxes(**ticks, tickfont={"size": 11})
        fig.update_layout(height=max(420, px_each * len(labels) + 140))
    else:
        fig.update_xaxes(**ticks, tickangle=-60, tickfont={"size": 11})


_HALF = 0.32  # half a group's box: groups 1 apart leave a gap for the links between them


def _grid(count: int, centre: float) -> list[tuple[float, float]]:
    """`count` places on a grid two wide around x = `centre`, top row at y = 0."""
    cols = 1 if count == 1 else 2
    return [(centre + (i % cols - (cols - 1) / 2) * 0.3, -(i // cols) * 0.5)
            for i in range(count)]


def _link(a: float, b: float, y: float, low: float) -> tuple[list[float], list[float]]:
    """A link from group a to group b: between neighbours, straight across the gap between
    their boxes at height y; else an arc from the bottom of the boxes (at `low`) down and
    back, so it does not run through the groups between."""
    if abs(a - b) <= 1:
        return [a + _HALF, b - _HALF], [y, y]
    ts = [i / 16 for i in range(17)]
    return [a + (b - a) * t for t in ts], [low - 2 * t * (1 - t) for t in ts]


def grouped_graph(groups: dict[str, Sequence[Node]], links: dict[tuple[int, int], float],
                  per: str, axis_titles: tuple[str, str]) -> go.Figure:
    """A cluster drawn by group (a switch and its devices, a Galapagos cluster): group g in
    box g, left to right, its devices on a grid inside (their own x, y are not used). Nodes
    are numbered in the groups' order; links within a group run device to device, links
    between groups are summed per pair of groups and drawn box to box, width by bytes `per`
    token or inference."""
    placed: list[Node] = []
    group_at: list[int] = []
    boxes = []
    for g, members in enumerate(groups.values()):
        spots = _grid(len(members), float(g))
        placed += [replace(n, x=x, y=y) for n, (x, y) in zip(members, spots, strict=True)]
        group_at += [g] * len(members)
        boxes.append((g - _HALF, min(y for _, y in spots) - 0.25, g + _HALF, 0.25))
    low = min(y for _, y, _, _ in boxes)  # every box as tall as the tallest
    boxes = [(x0, low, x1, y1) for x0, _, x1, y1 in boxes]
    inside = {k: v for k, v in links.items() if group_at[k[0]] == group_at[k[1]]}
    fig = cluster_graph(placed, inside, per, axis_titles)
    between: dict[tuple[int, int], float] = defaultdict(float)
    for (a, b), nbytes in links.items():
        if group_at[a] != group_at[b]:
            between[min(group_at[a], group_at[b]), max(group_at[a], group_at[b])] += nbytes
    names = list(groups)
    most = max(between.values(), default=0.0) or 1.0
    for (a, b), nbytes in between.items():
        # between the top two rows (across the middle of boxes of one row)
        xs, ys = _link(float(a), float(b), max(low + 0.25, -0.25), low)
        fig.add_trace(go.Scatter(
            x=xs, y=ys, mode="lines", name="between groups", showlegend=False,
            line={"width": 1 + 11 * nbytes / most, "color": "#5d6d87"},
            text=[f"{names[a]} ↔ {names[b]}: {nbytes:,.0f} bytes per {per}"] * len(xs),
            hovertemplate="%{text}<extra></extra>"))
    for (x0, y0, x1, y1), name in zip(boxes, names, strict=True):
        fig.add_shape(type="rect", x0=x0, y0=y0, x1=x1, y1=y1, name=name, layer="below",
                      line={"color": "#9aa5b8", "width": 1}, fillcolor="rgba(136,150,171,0.08)")
        fig.add_annotation(x=(x0 + x1) / 2, y=y1, text=name, showarrow=False, yanchor="bottom",
                           font={"size": 10})
    fig.update_xaxes(showticklabels=False)
    fig.update_yaxes(showticklabels=False)
    return fig
