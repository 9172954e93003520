"""The scheduled-DAG kind's report page (CHEF, H2H; seeds/004): charts read from the plan's
schedule (`to_dict`, the object `--json` prints): the per-accelerator Gantt chart, each
accelerator's busy and communication time, and each FPGA's resources against capacity.

A DAG of several models (parts no data flows between: a multi-model deployment) has its
layers coloured by model; one model's by modality. FPGAs given IPs that run no layer are
marked on every chart that shows FPGAs and listed under them."""

from typing import Any

import plotly.graph_objects as go

from archipelago.report.charts import (
    Node,
    Span,
    cluster_graph,
    gantt,
    resource_bars,
    ring_positions,
    stacked_breakdown,
)
from archipelago.report.dense import every_label
from archipelago.report.page import Chart, KindPage
from archipelago.strategies.chef.layer_groups import colour_groups

MS = 1e3


def _row(m: dict[str, Any]) -> str:
    return f"{m['fpga']}/{m['accelerator']}"


IDLE = "idle: IPs deployed, no layer"


def idle_accelerators(est: dict[str, Any]) -> dict[str, list[str]]:
    """FPGA -> its accelerators no layer is mapped to, for FPGAs that run no layer at all."""
    busy = {m["fpga"] for m in est["mapping"]}
    return {f["fpga"]: [f"{a['acc']} ({a['ip']})" for a in f["accelerators"]]
            for f in est["deployment"] if f["accelerators"] and f["fpga"] not in busy}


def _link_bytes(plan: Any) -> dict[tuple[int, int], float]:
    """Bytes one inference moves between two FPGAs: every layer input produced on another
    FPGA than the one its layer is mapped to (the schedule's own predecessor table)."""
    t, mapping = plan.tables, plan.schedule.mapping
    links: dict[tuple[int, int], float] = {}
    for i, preds in enumerate(t.preds):
        for p, nbytes in preds:
            a, b = t.fpga_of[mapping[p]], t.fpga_of[mapping[i]]
            if a != b:
                key = (min(a, b), max(a, b))
                links[key] = links.get(key, 0.0) + nbytes
    return links


def _cluster_chart(plan: Any, fpgas: list[dict[str, Any]], fractions: dict[str, list[float]],
                   idle_fpgas: dict[str, list[str]]) -> Chart:
    nodes = []
    for i, (x, y) in enumerate(ring_positions(len(fpgas))):
        binding = max(fractions, key=lambda r: fractions[r][i])
        nodes.append(Node(fpgas[i]["fpga"], x, y, fractions[binding][i], binding))
    links = _link_bytes(plan)
    figure = cluster_graph(nodes, links, "inference", ("layout only", "layout only"))
    idle = [n for n in nodes if n.label in idle_fpgas]
    if idle:
        figure.add_trace(go.Scatter(
            x=[n.x for n in idle], y=[n.y for n in idle], mode="markers+text", name=IDLE,
            showlegend=False,  # the crosses are labelled; a legend would cover the colour bar
            text=[f"{n.label}: idle" for n in idle], textposition="bottom center",
            marker={"symbol": "x-thin", "size": 30, "line": {"width": 3, "color": "#222"}},
            hovertemplate="%{text}<extra></extra>"))
    return Chart("the cluster", f"{len(fpgas)} FPGAs; colour = the binding resource's use, "
                 f"link width = bytes one inference moves between two FPGAs "
                 f"({sum(links.values()) / 1e6:,.2f} MB in all)" + (
                     "; a cross marks an FPGA given IPs that runs no layer." if idle else "."),
                 figure)


def _timeline(plan: Any, mapping: list[dict[str, Any]], idle: dict[str, list[str]]) -> Chart:
    """The Gantt chart: layers coloured by model (by modality where the DAG is one model),
    and a row per accelerator of an idle FPGA, marked at time 0."""
    colour_by, legend = colour_groups(plan.dag.layers)
    several = legend == "model"
    spans = [Span(_row(m), m["start_s"], m["end_s"], m["layer"], colour_by[m["layer"]])
             for m in mapping]
    figure = gantt(spans, MS, "ms", "FPGA / accelerator")
    rows = list(dict.fromkeys(s.row for s in spans))
    idle_rows = [f"{fpga}/{acc.split()[0]}" for fpga, accs in idle.items() for acc in accs]
    if idle_rows:
        figure.add_trace(go.Scatter(
            x=[0.0] * len(idle_rows), y=idle_rows, mode="markers+text", name=IDLE,
            text=[f"idle: {acc}" for accs in idle.values() for acc in accs],
            textposition="middle right", marker={"symbol": "x-thin", "size": 12,
                                                 "line": {"width": 2, "color": "#222"}},
            hovertemplate="%{y} %{text}<extra></extra>"))
    every_label(figure, "y", [*rows, *idle_rows])
    figure.update_yaxes(categoryarray=[*rows, *idle_rows][::-1])
    figure.update_layout(legend_title_text=legend)
    return Chart(
        "the schedule per accelerator",
        "Each layer from its start to its end on the accelerator it is mapped to (the bars "
        "`--gantt` writes), coloured "
        + ("by model, the DAG's parts no data flows between" if several else "by modality")
        + ": gaps are an accelerator waiting for its inputs"
        + ("; crosses mark the accelerators of FPGAs that run no layer." if idle_rows
           else "."), figure)


def page(plan: Any, workload: Any, est: dict[str, Any], summary: dict[str, Any]) -> KindPage:
    """The scheduled-DAG kind's `page` hook."""
    idle = idle_accelerators(est)
    timeline = _timeline(plan, est["mapping"], idle)
    parts: dict[str, dict[str, float]] = {}
    for m in est["mapping"]:
        row = parts.setdefault(_row(m), {"compute": 0.0, "communication": 0.0})
        row["communication"] += m["comm_s"]
        row["compute"] += m["end_s"] - m["start_s"] - m["comm_s"]
    breakdown = Chart(
        "where the time goes",
        "Each accelerator's time in its layers, split into computing and receiving their "
        "inputs from other FPGAs (the communication ratio of the headline).",
        stacked_breakdown(parts, MS, "ms", "FPGA / accelerator"))
    fpgas = est["deployment"]
    fractions = {"DSP": [f["dsp_used"] / f["dsp_available"] for f in fpgas],
                 "BRAM": [f["bram_used"] / f["bram_available"] for f in fpgas]}
    details = {"DSP": [f"{f['dsp_used']:,} of {f['dsp_available']:,}" for f in fpgas],
               "BRAM": [f"{f['bram_used']:,} of {f['bram_available']:,}" for f in fpgas]}
    resources = Chart(
        "per-FPGA resources against capacity",
        "DSP and BRAM the deployed accelerators take on each FPGA; the outlined bar is the "
        "binding resource" + ("; '(idle)' marks an FPGA given IPs that runs no layer."
                              if idle else "."),
        resource_bars([f["fpga"] + (" (idle)" if f["fpga"] in idle else "") for f in fpgas],
                      fractions, details))
    listed = [f"Idle FPGA {fpga}: given {', '.join(accs)}, runs no layer."
              for fpga, accs in idle.items()]
    return KindPage(
        charts=[breakdown, _cluster_chart(plan, fpgas, fractions, idle), resources, timeline],
        notes=[*listed, "No context or device-count sweep and no roofline: the search places "
               "each layer on its own accelerator design, so the schedule is the picture."])
