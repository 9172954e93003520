"""The tensor-parallel kind's report page: charts read from its staged plan and generation
Estimate (every stage's devices; one ring program's block, roofline and instructions, the
same in every stage); the sweeps (page_sweeps.py) and the roofline (page_roofline.py) are
at the plan's batch."""

from typing import Any

import numpy as np

from archipelago.errors import PartitionError
from archipelago.estimate.workload import Generation
from archipelago.models.graph_ops import Phase
from archipelago.report.charts import (
    Node,
    Span,
    cluster_graph,
    gantt,
    gantt_per_group,
    resource_bars,
    ring_positions,
    stacked_breakdown,
)
from archipelago.report.page import Chart, KindPage
from archipelago.strategies.tensor_parallel.costs import (
    CATEGORIES,
    step_category,
    steps_seconds,
)
from archipelago.strategies.tensor_parallel.dfx_program.asm import format_instr
from archipelago.strategies.tensor_parallel.dfx_program.timing import instr_class
from archipelago.strategies.tensor_parallel.dfx_program.versus import simulate_plan
from archipelago.strategies.tensor_parallel.engines.overlap import collective_seconds
from archipelago.strategies.tensor_parallel.estimate import Estimate
from archipelago.strategies.tensor_parallel.page_roofline import (
    mean_decode_context,
    roofline_chart,
)
from archipelago.strategies.tensor_parallel.page_stages import stage_chart, stage_table
from archipelago.strategies.tensor_parallel.page_sweeps import batch_charts, sweeps
from archipelago.strategies.tensor_parallel.plan import CommStep, ComputeStep, Plan
from archipelago.strategies.tensor_parallel.staged import Stage, StagedPlan
from archipelago.strategies.tensor_parallel.transfers import (
    TOKEN_ID_BYTES,
    activation_bytes,
)

MS = 1e3
# Bytes one link carries per byte of a collective's full result, on a ring of N: an
# all-gather forwards N-1 parts of 1/N each, a ring all-reduce (reduce-scatter, then
# all-gather) twice that; an expert combine, each sender's whole vector round the ring
# (DFX's circulation; LORA's short-way slices carry less), once per sender.
_LINK_SHARE = {"all_gather": 1.0, "argmax_gather": 1.0, "all_reduce": 2.0, "all_to_all": 1.0}
_COLOUR_ORDER = (*CATEGORIES, "collective", "transfer")  # a rack's hops last
# The instruction types of a DFX core, one FSM each (seeds/001 §V-A): its timeline's rows.
_FSMS = ("Compute", "Dma", "Router")
# The timing simulator steps every core through a program whose collectives take one hop
# per other core, its scoreboard growing with them: its time grows with about the cube of
# the ring (128 cores: 200 s), so the page simulates rings up to this size (32: 10 s).
SIMULATED_CORES_MAX = 16
# Every device of a ring runs the same steps at the same times (SPMD): the block timeline
# draws this many of them, not thousands of identical rows.
TIMELINE_DEVICES = 4


def _link_bytes_per_token(stage: Stage) -> float:
    """Bytes each ring link of a stage carries for one generated token: every collective of
    every block it runs, then the output's (e.g. the argmax gather) on the last stage."""
    plan = stage.program
    n = plan.ranks

    def on_link(steps: list) -> float:
        return sum(_LINK_SHARE[s.kind] * (s.senders or 1) * (n - 1) / n * s.width
                   * s.value_bytes for s in steps if isinstance(s, CommStep))

    blocks = plan.block_counts(stage.layers.start, len(stage.layers))
    return (sum(on_link(plan.layer_steps(1, layer)) * count for layer, count in blocks)
            + (on_link(plan.output_steps) if stage.last else 0.0))


