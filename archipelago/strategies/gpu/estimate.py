"""A generation on GPUs: the prompt as one matrix pass, then one step per further token.

Each step is the model graph's ops in order (plan.py's split), every op one kernel timed by
its roofline (roofline.py) plus the GPU's gap between kernels, with the Megatron
all-reduces where the split needs them. How the kernels are issued sets the step's time:

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
from archipelago.models.graph import Op, Phase
from archipelago.models.weights import embedding_weights, layer_weights, output_weights
from archipelago.strategies.gpu.eager import cache_copy_bytes
from archipelago.strategies.gpu.eager import kernels as eager_kernels
from archipelago.strategies.gpu.plan import FP16_BYTES, GPUPlan, ring_s
from archipelago.strategies.gpu.roofline import op_cost

# Megatron all-reduces the partial sums of the row-split matrices (§3: "g" after the
# attention's output projection and the MLP's second matrix) and the vocabulary-split
# embedding lookup; the vocabulary-split logits are all-gathered.
_ALLREDUCE_AFTER = frozenset({"attn_out", "ffn_down"})
_PART = {"linear": "matrices", "lm_head": "matrices", "attn_score": "attention",
         "softmax": "attention", "attn_context": "attention", "norm": "norms and residuals",
         "residual": "norms and residuals", "activation": "activations",
         "gated_activation": "activations", "embedding": "embedding"}
COLLECTIVE = "all-reduce / gather"


@dataclass(frozen=True)
class Kernel:
    """One op's kernels in a step: its part of the breakdown, their GPU time (per
    context) and how many the host issues."""

    part: str
    seconds: float | np.ndarray
    issued: int = 1


@dataclass
class GPUEstimate(GenerationTiming):
    decode_bytes_per_token: float  # at the mean context, all GPUs together
    decode_flops_per_token: float
    bandwidth_efficiency: float  # of the datasheet bandwidth of all GPUs
    compute_efficiency: float  # of the datasheet FP16 tensor peak of all GPUs
    memory_bytes: float  # held on each GPU: its weight share and its KV caches
    batch: int = 1
    reasons: list[str] = field(default_factory=list)


def ops_in_order(plan: GPUPlan) -> list[tuple[Op, bool]]:
    """The step's ops in order, each with whether it is an output op (last token only)."""
    g = plan.graph
    blocks = g.variants or ((g.block, tuple(range(plan.spec.layers))),)
    by_layer = sorted((layer, ops) for ops, ids in blocks for layer in ids)
    return ([(op, False) for op in g.embed]
            + [(op, False) for _, ops in by_layer for op in ops]
            + [(op, True) for op in g.output])


def kernels(plan: GPUPlan, phase: Phase, batch: int) -> list[Kernel]:
    """Every kernel of one step of `batch` sequences through `phase`, in issue order."""
    spec, ranks, dev = plan.spec, plan.ranks, plan.device
    assert dev.peak_fp16_flops is not None  # the planner checks it
    bandwidth = plan.memory_Bps * plan.config.memory_efficiency
    last = Phase(1, phase.context, phase.causal)
    rows = batch * phase.new_tokens
    out: list[Kernel] = []
    eager = not plan.config.graph
    for op, is_output in ops_in_order(plan):
        cost = op_cost(op, spec, last if is_output else phase, batch, ranks)
        seconds = cost.seconds(dev.peak_fp16_flops, bandwidth)
        if eager:
            seconds = seconds + cache_copy_bytes(op, spec, phase, batch, ranks) / bandwidth
        out.append(Kernel(_PART[op.kind], seconds, eager_kernels(op, spec) if eager else 1))
        if plan.link is None:
            continue
        if op.name in _ALLREDUCE_AFTER or op.kind == "embedding":
            nbytes = rows * spec.hidden * FP16_BYTES
            out.append(Kernel(COLLECTIVE, ring_s(plan.link, ranks, nbytes)))
        elif op.kind == "lm_head":  # every GPU's slice of the logits, gathered
            nbytes = batch * spec.vocab * FP16_BYTES
            out.append(Kernel(COLLECTIVE, ring_s(plan.link, ranks, nbytes, gather=True)))
    return out


def step_s(plan: GPUPlan, step: list[Kernel]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The step's wall time (per context) and how it divides among the parts: each kernel
    is charged the time from the previous kernel's end to its own (module docstring)."""
    cfg = plan.config
    t = np.array(np.broadcast_arrays(*(np.asarray(k.seconds, float) for k in step)))
    count = np.array([k.issued for k in step])
    t = np.atleast_2d(t.T if t.ndim == 2 else t) + cfg.kernel_gap_s * count  # (contexts, ops)
    done = np.cumsum(t, axis=1)
    if cfg.graph:
        ends = cfg.host_op_s + done
    else:
        issued = cfg.host_op_s * np.cumsum(count)
        slack = np.maximum.accumulate(issued - (done - t), axis=1)  # issue_k - S_{k-1}
        ends = done + np.maximum(slack, 0.0)
    charged = np.diff(ends, axis=1, prepend=0.0)
    parts: dict[str, np.ndarray] = {}
    for i, k in enumerate(step):
        parts[k.part] = parts.get(k.part, 0.0) + charged[:, i]
    return ends[:, -1], parts


def held_bytes(plan: GPUPlan, work: Generation) -> float:
    """One GPU's weight share and its sequences' KV caches at the full length."""
    spec = plan.spec
    tensors = [*embedding_weights(spec), *output_weights(spec)]
    tensors += [w for layer in range(spec.layers) for w in layer_weights(spec, layer)]
    weights = sum(w.numel for w in tensors) * FP16_BYTES
    cache = work.batch * plan.graph.kv_cache_bytes(work.total_tokens, FP16_BYTES)
    return float((weights + cache) / plan.ranks)


def _bytes_flops(plan: GPUPlan, context: int, batch: int) -> tuple[float, float]:
    """All GPUs' bytes and FLOPs of one decode step at `context`."""
    phase = Phase(1, context)
    moved = flops = 0.0
    for op, _ in ops_in_order(plan):
        cost = op_cost(op, plan.spec, phase, batch, plan.ranks)
        moved += float(cost.bytes) * plan.ranks
        flops += float(cost.flops) * plan.ranks
    return moved, flops


def estimate(plan: GPUPlan, work: Generation) -> GPUEstimate:
    batch = work.batch
    pre, pre_parts = step_s(plan, kernels(plan, Phase(work.input_tokens, work.input_tokens),
                                          batch))
    contexts = np.arange(work.input_tokens + 1, work.total_tokens)
    breakdown = {k: float(v.sum()) for k, v in pre_parts.items()}
    if len(contexts):
        dec, dec_parts = step_s(plan, kernels(plan, Phase(1, contexts), batch))
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
