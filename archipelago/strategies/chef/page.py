"""The scheduled-DAG kind's report page (CHEF, H2H; seeds/004): charts read from the plan's
schedule (`to_dict`, the object `--json` prints): the per-accelerator Gantt chart, each
accelerator's busy and communication time, and each FPGA's resources against capacity."""

from typing import Any

from archipelago.report.charts import (
    Node,
    Span,
    cluster_graph,
    gantt,
    resource_bars,
    ring_positions,
    stacked_breakdown,
)
from archipelago.report.page import Chart, KindPage

MS = 1e3


def _row(m: dict[str, Any]) -> str:
    return f"{m['fpga']}/{m['accelerator']}"


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


def _cluster_chart(plan: Any, fpgas: list[dict[str, Any]],
                   fractions: dict[str, list[float]]) -> Chart:
    nodes = []
    for i, (x, y) in enumerate(ring_positions(len(fpgas))):
        binding = max(fractions, key=lambda r: fractions[r][i])
        nodes.append(Node(fpgas[i]["fpga"], x, y, fractions[binding][i], binding))
    links = _link_bytes(plan)
    return Chart("the cluster", f"{len(fpgas)} FPGAs; colour = the binding resource's use, "
                 f"link width = bytes one inference moves between two FPGAs "
                 f"({sum(links.values()) / 1e6:,.2f} MB in all).",
                 cluster_graph(nodes, links, "inference", ("layout only", "layout only")))


def page(plan: Any, workload: Any, est: dict[str, Any], summary: dict[str, Any]) -> KindPage:
    """The scheduled-DAG kind's `page` hook."""
    modality = {la.name: la.modality for la in plan.dag.layers}
    mapping = est["mapping"]
    spans = [Span(_row(m), m["start_s"], m["end_s"], m["layer"], modality[m["layer"]])
             for m in mapping]
    timeline = Chart(
        "the schedule per accelerator",
        "Each layer from its start to its end on the accelerator it is mapped to, coloured "
        "by modality (the chart `--gantt` writes): gaps are an accelerator waiting for its "
        "inputs.", gantt(spans, MS, "ms", "FPGA / accelerator"))
    parts: dict[str, dict[str, float]] = {}
    for m in mapping:
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
        "binding resource.", resource_bars([f["fpga"] for f in fpgas], fractions, details))
    return KindPage(
        charts=[breakdown, _cluster_chart(plan, fpgas, fractions), resources, timeline],
        notes=["No context or device-count sweep and no roofline: the search places each "
               "layer on its own accelerator design, so the schedule is the picture."])