def _fractions(est: Estimate) -> tuple[dict[str, list[float]], dict[str, list[str]]]:
    """Per device of every stage, the share of each capacity used (fabric and off-chip
    memories)."""
    fractions: dict[str, list[float]] = {}
    details: dict[str, list[str]] = {}
    pairs = [(use, dp, part.stage.program) for part in est.stages
             for use, dp in zip(part.devices, part.stage.program.devices, strict=True)]
    for use, dp, program in pairs:
        have = program.fabric(dp.rank)
        rows = [(r.upper(), getattr(use.total, r), getattr(have, r), "")
                for r in ("dsp", "bram", "uram") if getattr(have, r)]
        for kind, need in (("hbm", use.hbm_bytes), ("ddr", use.ddr_bytes)):
            mem = dp.device.memory(kind)
            if mem is not None:
                rows.append((kind.upper(), need / 1e9, mem.capacity_bytes / 1e9, " GB"))
        for name, used, cap, unit in rows:
            fractions.setdefault(name, []).append(used / cap)
            details.setdefault(name, []).append(f"{used:,.4g}{unit} of {cap:,.4g}{unit}")
    return fractions, details


def _stage_links(plan: StagedPlan) -> tuple[dict[tuple[int, int], float], float]:
    """Bytes per generated token on each link inside every stage's ring and between the
    stages (the hidden vector forward, the token back); the busiest ring link's."""
    links: dict[tuple[int, int], float] = {}
    busiest = 0.0
    for stage in plan.stages:
        per_link, nodes = _link_bytes_per_token(stage), stage.nodes
        busiest = max(busiest, per_link)
        tp = len(nodes)
        if tp == 2:
            links[nodes[0], nodes[1]] = 2 * per_link  # both directions of the one pair
        elif tp > 2:
            links.update({(nodes[r], nodes[(r + 1) % tp]): per_link for r in range(tp)})
    program = plan.program
    row = program.spec.hidden * activation_bytes(program)
    for a, b in zip(plan.stages, plan.stages[1:], strict=False):
        links[a.nodes[-1], b.nodes[0]] = row
    if len(plan.stages) > 1:
        links[plan.stages[-1].nodes[0], plan.stages[0].nodes[0]] = TOKEN_ID_BYTES
    return links, busiest


def _cluster_chart(plan: StagedPlan, est: Estimate) -> Chart:
    fractions, _ = _fractions(est)
    nodes = []
    for i, (x, y) in enumerate(ring_positions(plan.ranks)):
        binding = max(fractions, key=lambda r: fractions[r][i])
        nodes.append(Node(f"device {i}", x, y, fractions[binding][i], binding))
    links, per_link = _stage_links(plan)
    stages = (f" in {len(plan.stages)} stages of {plan.split.tp}"
              if len(plan.stages) > 1 else "")
    return Chart("the cluster", f"{plan.ranks} {plan.program.devices[0].device.key} on a "
                 f"{plan.cluster.topology}{stages}; colour = the binding resource's use, "
                 f"link width = bytes the collectives move per generated token "
                 f"({per_link:,.0f} bytes per link).",
                 cluster_graph(nodes, links, "token",
                               ("position round the ring (layout only)",
                                "position round the ring (layout only)")))


def _block_timeline(plan: Plan, context: int) -> Chart:
    """One decoder block at a decode step: each device's compute steps and, on its link
    row, every collective from start to finish (the exposed part stalls compute)."""
    phase, steps = Phase(1, np.array([context])), plan.layer_steps(1)
    seconds = [float(s[0]) for s in steps_seconds(plan, steps, phase)]
    spans = []
    shown = min(plan.ranks, TIMELINE_DEVICES)
    for rank in range(shown):
        now = 0.0
        for step, exposed in zip(steps, seconds, strict=True):
            if isinstance(step, ComputeStep):
                label = step.op.name + ("" if step.stage == "whole" else f" ({step.stage})")
                spans.append(Span(f"device {rank}", now, now + exposed, label,
                                  step_category(step)))
            elif whole := collective_seconds(plan, step, 1):
                spans.append(Span(f"device {rank} link", now, now + whole,
                                  f"{step.kind} of {step.tensor}", "collective"))
                if exposed:
                    spans.append(Span(f"device {rank}", now, now + exposed,
                                      f"waits for {step.kind} of {step.tensor}", "sync"))
            now += exposed
    return Chart("one decoder block, step by step",
                 f"A decode step at context {context}: every device runs the same steps on "
                 "its shards (SPMD); collectives run on the link row, and compute waits only "
                 "where they are not hidden."
                 + (f" Devices 0-{shown - 1} of {plan.ranks} shown; the rest run alike."
                    if shown < plan.ranks else ""),
                 gantt(spans, 1e6, "µs", "device", _COLOUR_ORDER))


