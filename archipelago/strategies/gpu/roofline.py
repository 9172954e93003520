"""FLOPs and bytes of one op on the busiest of N tensor-parallel GPUs, and its roofline time.

Megatron's split (plan.py): matrices, attention heads, the FFN's activation and the LM
head's vocabulary are divided by N; norms, residuals and the embedding lookup run whole on
every GPU. Bytes are what the op's kernel moves through device memory: its weights once
(shared by every sequence and token of the step; of a mixture of experts, the distinct
experts the step's tokens route to, models/expert_routing.py), the KV cache it attends
(each sequence's own), and its activations in and out, all FP16.
"""

from dataclasses import dataclass

import numpy as np

from archipelago.models.expert_routing import expected_distinct_experts
from archipelago.models.graph import Op, Phase
from archipelago.models.spec import ModelSpec
from archipelago.strategies.gpu.plan import FP16_BYTES

_SPLIT = frozenset({"linear", "lm_head", "attn_score", "softmax", "attn_context",
                    "activation", "gated_activation"})
_REPLICATED_WEIGHTS = frozenset({"router", "shared_scale"})  # tiny; whole on every GPU
_EXPERTS = frozenset({"experts_gate", "experts_up", "experts_down"})


@dataclass(frozen=True)
class OpCost:
    """One op of one step on one GPU: `flops` and `bytes` (arrays when the phase's context
    is an array of lengths)."""

    op: Op
    flops: float | np.ndarray
    bytes: float | np.ndarray

    def seconds(self, peak_flops: float, memory_Bps: float) -> float | np.ndarray:
        """Roofline: the slower of the op's compute at peak and its traffic at bandwidth."""
        return np.maximum(self.flops / peak_flops, self.bytes / memory_Bps)


def _ranks_of(op: Op, ranks: int) -> int:
    return 1 if op.weight in _REPLICATED_WEIGHTS or op.kind not in _SPLIT else ranks


def _weight_elements(op: Op, spec: ModelSpec, tokens: int) -> float:
    """The elements of `op`'s weights a step of `tokens` tokens reads: the matrix, or of
    the experts' matrices (as wide as one token's routed and shared experts, graph.py) the
    distinct experts the tokens route to beside the shared ones."""
    if op.weight not in _EXPERTS or spec.moe is None:
        return float(op.fan_in * op.fan_out)
    moe = spec.moe
    width = expected_distinct_experts(moe.experts, moe.per_token, tokens) * moe.expert_ffn \
        + moe.shared_ffn
    return (op.fan_in if op.weight != "experts_down" else op.fan_out) * width


def op_cost(op: Op, spec: ModelSpec, phase: Phase, batch: int, ranks: int) -> OpCost:
    """`batch` sequences each run `phase` through `op` on one of `ranks` GPUs."""
    share = _ranks_of(op, ranks)
    n = phase.new_tokens
    flops = batch * op.flops(phase) / share
    if op.kind in {"linear", "lm_head"}:
        weights = _weight_elements(op, spec, batch * n) / share
        moved = weights + batch * n * (op.fan_in + op.fan_out / share)
    elif op.kind in {"attn_score", "attn_context"}:
        keys = np.minimum(phase.context, op.window or phase.context)
        cache = spec.kv_values_per_token() / 2  # K for the scores, V for the context
        moved = batch * (keys * cache + n * spec.q_dim) / share
    elif op.kind == "softmax":
        moved = 2 * batch * op.heads * phase.pairs_within(op.window) / share  # read, write
    else:  # element-wise: every input and the output
        moved = batch * n * op.fan_out * (len(op.inputs) + 1) / share
    return OpCost(op, flops, moved * FP16_BYTES)
