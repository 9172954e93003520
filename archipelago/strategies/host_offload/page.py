"""The host-program kind's report page (seeds/003): charts read from the HostPlan's
recorded program and its HostEstimate; the call timeline replays the modelling tool's own
walk over the program (estimate.call_timeline)."""

from typing import Any

from archipelago.report.charts import (
    Node,
    Span,
    cluster_graph,
    resource_bars,
    stacked_breakdown,
)
from archipelago.report.dense import binned_gantt
from archipelago.report.page import Chart, KindPage
from archipelago.strategies.host_offload.estimate import HostEstimate, call_timeline
from archipelago.strategies.host_offload.plan import HostPlan

MS, US = 1e3, 1e6
_ORDER = ("cpu", "fpga", "comm")


def _pcie_bytes(plan: HostPlan) -> list[float]:
    """Bytes each card's PCIe link carries in one inference (setup excluded)."""
    per_card = [0.0] * plan.cards
    for call in plan.program.calls:
        if call.category == "comm" and call.source == "host" and call.device is not None:
            per_card[call.device] += call.nbytes
    return per_card


def _cluster_chart(plan: HostPlan, est: HostEstimate) -> Chart:
    used = [b / c for b, c in zip(est.onchip_bytes, est.onchip_capacity_bytes, strict=True)]
    nodes = [Node("host CPU", 0.0, 0.0, 0.0, "none")]
    nodes += [Node(f"card {k}", 1.0, float(plan.cards - 1 - k) - (plan.cards - 1) / 2,
                   used[k], "on-chip weights") for k in range(plan.cards)]
    links = {(0, k + 1): b for k, b in enumerate(_pcie_bytes(plan)) if b}
    return Chart("the host and its cards",
                 f"{plan.cards} {plan.designs[0].device.key} cards on PCIe; colour = share of "
                 "each card's on-chip weight memory in use, link width = bytes the program "
                 "moves over that card's PCIe link per inference.",
                 cluster_graph(nodes, links, "inference", ("host → cards (layout only)",
                                                           "card (layout only)")))


def _timeline(plan: HostPlan) -> Chart:
    """Every call of one inference: too many to draw one bar each, so binned_gantt adds each
    row's busy time per time bin (its bars still add to the row's busy time)."""
    calls = call_timeline(plan, len(plan.program.calls))
    spans = [Span("CPU" if c.device is None else f"card {c.device}", start, start + seconds,
                  c.name, c.category) for c, start, seconds in calls]
    return Chart("the host program's calls over time",
                 f"All {len(calls):,} calls of one inference on the CPU and each card, as the "
                 "host issues them, binned in time where there are too many to draw one by one "
                 "(the note above the chart says how); each row's label gives its busy share "
                 "of the run. Calls of one parallel region overlap across cards; a card waits "
                 "while the CPU works.",
                 binned_gantt(spans, US, "µs", "where the call runs", _ORDER))


def page(plan: HostPlan, workload: None, est: HostEstimate, summary: dict[str, Any]
         ) -> KindPage:
    """The host-program kind's `page` hook."""
    breakdown = Chart(
        "where the time goes",
        "One inference split into CPU calls, FPGA overlay execution and communication "
        "(PCIe transfers); setup (programs and persistent weights) is reported apart.",
        stacked_breakdown({"one inference": est.breakdown_s, "setup": {"comm": est.setup_s}},
                          MS, "ms", "phase", _ORDER))
    costliest = Chart(
        "the costliest calls",
        "Time the calls of each name set on the program's critical path (a parallel region "
        "counts once, for the call that set its pace).",
        stacked_breakdown({name: {"time": v["time_s"]} for name, v in est.top_calls(10)},
                          MS, "ms", "API call"))
    onchip = Chart(
        "per-card on-chip weights against capacity",
        "Bytes of weights each card keeps in its matrix register files as a share of what "
        "it holds (persistent weights must stay under the dashed line).",
        resource_bars([f"card {k}" for k in range(plan.cards)],
                      {"on-chip weights": [b / c for b, c in zip(
                          est.onchip_bytes, est.onchip_capacity_bytes, strict=True)]},
                      {"on-chip weights": [f"{b / 2**20:,.1f} of {c / 2**20:,.1f} MiB" for b, c
                                           in zip(est.onchip_bytes, est.onchip_capacity_bytes,
                                                  strict=True)]}))
    return KindPage(
        charts=[breakdown, costliest, _cluster_chart(plan, est), onchip, _timeline(plan)],
        notes=["No context or device-count sweep: a host program's shape (steps, cards, "
               "partition) is fixed when it is recorded; re-plan with other options to "
               "compare."])