def _simulated_layer(plan: Plan, work: Generation) -> Chart:
    """The first decoder layer of one token pass as the timing simulator runs it: per core,
    a row for each instruction type's FSM (compute, dma, router, §V-A), a bar per
    instruction from its start to its writeback, coloured by instruction class."""
    context = min(mean_decode_context(work), work.input_tokens + work.output_tokens - 1)
    result = simulate_plan(plan, work.input_tokens, work.output_tokens,
                           np.array([context - 1]))
    start = min(float(r.start[:, 0].min()) for r in result.timeline)
    by_type = sorted(result.timeline, key=lambda r: _FSMS.index(type(r.instr).__name__))
    groups = {f"core {c}": [
        Span(f"core {c} · {type(r.instr).__name__.lower()}", float(r.start[c, 0]) - start,
             float(r.end[c, 0]) - start, f"{format_instr(r.instrs[c])} · {r.note}",
             instr_class(r.instr)) for r in by_type] for c in range(plan.ranks)}
    busy: dict[str, float] = {}  # the busiest classes get the most distinct colours
    for span in groups["core 0"]:
        busy[span.kind] = busy.get(span.kind, 0.0) + span.finish - span.start
    busiest = sorted(busy, key=lambda kind: -busy[kind])
    return Chart("one decoder layer, instruction by instruction (timing simulator)",
                 f"The compiled programs of every core run on the timing simulator "
                 f"(dfx_program/timing.py) at context {context}: compute, dma and router "
                 f"instructions issue in parallel, each type in order; bars run from issue "
                 f"to writeback, in cycles of the {result.clock_hz / 1e6:,.0f} MHz "
                 "kernel clock (with the estimate's two fitted figures: the matrix unit's "
                 "efficiency and the router's per-sync cost).",
                 gantt_per_group(groups, 1.0, "cycles", "core · instruction type", busiest))


def _simulated(plan: Plan, work: Generation) -> tuple[list[Chart], list[str]]:
    """The simulated layer where the engine has an instruction set and the plan can be
    programmed; else a note saying why not (a RMSNorm model, an uneven split): the rest of
    the page stands without it."""
    if not plan.engine.instruction_set:
        return [], []
    if plan.ranks > SIMULATED_CORES_MAX:
        return [], [f"no simulated timeline: the page runs the timing simulator on rings of "
                    f"at most {SIMULATED_CORES_MAX} cores, not {plan.ranks}: its time grows "
                    "with about the cube of the ring"]
    try:
        return [_simulated_layer(plan, work)], []
    except PartitionError as err:
        return [], [f"no simulated timeline: {err}"]


def page(plan: StagedPlan, work: Generation, est: Estimate, summary: dict[str, Any]
         ) -> KindPage:
    """The tensor-parallel kind's `page` hook: a rack's breakdown gains its transfers."""
    program = plan.program
    decode = {c: est.breakdown_s[c] - est.prefill_breakdown_s[c] for c in est.breakdown_s}
    breakdown = Chart(
        "where the time goes",
        "End-to-end time split into the prompt (prefill) and the generated tokens (decode), "
        "by part of the model; 'sync' is collective time compute could not hide.",
        stacked_breakdown({"prefill": est.prefill_breakdown_s, "decode": decode}, MS, "ms",
                          "phase", _COLOUR_ORDER))
    fractions, details = _fractions(est)
    resources = Chart(
        "per-device resources against capacity",
        "Each device's DSP, BRAM, URAM, HBM and DDR use as a share of what it has; the "
        "outlined bar is the binding resource, and a bar over the dashed line does not fit.",
        resource_bars([f"device {d.rank}" for d in est.devices], fractions, details))
    sweep_charts, refused = sweeps(plan, work, est)
    simulated, unsimulated = _simulated(program, work)
    staged = plan.shows_split and len(plan.stages) > 1  # a rack: its stages and bubble
    return KindPage(
        charts=[breakdown, _cluster_chart(plan, est),
                *([stage_chart(plan, work, est)] if staged else []), resources,
                *sweep_charts, *batch_charts(plan, work, est),
                roofline_chart(program, work),
                _block_timeline(program, mean_decode_context(work)),
                *simulated],
        notes=[*(f"not in the device-count sweep: {r}" for r in refused), *unsimulated],
        tables=[stage_table(plan, work, est)] if staged else [])
