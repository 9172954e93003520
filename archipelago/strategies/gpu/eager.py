"""What a framework running eagerly issues for one op of the model graph: transformers'
PyTorch modules launch one kernel per tensor operation, so one op of the graph is several
kernels, and its dynamic KV cache grows by copying.

Counted from transformers' modeling code (v4.40-4.46): LlamaRMSNorm.forward is to(fp32),
pow, mean, add eps, rsqrt, mul, to(fp16), mul by the weight: 8 kernels (nn.LayerNorm is 1);
apply_rotary_pos_emb is x*cos + rotate_half(x)*sin with rotate_half a neg and a cat: 5
kernels for each of q and k; NewGELUActivation ("gelu_new", GPT-2) is 0.5*x*(1 +
tanh(sqrt(2/pi)*(x + 0.044715*x^3))): 8 kernels (PyTorch's own activations are 1); a gated
FFN's act(gate)*up adds the mul. DynamicCache.update appends this step's keys and values
with torch.cat, one kernel each that reads the layer's cache and writes it again.
A captured graph (torch.compile) fuses each of those chains into one kernel per op, and
writes k's and v's new rows into its static cache in place, one more kernel each
(transformers' StaticCache.update and gpt-fast's KVCache.update: an index_copy_ per
tensor). Either way the attention is one fused kernel: transformers' default "sdpa"
attention calls torch's scaled_dot_product_attention (then makes its transposed output
contiguous, one copy kernel), a graph FlashAttention; the softmax and the context product
run inside the scores' kernel and launch none of their own.
"""

import numpy as np

from archipelago.models.graph_ops import Op, Phase
from archipelago.models.spec import ModelSpec

_RMSNORM_KERNELS = 8
_ROTARY_KERNELS = 5
_GELU_PYTHON_KERNELS = 8
_PYTHON_ACTIVATIONS = frozenset({"gelu_new", "gelu_fast", "gelu_python_tanh", "quick_gelu"})
FUSED_INTO_SCORES = frozenset({"softmax", "attn_context"})


def _rotary(spec: ModelSpec) -> bool:
    return not spec.learned_positions and not spec.alibi and spec.mla is None


def launches(op: Op, spec: ModelSpec, eager: bool) -> int:
    """Kernels launched for `op` in one step: an eager framework's (`kernels`), a captured
    graph's one per op and its static cache's write after k and v; none for the
    attention's parts fused into its scores' kernel."""
    if op.kind in FUSED_INTO_SCORES:
        return 0
    return kernels(op, spec) if eager else 1 + (op.name in ("k", "v"))


def kernels(op: Op, spec: ModelSpec) -> int:
    """Kernels an eager framework launches for `op` in one step (an attention's one SDPA
    kernel counted on its scores)."""
    if op.kind == "norm":
        return _RMSNORM_KERNELS if spec.norm == "rmsnorm" else 1
    if op.name in ("q", "k", "v"):  # the matrix, rotary on q and k, k's and v's appends
        rotary = _ROTARY_KERNELS if op.name != "v" and _rotary(spec) else 0
        return 1 + rotary + (op.name != "q")
    if op.kind in ("activation", "gated_activation"):
        act = _GELU_PYTHON_KERNELS if spec.activation in _PYTHON_ACTIVATIONS else 1
        return act + (op.kind == "gated_activation")
    if op.kind == "attn_score":  # scaled_dot_product_attention, its output made contiguous
        return 2
    return 1


def cache_copy_bytes(op: Op, spec: ModelSpec, phase: Phase, batch: int,
                     ranks: int, kv_bytes: float = 2) -> float | np.ndarray:
    """The bytes torch.cat moves appending to one GPU's K (op k) or V (op v) cache of
    `kv_bytes` a value: the cache before this step read, and the longer one written."""
    if op.name not in ("k", "v") or spec.mla is not None:
        return 0.0
    before = phase.context - phase.new_tokens
    return batch * (before + phase.context) * spec.kv_dim / ranks * kv_bytes
