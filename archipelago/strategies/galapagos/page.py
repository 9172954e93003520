"""The dataflow kind's report page (Galapagos): charts read from the DataflowPlan and its
StreamEstimate; the sequence-length sweep is asked of the estimator here."""

from math import ceil
from typing import Any

from archipelago.engines.dsp_packing import PRODUCTS_PER_DSP
from archipelago.estimate.workload import Sequence
from archipelago.hardware.device import FABRIC
from archipelago.report.charts import (
    OWN_BARS_MAX,
    Node,
    OpPoint,
    Span,
    gantt,
    roofline,
    stacked_breakdown,
    sweep_lines,
)
from archipelago.report.dense import every_label, grouped_graph, resource_chart
from archipelago.report.page import Chart, KindPage
from archipelago.report.sweep import workload_sweep
from archipelago.strategies.galapagos.estimate import (
    EncoderTiming,
    StreamEstimate,
    kernel_outputs,
)
from archipelago.strategies.galapagos.gmi import HOST
from archipelago.strategies.galapagos.plan import DataflowPlan

MS, US = 1e3, 1e6


def _eq1_parts(est: StreamEstimate, t: EncoderTiming) -> dict[str, float]:
    """Eq. 1, T + (L-1)(X + d), as seconds per term."""
    f, later = est.clock_hz, est.layers - 1
    return {"last encoder T": t.last_output / f,
            "first outputs of the other encoders (L-1)X": later * t.first_output / f,
            "switch to switch (L-1)d": later * est.switch_latency_s}


def _fractions(plan: DataflowPlan) -> tuple[dict[str, list[float]], dict[str, list[str]]]:
    have = plan.fpgas[0].device.resources
    limits = [r for r in FABRIC if getattr(have, r)]
    fractions = {r.upper(): [u.resources.fractions_of(u.device.resources)[r] for u in plan.fpgas]
                 for r in limits}
    details = {r.upper(): [f"{getattr(u.resources, r):,} of {getattr(u.device.resources, r):,}"
                           for u in plan.fpgas] for r in limits}
    return fractions, details


def _cluster_chart(plan: DataflowPlan, seq_len: int) -> Chart:
    """FPGAs grouped by Galapagos cluster (one switch each, in pipeline order), the host
    first; links = network bytes between FPGAs for one sequence, summed per pair of
    clusters between clusters."""
    fractions, _ = _fractions(plan)
    groups: dict[str, list[Node]] = {"host": [Node("host", 0, 0, 0.0, "none")]}
    number = {-1: 0}  # FPGA index -> node number (the host's is -1)
    for c in plan.clusters:
        members = groups.setdefault(f"cluster {c.index}", [])
        for f in c.fpgas:
            binding = max(fractions, key=lambda r: fractions[r][f])
            number[f] = len(number)
            members.append(Node(f"FPGA {f}", 0, 0, fractions[binding][f], binding))
    links: dict[tuple[int, int], float] = {}
    for s in plan.streams:
        a, b = number[plan.nodes[s.src].fpga], number[plan.nodes[s.dst].fpga]
        if a != b:
            key = (min(a, b), max(a, b))
            links[key] = links.get(key, 0.0) + s.bytes_at(seq_len) * seq_len
    total = sum(links.values())
    return Chart("the cluster", f"{plan.fpgas_needed} FPGAs in {len(plan.clusters)} Galapagos "
                 "clusters (a box each, behind its own switch, the host first); colour = the "
                 "binding fabric resource's use; lines inside a box are bytes between its "
                 f"FPGAs, lines between boxes all bytes between two clusters, for one "
                 f"{seq_len}-token sequence ({total / 1e6:,.2f} MB over the network in all).",
                 grouped_graph(groups, links, "sequence",
                               ("Galapagos clusters in pipeline order", "FPGAs of a cluster")))


def _timeline(plan: DataflowPlan, est: StreamEstimate) -> Chart:
    """Each compute kernel of the first encoder: until its first row leaves, then its
    steady state until the last row leaves."""
    f = est.clock_hz
    spans = []
    for name, (first, last) in kernel_outputs(plan, est.seq_len).items():
        if name in plan.compute:
            spans.append(Span(name, 0.0, first / f, "to the first output row", "first output"))
            spans.append(Span(name, first / f, last / f, "first to last output row",
                              "steady state"))
    figure = gantt(spans, US, "µs", "kernel")
    every_label(figure, "y", list(dict.fromkeys(s.row for s in spans)))
    return Chart("one encoder's kernels over time",
                 f"For each compute kernel of encoder 0 at {est.seq_len} tokens: when its first "
                 "row leaves (the pipeline fill, X for the last kernel) and how long it then "
                 "streams (the steady state, about M x I).", figure)


