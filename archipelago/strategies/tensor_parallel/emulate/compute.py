"""Compute handlers, one per Op kind: each runs one ComputeStep on this rank's slice.

A handler gets the step, the outputs of the ops its Op names as inputs, and the rank's state,
and returns the op's local output, (tokens, features). Head counts come from the step
(`local_heads`), head width from the Op; a new scheme adds handlers here, not branches.
"""

import zlib
from collections.abc import Callable
from functools import partial

import torch
import torch.distributed as dist
import torch.nn.functional as F

from archipelago.strategies.tensor_parallel.emulate import latent
from archipelago.strategies.tensor_parallel.emulate.quant_shard import ABSMAX_REDUCE
from archipelago.strategies.tensor_parallel.emulate.rotary import rotary
from archipelago.strategies.tensor_parallel.emulate.routing import route, shared_down, shared_up
from archipelago.strategies.tensor_parallel.emulate.state import RankState
from archipelago.strategies.tensor_parallel.emulate.w8a8 import w8a8_linear
from archipelago.strategies.tensor_parallel.plan import ComputeStep

Handler = Callable[[ComputeStep, list[torch.Tensor], RankState], torch.Tensor]

# transformers' activation names (ACT2FN) for the functions the emulated models use.
ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "gelu_new": partial(F.gelu, approximate="tanh"),
    "gelu_pytorch_tanh": partial(F.gelu, approximate="tanh"),
    "gelu": F.gelu,
    "relu": F.relu,
    "silu": F.silu,
    "swish": F.silu,
}


def _split_heads(x: torch.Tensor, head_dim: int) -> torch.Tensor:
    """(tokens, heads * head_dim) -> (heads, tokens, head_dim)."""
    return x.view(x.shape[0], -1, head_dim).transpose(0, 1)


def _share(kv: torch.Tensor, heads: int) -> torch.Tensor:
    """Grouped-query attention: each key/value head serves heads // kv_heads query heads."""
    groups = heads // kv.shape[0]
    return kv if groups == 1 else kv.repeat_interleave(groups, dim=0)


def embedding(step: ComputeStep, inputs: list[torch.Tensor], rs: RankState) -> torch.Tensor:
    """Token rows, plus learned position rows when the model has them (OPT's start at 2);
    only this rank's columns when the plan keeps activations column-split."""
    (tokens,) = inputs
    x = rs.param(step.op, "weight")[tokens]
    positions = rs.weights.get("embed_positions.weight")
    if positions is not None:
        x = x + positions[rs.positions + rs.spec.position_offset]
    if step.local_out < x.shape[-1]:
        start, stop = rs.columns
        x = x[:, start:stop]
    return x


