"""A generation on GPUs: the prompt as one matrix pass, then one step per further token.

Each step is the model graph's ops in order (plan.py's split), every op one kernel timed by
its roofline (roofline.py) plus the GPU's gap between kernels, with the Megatron
all-reduces where the split needs them (steps.py lays them out, every decode context at
once). How the kernels are issued sets the step's time:

  eager   the host issues the op's kernels (eager.py: several per op, and the dynamic KV
          cache's copies) after those before, `host_op_s` each, while the GPU runs what it
          already has: op i ends at max(issued_i, end_{i-1}) + t_i. At batch 1 a decode
          step's kernels are shorter than their issue, so the step is launch-bound.
  graph   one launch per step (`host_op_s`), then one kernel per op, back to back.
"""

from dataclasses import dataclass, field

import numpy as np

from archipelago.estimate.generation import GenerationTiming
from archipelago.estimate.workload import Generation
from archipelago.memo import by_content
from archipelago.models.graph import Phase
from archipelago.models.spec import ModelSpec
from archipelago.models.weights import parameter_count
from archipelago.strategies.gpu.plan import FP16_BYTES, GPUConfig, GPUPlan
from archipelago.strategies.gpu.roofline import op_cost
from archipelago.strategies.gpu.steps import Step, plan_layout, step_kernels


@dataclass
class GPUEstimate(GenerationTiming):
    decode_bytes_per_token: float  # at the mean context, all GPUs together
    decode_flops_per_token: float
    bandwidth_efficiency: float  # of the datasheet bandwidth of all GPUs
    compute_efficiency: float  # of the datasheet FP16 tensor peak of all GPUs
    memory_bytes: float  # held on each GPU: its weight share and its KV caches
    batch: int = 1
    reasons: list[str] = field(default_factory=list)


def _in_turn(rows: np.ndarray) -> np.ndarray:
    """The rows' sum, added one row after another as the kernels ran. numpy adds whole
    rows in turn when the columns are the fast axis (it sums pairwise only along the fast
    axis: numpy.sum's notes); a single column is the fast axis, so it takes a running sum."""
    return np.add.reduce(rows, axis=0) if rows.shape[1] > 1 else np.cumsum(rows, axis=0)[-1]


def step_s(config: GPUConfig, step: Step) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The step's wall time (per context) and how it divides among the parts: each kernel
    is charged the time from the previous kernel's end to its own (module docstring). The
    kernels run in sequence down axis 0, every context at once along axis 1; the working
    arrays are reused in place (a fresh (kernels x contexts) array costs more to fault in
    than the arithmetic on it)."""
    work = step.seconds + (config.kernel_gap_s * step.issued)[:, None]  # t (kernels, contexts)
    ends = np.cumsum(work, axis=0)  # back to back
    if config.graph:
        ends += config.host_op_s
    else:
        issued = config.host_op_s * np.cumsum(step.issued)
        slack = np.subtract(ends, work, out=work)  # S_{k-1}, the start back to back
        np.subtract(issued[:, None], slack, out=slack)  # issue_k - S_{k-1}
        np.maximum.accumulate(slack, axis=0, out=slack)
        ends += np.maximum(slack, 0.0, out=slack)
    charged = work
    charged[0] = ends[0]
    np.subtract(ends[1:], ends[:-1], out=charged[1:])
    parts = {name: _in_turn(charged[kernels]) for name, kernels in step.parts.items()}
    return ends[-1], parts


# The weights are a pure function of the spec's fields: summed once per model, not per plan.
@by_content(maxsize=64)
def _weight_bytes(spec: ModelSpec) -> int:
    return parameter_count(spec) * FP16_BYTES


def held_bytes(plan: GPUPlan, work: Generation) -> float:
    """One GPU's weight share and its sequences' KV caches at the full length."""
    cache = work.batch * plan.graph.kv_cache_bytes(work.total_tokens, FP16_BYTES)
    return float((_weight_bytes(plan.spec) + cache) / plan.ranks)


def _bytes_flops(plan: GPUPlan, context: int, batch: int) -> tuple[float, float]:
    """All GPUs' bytes and FLOPs of one decode step at `context`: each distinct op costed
    once, then added up op after op in step order (a running sum: the order the figures
    have always been summed in)."""
    phase, lay = Phase(1, context), plan_layout(plan)
    costs = [op_cost(op, plan.spec, phase, batch, plan.ranks, plan.config.expert_skew)
             for op, _ in lay.ops]
    moved = np.array([float(c.bytes) for c in costs])[lay.op_order] * plan.ranks
    flops = np.array([float(c.flops) for c in costs])[lay.op_order] * plan.ranks
    return float(np.cumsum(moved)[-1]), float(np.cumsum(flops)[-1])


def estimate(plan: GPUPlan, work: Generation) -> GPUEstimate:
    batch = work.batch
    prefill = Phase(work.input_tokens, work.input_tokens)
    pre, pre_parts = step_s(plan.config, step_kernels(plan, prefill, batch))
    contexts = np.arange(work.input_tokens + 1, work.total_tokens)
    breakdown = {k: float(v.sum()) for k, v in pre_parts.items()}
    if len(contexts):
        dec, dec_parts = step_s(plan.config, step_kernels(plan, Phase(1, contexts), batch))
        for k, v in dec_parts.items():
            breakdown[k] = breakdown.get(k, 0.0) + float(v.sum())
    else:
        dec = np.zeros(1)
    decode_total = float(dec.sum()) if len(contexts) else 0.0
    latency = float(pre[0]) + decode_total
    per_token = decode_total / len(contexts) if len(contexts) else 0.0
    mean_ctx = round(float(contexts.mean())) if len(contexts) else work.input_tokens
    moved, flops = _bytes_flops(plan, mean_ctx, batch)
    seconds = per_token or float(pre[0])
    dev, ranks = plan.device, plan.ranks
    assert dev.peak_fp16_flops is not None
    held = held_bytes(plan, work)
    reasons = []
    if held > plan.capacity_bytes:
        reasons.append(f"rank 0 ({dev.key}): weights and KV caches need {held / 1e9:,.2f} GB of "
                       f"{plan.capacity_bytes / 1e9:,.2f} GB "
                       f"({100 * held / plan.capacity_bytes:.0f}%)")
    return GPUEstimate(
        latency_s=latency, tokens_per_s=batch * work.output_tokens / latency,
        prefill_s=float(pre[0]), decode_s_per_token=per_token,
        decode_s_first=float(dec[0]), decode_s_last=float(dec[-1]),
        breakdown_s=breakdown, decode_bytes_per_token=moved, decode_flops_per_token=flops,
        bandwidth_efficiency=moved / seconds / (ranks * plan.memory_Bps),
        compute_efficiency=flops / seconds / (ranks * dev.peak_fp16_flops),
        memory_bytes=held, feasible=not reasons, batch=batch, reasons=reasons)
