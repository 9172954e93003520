"""A generation on GPUs: the prompt as one matrix pass, then one step per further token.

Each step is the model graph's ops in order (plan.py's split), every op a kernel timed on
the GPU (roofline.op_s: its stream, its tiles) plus a floor per kernel launched, with the
Megatron all-reduces where the split needs them (steps.py lays them out, every decode
context at once). How the kernels are issued sets the step's time (frameworks.py):

  issued  the host issues the op's kernels (eager.py: several per op under transformers,
          and the dynamic KV cache's copies) after those before, `host_op_s` each, while
          the GPU runs what it already has: op i ends at max(issued_i, end_{i-1}) + t_i.
          At batch 1 a decode step's kernels are shorter than their issue: launch-bound.
          Every eager step, and a graph row's prompt, run so.
  captured a graph row's decode step: one launch (`host_op_s`), then one kernel per op,
          back to back.

An eager framework adds its loop's own work per generated token (`token_s`) and per call
(`call_s`, before the prompt).
"""

from dataclasses import dataclass, field

import numpy as np

from archipelago.estimate.generation import GenerationTiming
from archipelago.estimate.workload import Generation
from archipelago.memo import by_content
from archipelago.models.graph_ops import Phase
from archipelago.models.spec import ModelSpec
from archipelago.models.weights import parameter_count
from archipelago.strategies.gpu.plan import GPUConfig, GPUPlan
from archipelago.strategies.gpu.roofline import op_cost
from archipelago.strategies.gpu.steps import Step, plan_layout, step_kernels

FRAMEWORK = "framework loop (per token and call)"


@dataclass
class GPUEstimate(GenerationTiming):
    decode_bytes_per_token: float  # at the mean context, all GPUs together
    decode_flops_per_token: float
    bandwidth_efficiency: float  # of the datasheet bandwidth of all GPUs
    compute_efficiency: float  # of the datasheet tensor peak of all GPUs in the format
    memory_bytes: float  # held on each GPU: its weight share and its KV caches
    batch: int = 1
    reasons: list[str] = field(default_factory=list)


def _in_turn(rows: np.ndarray) -> np.ndarray:
    """The rows' sum, added one row after another as the kernels ran. numpy adds whole
    rows in turn when the columns are the fast axis (it sums pairwise only along the fast
    axis: numpy.sum's notes); a single column is the fast axis, so it takes a running sum."""
    return np.add.reduce(rows, axis=0) if rows.shape[1] > 1 else np.cumsum(rows, axis=0)[-1]


def step_s(config: GPUConfig, step: Step, captured: bool
           ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The step's wall time (per context) and how it divides among the parts: each kernel
    is charged the time from the previous kernel's end to its own (module docstring); a
    `captured` step is one graph launch, any other is issued kernel by kernel. The
    kernels run in sequence down axis 0, every context at once along axis 1; the working
    arrays are reused in place (a fresh (kernels x contexts) array costs more to fault in
    than the arithmetic on it)."""
    work = step.seconds + (config.kernel_floor_s * step.issued)[:, None]  # (kernels, contexts)
    ends = np.cumsum(work, axis=0)  # back to back
    if captured:
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


# The weights are a pure function of the spec's fields: counted once per model, not per plan.
@by_content(maxsize=64)
def _parameters(spec: ModelSpec) -> int:
    return parameter_count(spec)


def held_bytes(plan: GPUPlan, work: Generation) -> float:
    """One GPU's weight share and its sequences' KV caches at the full length, in the
    plan's format."""
    fmt = plan.format
    cache = work.batch * plan.graph.kv_cache_bytes(work.total_tokens, fmt.kv_bytes)
    return float((_parameters(plan.spec) * fmt.weight_bytes + cache) / plan.ranks)


def _bytes_flops(plan: GPUPlan, context: int, batch: int) -> tuple[float, float]:
    """All GPUs' bytes and FLOPs of one decode step at `context`: each distinct op costed
    once, then added up op after op in step order (a running sum: the order the figures
    have always been summed in)."""
    phase, lay = Phase(1, context), plan_layout(plan)
    costs = [op_cost(op, plan.spec, phase, batch, plan.ranks, plan.format, plan.config.expert_skew)
             for op, _ in lay.ops]
    moved = np.array([float(c.bytes) for c in costs])[lay.op_order] * plan.ranks
    flops = np.array([float(c.flops) for c in costs])[lay.op_order] * plan.ranks
    return float(np.cumsum(moved)[-1]), float(np.cumsum(flops)[-1])


def estimate(plan: GPUPlan, work: Generation) -> GPUEstimate:
    batch, cfg = work.batch, plan.config
    prefill = Phase(work.input_tokens, work.input_tokens)
    pre, pre_parts = step_s(cfg, step_kernels(plan, prefill, batch), False)
    pre = pre + cfg.call_s + cfg.token_s
    contexts = np.arange(work.input_tokens + 1, work.total_tokens)
    breakdown = {k: float(v.sum()) for k, v in pre_parts.items()}
    if len(contexts):
        dec, dec_parts = step_s(cfg, step_kernels(plan, Phase(1, contexts), batch), cfg.graph)
        dec = dec + cfg.token_s
        for k, v in dec_parts.items():
            breakdown[k] = breakdown.get(k, 0.0) + float(v.sum())
    else:
        dec = np.zeros(1)
    if cfg.call_s or cfg.token_s:
        breakdown[FRAMEWORK] = cfg.call_s + cfg.token_s * (1 + len(contexts))
    decode_total = float(dec.sum()) if len(contexts) else 0.0
    latency = float(pre[0]) + decode_total
    per_token = decode_total / len(contexts) if len(contexts) else 0.0
    mean_ctx = round(float(contexts.mean())) if len(contexts) else work.input_tokens
    moved, flops = _bytes_flops(plan, mean_ctx, batch)
    seconds = per_token or float(pre[0])
    dev, ranks = plan.device, plan.ranks
    held = held_bytes(plan, work)
    reasons = []
    if held > plan.capacity_bytes:
        reasons.append(f"rank 0 ({dev.key}): weights and KV caches in {plan.format.name} "
                       f"need {held / 1e9:,.2f} GB of "
                       f"{plan.capacity_bytes / 1e9:,.2f} GB "
                       f"({100 * held / plan.capacity_bytes:.0f}%)")
    return GPUEstimate(
        latency_s=latency, tokens_per_s=batch * work.output_tokens / latency,
        prefill_s=float(pre[0]), decode_s_per_token=per_token,
        decode_s_first=float(dec[0]), decode_s_last=float(dec[-1]),
        breakdown_s=breakdown, decode_bytes_per_token=moved, decode_flops_per_token=flops,
        bandwidth_efficiency=moved / seconds / (ranks * plan.memory_Bps),
        compute_efficiency=flops / seconds / (ranks * plan.tensor_ops_per_s),
        memory_bytes=held, feasible=not reasons, batch=batch, reasons=reasons)
