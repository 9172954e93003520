"""The GPU kind's report page: where a generation's time goes, each op of a decode step on
the GPU's roofline, and tokens/s as the batch grows."""

from dataclasses import replace
from typing import Any

from archipelago.estimate.workload import Generation
from archipelago.models.graph_ops import Phase
from archipelago.report.charts import OpPoint, roofline, stacked_breakdown, sweep_lines
from archipelago.report.page import Chart, KindPage
from archipelago.strategies.gpu.estimate import GPUEstimate, estimate
from archipelago.strategies.gpu.plan import GPUPlan
from archipelago.strategies.gpu.roofline import op_cost
from archipelago.strategies.gpu.steps import ops_in_order

MS = 1e3
SWEEP_BATCHES = (1, 2, 4, 8, 16, 32, 64)
LABELLED = 5  # the ops taking the most time carry their names as text on the roofline


def _roofline(plan: GPUPlan, work: Generation) -> Chart:
    peak = plan.tensor_ops_per_s
    bandwidth = plan.memory_Bps * plan.config.memory_efficiency
    phase = Phase(1, work.input_tokens + max(work.output_tokens // 2, 1))
    points = {}
    for op, _ in ops_in_order(plan):  # one point per op of a block (the layers repeat it)
        cost = op_cost(op, plan.spec, phase, work.batch, plan.ranks, plan.format,
                       plan.config.expert_skew)
        points.setdefault(op.name, OpPoint(op.name, op.kind, float(cost.flops),
                                           float(cost.bytes),
                                           float(cost.seconds(peak, bandwidth))))
    return Chart("each op of a decode step on the roofline",
                 f"One GPU's ops at context {phase.context}, batch {work.batch}: FLOPs per "
                 f"byte moved against the {plan.format.tensor.upper()} tensor peak and the "
                 "memory slope (the datasheet bandwidth x the fitted streaming efficiency); "
                 "left of the ridge, bytes set the time (each kernel's floor and grid, "
                 "which the estimate adds, are not drawn).",
                 roofline(list(points.values()), peak, bandwidth, "FLOP", "memory",
                          labelled=LABELLED))


def _batch_sweep(plan: GPUPlan, work: Generation, est: GPUEstimate) -> Chart:
    batches = sorted({*SWEEP_BATCHES, work.batch})  # the plan's own batch on the curve
    rates = [estimate(plan, replace(work, batch=b)).tokens_per_s for b in batches]
    return Chart("tokens/s as the batch grows",
                 "Every weight read serves the whole batch, so decode throughput grows with "
                 "it until the steps' FLOPs, the KV caches or the launches set the pace "
                 "(memory fit not checked here).",
                 sweep_lines(batches, {plan.strategy: rates}, "batch (sequences)",
                             "tokens/s", log_x=True, mark=(work.batch, est.tokens_per_s)))


def page(plan: GPUPlan, workload: Generation, est: GPUEstimate, summary: dict[str, Any]
         ) -> KindPage:
    """The gpu kind's `page` hook."""
    breakdown = Chart("where the time goes",
                      "The whole generation by part, each kernel charged from the previous "
                      "kernel's end: in eager mode the gaps while the host issues kernels "
                      "fall to the kernel that waited.",
                      stacked_breakdown({plan.strategy: est.breakdown_s}, MS, "ms", "strategy"))
    return KindPage([breakdown, _roofline(plan, workload), _batch_sweep(plan, workload, est)])
