"""Multi-head latent attention on one rank's heads (DeepSeek-V2, arXiv 2405.04434, §2.1.2-
2.1.3; transformers' DeepseekV3Attention): the cache holds what the model stores, the
normalized latent and the rotated rotary key of each token (`ModelSpec.kv_values_per_token`),
whole on every rank. A prompt runs the expanded form (graph._latent_attention): kv_b takes
the latent to each local head's key and value, re-expanding any latent cached before the
pass as transformers' expand_kv does. A single new token runs the absorbed form
(graph._absorbed_attention): each head's query is taken into the latent space by its W_UK
block (`q_latent`), scored against the cached latents, and the probability-weighted latent
taken to v_dim by its W_UV block (`v_up`). Both blocks are column slices of kv_b: per head,
nope_dim key columns then v_dim value columns.
"""

import torch

from archipelago.strategies.tensor_parallel.emulate.rotary import rotary
from archipelago.strategies.tensor_parallel.emulate.state import RankState
from archipelago.strategies.tensor_parallel.plan import ComputeStep

LATENT, ROPE_KEY = "latent", "rope_key"  # this layer's caches


def _kv_b(rs: RankState) -> torch.Tensor:
    """This rank's kv_b columns, (kv_rank, local heads, nope_dim + v_dim)."""
    weight = rs.weights[f"layers.{rs.layer}.kv_b.weight"]
    mla = rs.spec.mla
    assert mla is not None
    return weight.view(weight.shape[0], -1, mla.nope_dim + mla.v_dim)


def _query(q: torch.Tensor, rs: RankState) -> tuple[torch.Tensor, torch.Tensor]:
    """(tokens, heads x qk_dim) -> the no-position part and the rotated part, each
    (heads, tokens, width)."""
    mla = rs.spec.mla
    assert mla is not None
    heads = q.view(q.shape[0], -1, mla.qk_dim).transpose(0, 1)
    return heads[..., :mla.nope_dim], rotary(heads[..., mla.nope_dim:], rs)


def _cached(latent: torch.Tensor, kv_a: torch.Tensor, rs: RankState
            ) -> tuple[torch.Tensor, torch.Tensor]:
    """The pass's latents and rotated rotary keys joined to the cache: all of them,
    (1, context, kv_rank) and (1, context, rope_dim)."""
    mla = rs.spec.mla
    assert mla is not None
    key = rotary(kv_a[None, :, mla.kv_rank:], rs)
    return rs.extend_cache(LATENT, latent[None]), rs.extend_cache(ROPE_KEY, key)


def _expanded(kv_b: torch.Tensor, rs: RankState) -> torch.Tensor:
    """Every cached token's keys and values on this rank's heads, (heads, context,
    nope_dim + v_dim): kv_b's output for the pass's tokens after the earlier latents
    expanded by this rank's kv_b columns."""
    latents = rs.cache[(rs.layer, LATENT)][0]
    earlier = latents[: len(latents) - len(kv_b)]
    weight = _kv_b(rs)
    new = kv_b.view(len(kv_b), weight.shape[1], -1)
    old = torch.einsum("ck,khw->chw", earlier, weight)
    return torch.cat((old, new)).transpose(0, 1)


def score(step: ComputeStep, inputs: list[torch.Tensor], rs: RankState) -> torch.Tensor:
    """Scaled scores of this rank's heads, (heads, tokens, context), before the mask:
    the expanded form's inputs are (query, kv_b, kv_a_norm, kv_a), the absorbed form's
    (q_latent, query, kv_a_norm, kv_a)."""
    mla = rs.spec.mla
    assert mla is not None
    a, b, latent, kv_a = inputs
    absorbed = step.op.inputs[0] == "q_latent"
    nope, q_rope = _query(b if absorbed else a, rs)
    latents, keys = _cached(latent, kv_a, rs)
    position = q_rope @ keys.transpose(1, 2)
    if absorbed:  # a: q_latent
        q_latent = a.view(len(a), -1, mla.kv_rank).transpose(0, 1)
        scores = q_latent @ latents.transpose(1, 2) + position
    else:  # b: kv_b
        k_nope = _expanded(b, rs)[..., :mla.nope_dim]
        scores = nope @ k_nope.transpose(1, 2) + position
    return scores * mla.qk_dim ** -0.5


def context(step: ComputeStep, inputs: list[torch.Tensor], rs: RankState) -> torch.Tensor:
    """Probabilities times the values (expanded: each head's v_dim from kv_b) or the
    latents (absorbed: kv_rank per head), heads side by side, (tokens, features)."""
    mla = rs.spec.mla
    assert mla is not None
    probs, source = inputs
    if step.op.inputs[1] == "kv_b":
        values = _expanded(source, rs)[..., mla.nope_dim:]
    else:
        values = rs.cache[(rs.layer, LATENT)]
    out = probs @ values
    return out.transpose(0, 1).reshape(out.shape[1], -1)


def q_latent(step: ComputeStep, inputs: list[torch.Tensor], rs: RankState) -> torch.Tensor:
    """Each head's no-position query through its W_UK block: (tokens, heads x kv_rank)."""
    mla = rs.spec.mla
    assert mla is not None
    (query,) = inputs
    heads = query.view(len(query), -1, mla.qk_dim)[..., :mla.nope_dim]
    out = torch.einsum("thn,khn->thk", heads, _kv_b(rs)[..., :mla.nope_dim])
    return out.reshape(len(query), -1)


def v_up(step: ComputeStep, inputs: list[torch.Tensor], rs: RankState) -> torch.Tensor:
    """Each head's weighted latent through its W_UV block: (tokens, heads x v_dim)."""
    mla = rs.spec.mla
    assert mla is not None
    (latent,) = inputs
    heads = latent.view(len(latent), -1, mla.kv_rank)
    out = torch.einsum("thk,khv->thv", heads, _kv_b(rs)[..., mla.nope_dim:])
    return out.reshape(len(latent), -1)


# The linear ops of one block per head (graph: `heads` set), by op name.
PER_HEAD = {"q_latent": q_latent, "v_up": v_up}