def norm(step: ComputeStep, inputs: list[torch.Tensor], rs: RankState) -> torch.Tensor:
    """A whole-row norm, or one stage of a norm over column-split rows (NORM_STAGES). It
    reads the first fan_in columns of its input: latent attention's kv_a_norm normalizes
    the latent, not the rotary key after it."""
    if step.stage != "whole":
        return NORM_STAGES[step.stage](step, inputs, rs)
    x = inputs[0][:, :step.op.fan_in]
    weight, eps = rs.param(step.op, "weight"), rs.numerics.norm_eps
    if rs.spec.norm == "layernorm":
        return F.layer_norm(x, x.shape[-1:], weight, rs.param(step.op, "bias"), eps)
    # A norm narrower than its input normalizes each head (Qwen3's q/k norms over head_dim).
    wide = x.float().view(len(x), -1, weight.shape[-1])  # RMS in fp32, as transformers does
    normed = (wide * torch.rsqrt(wide.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)
    return (weight * normed).view(x.shape)


def norm_stats(step: ComputeStep, inputs: list[torch.Tensor], rs: RankState) -> torch.Tensor:
    """Partial (sum, sum of squares) of each row over this rank's columns, in float64: the
    all-reduced totals then match a one-device sum to well below the output's precision, so
    split and unsplit runs normalize to the same values (seeds/002 §III-B, Fig. 5)."""
    (x,) = inputs
    wide = x.double()
    return torch.stack((wide.sum(-1), wide.pow(2).sum(-1)), dim=-1)


def norm_apply(step: ComputeStep, inputs: list[torch.Tensor], rs: RankState) -> torch.Tensor:
    """Normalize this rank's columns with the all-reduced row statistics and its slice of
    gamma (and beta)."""
    x, stats = inputs
    width, eps = step.op.fan_out, rs.numerics.norm_eps
    mean_square = stats[:, 1:2] / width
    if rs.spec.norm == "layernorm":
        mean = stats[:, 0:1] / width
        normed = (x.double() - mean) / torch.sqrt(mean_square - mean * mean + eps)
        return normed.to(x.dtype) * rs.param(step.op, "weight") + rs.param(step.op, "bias")
    return rs.param(step.op, "weight") * (x.double() / torch.sqrt(mean_square + eps)).to(x.dtype)


NORM_STAGES: dict[str, Handler] = {"stats": norm_stats, "apply": norm_apply}


def linear(step: ComputeStep, inputs: list[torch.Tensor], rs: RankState) -> torch.Tensor:
    """x @ W for this rank's (in, local_out) slice of W, plus its slice of the bias; in
    `--precision` w8a8 or w4a16 in that format (quantized_linear); in a W8A8 plan (LORA-Q)
    an int8 x int8 product with int32 accumulation (w8a8.w8a8_linear). An op
    of one block per head (latent attention absorbed) runs its own (latent.PER_HEAD)."""
    if step.op.heads:
        return latent.PER_HEAD[step.op.name](step, inputs, rs)
    name, bias = rs.param_name(step.op, "weight"), rs.param(step.op, "bias")
    if name in rs.quantized:
        y = quantized_linear(inputs[0], name, rs)
        return y if bias is None else y + bias
    if rs.weights[name].dim() == 3:  # a stack of experts' matrices
        return experts(step, inputs, rs)
    (x,) = inputs
    if rs.scales is not None:
        w_scale, x_scale = rs.scales[name]
        y, acc = w8a8_linear(x, rs.weights[name], w_scale, x_scale, bias)
        rs.integer_checksum = (rs.integer_checksum
                               + _digest(acc, rs, name, rs.column_offsets[name])) % 2 ** 64
        return y
    y = x @ rs.weights[name]
    return y if bias is None else y + bias


def quantized_linear(x: torch.Tensor, name: str, rs: RankState) -> torch.Tensor:
    """x @ W in the run's quantized format (quant_formats.py); a W8A8 slice of split input
    rows takes each token's maximum over every rank's part of the row. W8A8's INT32
    accumulators join the digest, which adds up over ranks to the unsplit one's."""
    matrix = rs.quantized[name]
    what = f"the token maxima of '{name}' (layer {rs.layer})"
    row_max = (partial(rs.exchange.all_reduce, kind=ABSMAX_REDUCE, what=what,
                       op=dist.ReduceOp.MAX) if matrix.rows_split else None)
    y, acc = matrix(x, row_max)
    if acc is not None:
        rs.integer_checksum = (rs.integer_checksum
                               + _digest(acc, rs, name, matrix.first_column)) % 2 ** 64
    return y


def experts(step: ComputeStep, inputs: list[torch.Tensor], rs: RankState) -> torch.Tensor:
    """This rank's columns of each token's routed experts, then of the shared experts. The
    up projections read the router's logits beside their input, route (routing.route),
    and lay each token's experts side by side (per_token x local columns), the shared
    experts' local columns after them; the down projection reads the all-gathered
    activations (rank-major: each rank's block holds its columns of every routed expert,
    then of the shared ones), runs each expert's rows, sums the experts weighted by the
    router and adds the shared experts' output."""
    weight = rs.weights[rs.param_name(step.op, "weight")]  # (experts, in, local out)
    if len(inputs) == 2:
        x, logits = inputs
        rs.routes = route(logits, rs)
        out = torch.einsum("ti,tkio->tko", x, weight[rs.routes[0]]).reshape(len(x), -1)
        return shared_up(step, x, out, rs)
    (act,) = inputs
    chosen, share = rs.routes
    tokens, per_token = chosen.shape
    blocks = act.view(tokens, rs.ranks, -1)
    routed = per_token * weight.shape[1] // rs.ranks
    act = blocks[..., :routed].reshape(tokens, rs.ranks, per_token, -1).transpose(1, 2)
    out = torch.einsum("tki,tkio->tko", act.reshape(tokens, per_token, -1), weight[chosen])
    summed = (out * share[..., None].to(out.dtype)).sum(dim=1)
    return shared_down(blocks[..., routed:].reshape(tokens, -1), summed, rs)


def _digest(acc: torch.Tensor, rs: RankState, name: str, first_column: int) -> int:
    """A position-weighted sum of int32 accumulators (mod 2^64), additive over ranks: the
    ranks' digests of their column slices add up to the digest of the unsplit product."""
    rows = rs.positions[:, None].long() + 1
    cols = torch.arange(first_column, first_column + acc.shape[1])[None, :] + 1
    weights = rows * 1_000_003 + cols * 7_919 + zlib.crc32(name.encode())
    return int((acc.long() * weights).sum()) % 2 ** 64


def attn_score(step: ComputeStep, inputs: list[torch.Tensor], rs: RankState) -> torch.Tensor:
    """Scaled causal scores of this rank's query heads against the cached keys of its key
    heads (grouped-query heads share a key head); keys join the cache here. In a
    sliding-window layer a query at position p sees keys p - window + 1 .. p (transformers'
    sliding_window_overlay) and the cache keeps the last `window` keys."""
    window = step.op.window
    if rs.spec.mla is not None:
        scores = latent.score(step, inputs, rs)
    else:
        q, k = (_split_heads(t, step.op.fan_in) for t in inputs)
        if rs.numerics.rope_theta is not None:
            q, k = rotary(q, rs), rotary(k, rs)
        keys = _share(rs.extend_cache(step.op.inputs[1], k, window), q.shape[0])
        scores = q @ keys.transpose(1, 2) * step.op.fan_in ** -0.5
    assert scores.shape[0] == step.local_heads, (step, tuple(scores.shape))
    keys_seen = scores.shape[-1]
    end = int(rs.positions[-1]) + 1  # the cache holds the positions just before `end`
    ahead = torch.arange(end - keys_seen, end)[None, :] - rs.positions[:, None]
    hidden = ahead > 0 if window is None else (ahead > 0) | (ahead <= -window)
    return scores.masked_fill(hidden, float("-inf"))


def softmax(step: ComputeStep, inputs: list[torch.Tensor], rs: RankState) -> torch.Tensor:
    (scores,) = inputs
    return torch.softmax(scores, dim=-1)


def attn_context(step: ComputeStep, inputs: list[torch.Tensor], rs: RankState) -> torch.Tensor:
    """Probabilities times cached values; heads concatenated back to (tokens, features)."""
    if rs.spec.mla is not None:
        return latent.context(step, inputs, rs)
    probs, v = inputs
    assert probs.shape[0] == step.local_heads, (step, tuple(probs.shape))
    values = _share(rs.extend_cache(step.op.inputs[1], _split_heads(v, step.op.fan_in),
                                     step.op.window), probs.shape[0])
    out = probs @ values
    return out.transpose(0, 1).reshape(out.shape[1], -1)


def activation(step: ComputeStep, inputs: list[torch.Tensor], rs: RankState) -> torch.Tensor:
    (x,) = inputs
    return ACTIVATIONS[rs.spec.activation](x)


def gated_activation(step: ComputeStep, inputs: list[torch.Tensor],
                     rs: RankState) -> torch.Tensor:
    gate, up = inputs
    return ACTIVATIONS[rs.spec.activation](gate) * up


def residual(step: ComputeStep, inputs: list[torch.Tensor], rs: RankState) -> torch.Tensor:
    a, b = inputs
    return a + b


def lm_head(step: ComputeStep, inputs: list[torch.Tensor], rs: RankState) -> torch.Tensor:
    """Logits of this rank's vocab slice; a tied head reads those rows of the token table."""
    (x,) = inputs
    weight = rs.param(step.op, "weight")
    if rs.spec.tied_embeddings:
        start, stop = rs.vocab_slice
        return x @ weight[start:stop].T
    return x @ weight


COMPUTE: dict[str, Handler] = {
    "embedding": embedding,
    "norm": norm,
    "linear": linear,
    "attn_score": attn_score,
    "softmax": softmax,
    "attn_context": attn_context,
    "activation": activation,
    "gated_activation": gated_activation,
    "residual": residual,
    "lm_head": lm_head,
}