def _kernel_ops(job: Any, m: int) -> float:
    """Operations of one kernel over a sequence of m rows (a multiply and an add each)."""
    if job.op == "linear":
        return 2.0 * job.fan_in * job.fan_out * m
    if job.op in {"score", "context"}:
        return 2.0 * job.heads * job.fan_in * m * m
    return 8.0 * job.fan_in * m  # LayerNorm: a few passes over each element


def _roofline(plan: DataflowPlan, est: StreamEstimate) -> Chart:
    m, f = est.seq_len, est.clock_hz
    points = []
    for name, k in plan.compute.items():
        if k.layer:
            continue
        job = k.design.job
        nbytes = (sum(job.inputs) + job.out_row_bytes) * m
        seconds = m * plan.engine.compute_cycles(k.design, m) / f
        points.append(OpPoint(name, k.role, _kernel_ops(job, m), nbytes, seconds))
    device = plan.fpgas[0].device
    link = plan.cluster.ring_link
    bandwidth = link.bandwidth_Bps if link else device.network.gbps * 1e9 / 8
    # int8 multiply-accumulates: PRODUCTS_PER_DSP per DSP per cycle, two operations each
    peak = 2 * PRODUCTS_PER_DSP * device.resources.dsp * f
    return Chart("roofline of one FPGA",
                 "Encoder 0's compute kernels by operations per byte streamed in and out, "
                 "against one FPGA's DSP roof and its network port: kernels far under both "
                 "are paced by the row interval, not by the hardware.",
                 roofline(points, peak, bandwidth, "OP", "network"))


def _seq_sweep(plan: DataflowPlan, est: StreamEstimate) -> Chart:
    top = plan.engine.config.max_seq_len
    lengths = sorted({*(2 ** i for i in range(3, 12) if 2 ** i <= top), top, est.seq_len})
    whole, encoder = [], []
    for e in workload_sweep(plan, [Sequence(m) for m in lengths],
                            "latency against sequence length"):
        whole.append(e.latency_s * MS)
        encoder.append(e.timing.last_output / e.clock_hz * MS)
    figure = sweep_lines(lengths, {"whole model": whole, "one encoder": encoder},
                         "sequence length (tokens)", "latency (ms)", log_x=True,
                         mark=(est.seq_len, est.latency_s * MS))
    # plotly's own ticks under three decades are bare mantissas (7, 8, 9, 2, 3) that read
    # as lengths; ticks at the lengths swept say them
    figure.update_xaxes(tickvals=lengths, tickformat=",~g")
    return Chart("latency against sequence length",
                 "Whole-model and one-encoder latency as the sequence grows to the length the "
                 "FIFOs are built for (the star is this plan); the FPGA count is fixed by the "
                 "unrolled model, so there is no device-count sweep.",
                 figure)


def page(plan: DataflowPlan, work: Sequence, est: StreamEstimate,
         summary: dict[str, Any]) -> KindPage:
    """The dataflow kind's `page` hook."""
    breakdown = Chart(
        "where the time goes",
        "Eq. 1's terms for the sequence as given and padded to the built length: the last "
        "encoder's full latency, the other encoders' first outputs, and the switch hops.",
        stacked_breakdown({f"{est.seq_len} tokens": _eq1_parts(est, est.timing),
                           f"padded to {est.padded.seq_len}": _eq1_parts(est, est.padded)},
                          MS, "ms", "sequence"))
    kernels = summary["encoder_kernels"]
    busy_figure = stacked_breakdown({k["name"]: {"compute": k["compute_s"]} for k in kernels},
                                    US, "µs", "kernel")
    every_label(busy_figure, "x", [k["name"] for k in kernels])
    busy = Chart(
        "kernel busy time per sequence",
        "Compute time of each of encoder 0's kernels for one sequence; the tallest sets the "
        "pipeline's pace (throughput).", busy_figure)
    fractions, details = _fractions(plan)
    many = len(plan.fpgas) > OWN_BARS_MAX
    resources = Chart(
        "per-FPGA resources against capacity",
        "Each FPGA's fabric use as a share of what it has" + (
            ", a cell per FPGA and resource (hover for the counts)" if many else
            "; the outlined bar is the binding resource") +
        " (the mapping fills FPGAs up to the utilization cap).",
        resource_chart([f"FPGA {u.index}" for u in plan.fpgas], fractions, details))
    rows_on_host = sum(1 for s in plan.streams if HOST in (s.src, s.dst))
    return KindPage(
        charts=[breakdown, busy, _cluster_chart(plan, est.seq_len), resources,
                _seq_sweep(plan, est), _roofline(plan, est), _timeline(plan, est)],
        notes=[f"{rows_on_host} streams connect the host; {ceil(est.kernels / est.clusters)} "
               "kernels per Galapagos cluster on average."])
