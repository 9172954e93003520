"""FLOPs and bytes of one op on the busiest of N tensor-parallel GPUs, and its roofline time.

Megatron's split (plan.py): matrices, attention heads, the FFN's activation and the LM
head's vocabulary are divided by N; norms, residuals and the embedding lookup run whole on
every GPU. Bytes are what the op's kernel moves through device memory: its weights once
(shared by every sequence and token of the step; of a mixture's experts, those the step's
tokens route to, `Op.read_scale`), the KV cache it attends (each sequence's own), and its
activations in and out: weights and KV cache in the plan's number format (formats.py),
activations FP16. `op_s` times the op as one kernel (kernel_time.py): the grid it launches
sets the bandwidth it draws and the waves its tensor tiles run in.
"""

from dataclasses import dataclass

import numpy as np

from archipelago.models.graph_ops import Op, Phase
from archipelago.models.spec import ModelSpec
from archipelago.strategies.gpu.formats import FORMATS, Format
from archipelago.strategies.gpu.kernel_time import (
    ELEMENTS_PER_BLOCK,
    TENSOR_EFFICIENCY,
    GPUCore,
    gemm_blocks,
    gemm_s,
    kernel_s,
    spread_s,
)

ACTIVATION_BYTES = 2  # FP16 rows in and out of every op, whatever the weights' format
FP16 = FORMATS["fp16"]
# FlashAttention-2 launches one block per (sequence, head, 128-query tile) (Dao 2023,
# arXiv:2307.08691 §3.2: parallel over batch, heads and the sequence's query blocks).
ATTENTION_QUERY_TILE = 128
# Flash-Decoding (Dao, Haziza, Massa, Sizov, "Flash-Decoding for long-context inference",
# 2023; TensorRT-LLM's and vLLM's decode attention) also splits the keys into chunks, run in
# parallel and reduced after, until the blocks cover the SMs; a chunk is at least one
# 128-key tile.
SPLIT_KV_KEYS = 128

_SPLIT = frozenset({"linear", "lm_head", "attn_score", "softmax", "attn_context",
                    "activation", "gated_activation"})
_REPLICATED_WEIGHTS = frozenset({"router", "shared_scale"})  # tiny; whole on every GPU


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


def op_cost(op: Op, spec: ModelSpec, phase: Phase, batch: int, ranks: int,
            fmt: Format = FP16, skew: float = 0.0) -> OpCost:
    """`batch` sequences each run `phase` through `op` on one of `ranks` GPUs, weights in
    format `fmt`; a mixture's experts routed with skew `skew` (GPUConfig.expert_skew)."""
    share = _ranks_of(op, ranks)
    n = phase.new_tokens
    flops = batch * op.flops(phase) / share
    if op.kind in {"linear", "lm_head"}:
        weights = op.fan_in * op.fan_out / share * fmt.weight_bytes
        if op.routed is not None:  # the distinct experts of the step's tokens
            weights *= op.read_scale(batch * n, skew)
        moved = weights + batch * n * (op.fan_in + op.fan_out / share) * ACTIVATION_BYTES
    elif op.kind in {"attn_score", "attn_context"}:
        keys = np.minimum(phase.context, op.window or phase.context)
        cache = spec.kv_values_per_token() / 2  # K for the scores, V for the context
        moved = batch * (keys * cache * fmt.kv_bytes
                         + n * spec.q_dim * ACTIVATION_BYTES) / share
    elif op.kind == "softmax":  # fused: the scores never leave the SM (FlashAttention)
        moved = 0.0
    else:  # element-wise: every input and the output
        moved = batch * n * op.fan_out * (len(op.inputs) + 1) / share * ACTIVATION_BYTES
    return OpCost(op, flops, moved)


def op_s(cost: OpCost, phase: Phase, batch: int, ranks: int, fmt: Format,
         core: GPUCore, split_kv: bool = False) -> float | np.ndarray:
    """The op as one kernel on one GPU, its floor left to the caller (kernel_time.py):
    a product's tiles (split along K for a skinny one) and its dequantization on the CUDA
    cores, an attention's blocks per sequence, head and query tile (and, `split_kv`, key
    chunk: Flash-Decoding), an element-wise op's blocks of values."""
    op, n = cost.op, phase.new_tokens
    share = _ranks_of(op, ranks)
    if op.kind in {"linear", "lm_head"}:
        m, cols = batch * n, op.fan_out / share
        blocks = gemm_blocks(m, cols, op.fan_in, core.sms)
        dequant = spread_s(op.fan_in * cols * fmt.dequant_ops, blocks, core.cuda_core_flops,
                           core.sms)
        compute = np.maximum(gemm_s(m, cols, op.fan_in, core), dequant)
    elif op.kind in {"attn_score", "attn_context", "softmax"}:
        blocks = batch * op.heads / share * -(-n // ATTENTION_QUERY_TILE)
        if split_kv:
            keys = np.minimum(phase.context, op.window or phase.context)
            blocks = blocks * np.maximum(1, np.minimum(np.ceil(core.sms / blocks),
                                                       np.ceil(keys / SPLIT_KV_KEYS)))
        rate = (TENSOR_EFFICIENCY * core.tensor_ops_per_s if op.kind != "softmax"
                else core.cuda_core_flops)
        compute = spread_s(cost.flops, blocks, rate, core.sms)
    else:
        blocks = -(-batch * n * op.fan_out // (share * ELEMENTS_PER_BLOCK))
        compute = spread_s(cost.flops, blocks, core.cuda_core_flops, core.sms)
    return kernel_s(cost.bytes, blocks, compute, core)
