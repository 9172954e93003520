"""The tensor-parallel page's roofline: each matrix-unit step of one decoder block on one
device, at the plan's batch, against the memory it streams from.

A point's operations are the op's FLOPs on the device's share for every sequence of the
step, its bytes the engine's own `streamed_bytes` and its time the engine's `seconds`: the
figures the estimate adds up, so a point's attained rate is the estimate's (the page once
counted the KV cache as FP16 values without the tiles' rounding, where LORA-Q keeps INT8,
which put its attention 1.5x above the HBM slope). Its slope is the engine's `read_roof`
for that step: HBM for decode weights, DDR for LORA's prefill weights, the URAM-held KV
cache (HBM past what the URAMs hold) and on-chip tiles in prefill. Vector-unit steps
(norms, softmax, residuals) read buffered rows, no memory: they have no point here."""

from dataclasses import dataclass

import numpy as np

from archipelago.estimate.workload import Generation
from archipelago.models.graph_ops import Phase
from archipelago.number_formats import number_format
from archipelago.report.charts import OpPoint, roofline
from archipelago.report.page import Chart
from archipelago.strategies.tensor_parallel.costs import batched, sequence_turns
from archipelago.strategies.tensor_parallel.plan import ComputeStep, Plan

# The steps taking the most time carry their names as text on the chart (all on hover).
LABELLED = 5


@dataclass(frozen=True)
class RoofPoint:
    """A step's point and the slope it sits under (bytes per second)."""

    point: OpPoint
    memory: str
    rate_Bps: float


def mean_decode_context(work: Generation) -> int:
    """The context of the page's decode step: the midpoint of the generated tokens."""
    return work.input_tokens + max(1, work.output_tokens // 2)


def roof_points(plan: Plan, phase: Phase, sequences: int, group: str) -> list[RoofPoint]:
    """One device's matrix-unit steps of a block in `phase`, `sequences` together."""
    engine, points = plan.engine, []
    for step in batched(plan.layer_steps(phase.new_tokens), sequences):
        if not isinstance(step, ComputeStep) or (roof := engine.read_roof(step, phase)) is None:
            continue
        op = step.op
        share = step.local_heads / op.heads if op.heads else step.local_out / op.fan_out
        ops = float(np.max(op.flops(phase))) * share * step.sequences
        point = OpPoint(op.name, group, ops,
                        float(np.max(engine.streamed_bytes(step, phase))),
                        float(np.max(engine.seconds(step, phase))), roof[0])
        points.append(RoofPoint(point, roof[0], float(np.min(roof[1]))))
    return points


def plan_roof_points(plan: Plan, work: Generation) -> list[RoofPoint]:
    """The decode step at the mean context and, where the prompt runs as one matrix pass,
    the prefill, each with the batch's sequences that run together."""
    together, _ = sequence_turns(plan, work)
    points = roof_points(plan, Phase(1, np.array([mean_decode_context(work)])), together,
                         "decode")
    if not plan.engine.token_serial_prefill:  # else the prompt runs as decode-like passes
        points += roof_points(plan, Phase(work.input_tokens, np.array([work.input_tokens])),
                              together, "prefill")
    return points


def roofline_chart(plan: Plan, work: Generation) -> Chart:
    engine = plan.engine
    base = engine.hbm_bytes_per_cycle * engine.config.clock_hz
    points = plan_roof_points(plan, work)
    roofs = {p.memory: p.rate_Bps for p in points
             if not np.isclose(p.rate_Bps, base, rtol=1e-9)}  # the weights' HBM: the base
    unit = "OP" if number_format(plan.numerics).integer else "FLOP"
    return Chart("roofline of one device",
                 f"Each matrix-unit step of a decoder block on one device at batch "
                 f"{work.batch} (decode at context {mean_decode_context(work)}, and prefill "
                 "where the prompt runs as one matrix pass), drawn with the estimate's own "
                 "bytes and seconds under the slope of the memory it reads: points near a "
                 "slope are bound by that memory, near the flat roof by the matrix unit. "
                 "Norms, softmax and residuals run on the vector unit from buffered rows "
                 "and are not drawn.",
                 roofline([p.point for p in points], engine.peak_ops_per_s, base, unit,
                          "HBM stream", roofs, LABELLED))
