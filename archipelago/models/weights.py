"""Every parameter tensor of a model, named by role.

This single list is what parameter counts, strategies' shards and the emulator's weight
loading all read, so they can never disagree about what a model contains. Matrices are
stored as (in_features, out_features): the layout the FPGA designs stream.
"""

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from math import prod

from archipelago.memo import by_content
from archipelago.models.model_families import get_model_family
from archipelago.models.spec import ModelSpec


@dataclass(frozen=True)
class WeightTensor:
    """One parameter: `role` is the same in every layer (e.g. 'q.weight'), `layer` says which."""

    role: str
    shape: tuple[int, ...]
    layer: int | None = None

    @property
    def name(self) -> str:
        return self.role if self.layer is None else f"layers.{self.layer}.{self.role}"

    @cached_property  # the shape is frozen; plans count the cached template's tensors often
    def numel(self) -> int:
        return prod(self.shape)


def _norm(role: str, spec: ModelSpec, layer: int | None, width: int | None = None,
          bias: bool | None = None) -> Iterator[WeightTensor]:
    """A norm over `width` (the hidden size unless given): a weight, and a bias for a
    LayerNorm that has one; nothing for OLMo's parameter-free LayerNorm."""
    width = width or spec.hidden
    if not spec.norm_affine:
        return
    yield WeightTensor(f"{role}.weight", (width,), layer)
    if (spec.norm == "layernorm" and spec.norm_bias) if bias is None else bias:
        yield WeightTensor(f"{role}.bias", (width,), layer)


def _linear(
    role: str, fan_in: int, fan_out: int, bias: bool, layer: int | None
) -> Iterator[WeightTensor]:
    yield WeightTensor(f"{role}.weight", (fan_in, fan_out), layer)
    if bias:
        yield WeightTensor(f"{role}.bias", (fan_out,), layer)


def block_norm_roles(spec: ModelSpec) -> tuple[str, ...]:
    """The hidden-width norms of one block, in the order they run: before each sublayer
    (pre-norm; one shared by a parallel block), after each (OLMo-2) or both (Gemma-2)."""
    before = ("attn_norm",) if spec.parallel_block and spec.shared_block_norm \
        else ("attn_norm", "ffn_norm")
    after = ("attn_post_norm", "ffn_post_norm")
    return {"input": before, "output": after, "both": (*before, *after)}[spec.sublayer_norms]


def _attention_weights(spec: ModelSpec, layer: int) -> Iterator[WeightTensor]:
    h, kv, q = spec.hidden, spec.kv_dim, spec.q_dim
    if spec.mla:  # DeepSeek-V3: only the down projections and the output carry attention_bias
        m = spec.mla
        if m.q_rank:
            yield from _linear("q_a", h, m.q_rank, spec.attn_bias, layer)
            yield from _norm("q_a_norm", spec, layer, m.q_rank)
            yield from _linear("q_b", m.q_rank, spec.heads * m.qk_dim, False, layer)
        else:
            yield from _linear("q", h, spec.heads * m.qk_dim, False, layer)
        yield from _linear("kv_a", h, m.kv_rank + m.rope_dim, spec.attn_bias, layer)
        yield from _norm("kv_a_norm", spec, layer, m.kv_rank)
        yield from _linear("kv_b", m.kv_rank, spec.heads * (m.nope_dim + m.v_dim), False, layer)
        yield from _linear("attn_out", spec.heads * m.v_dim, h, spec.out_bias, layer)
        return
    yield from _linear("q", h, q, spec.attn_bias, layer)
    yield from _linear("k", h, kv, spec.attn_bias, layer)
    yield from _linear("v", h, kv, spec.attn_bias, layer)
    if spec.qk_norm != "none":
        per_head = spec.qk_norm == "head"
        yield from _norm("q_norm", spec, layer, spec.head_dim if per_head else q,
                         spec.qk_norm_bias)
        yield from _norm("k_norm", spec, layer, spec.head_dim if per_head else kv,
                         spec.qk_norm_bias)
    yield from _linear("attn_out", q, h, spec.out_bias, layer)


def _ffn_weights(spec: ModelSpec, layer: int) -> Iterator[WeightTensor]:
    """A dense FFN, or an MoE layer: the router and every expert (all are held, whichever a
    token routes to), stacked as (experts, in, out), then the shared experts."""
    h, moe = spec.hidden, spec.moe
    if moe is None or not spec.is_moe_layer(layer):
        if spec.gated_ffn:
            yield from _linear("ffn_gate", h, spec.ffn, spec.mlp_bias, layer)
        yield from _linear("ffn_up", h, spec.ffn, spec.mlp_bias, layer)
        yield from _linear("ffn_down", spec.ffn, h, spec.mlp_bias, layer)
        return
    yield from _linear("router", h, moe.experts, False, layer)
    e, f = moe.experts, moe.expert_ffn
    yield WeightTensor("experts_gate.weight", (e, h, f), layer)
    yield WeightTensor("experts_up.weight", (e, h, f), layer)
    yield WeightTensor("experts_down.weight", (e, f, h), layer)
    if moe.shared_ffn:
        yield from _linear("shared_gate", h, moe.shared_ffn, False, layer)
        yield from _linear("shared_up", h, moe.shared_ffn, False, layer)
        yield from _linear("shared_down", moe.shared_ffn, h, False, layer)
    if moe.shared_gate:
        yield from _linear("shared_scale", h, 1, False, layer)


def layer_weights(spec: ModelSpec, layer: int) -> Iterator[WeightTensor]:
    """The tensors of one transformer block; pre- and post-norm blocks hold the same ones."""
    roles = block_norm_roles(spec)
    yield from _norm(roles[0], spec, layer)
    yield from _attention_weights(spec, layer)
    for role in roles[1:]:
        yield from _norm(role, spec, layer)
    yield from _ffn_weights(spec, layer)


def embedding_weights(spec: ModelSpec) -> Iterator[WeightTensor]:
    width = spec.embed_proj_dim or spec.hidden
    yield WeightTensor("embed_tokens.weight", (spec.vocab, width))
    if spec.learned_positions:
        inside = get_model_family(spec.arch).offset_in_positions
        rows = spec.max_positions + (0 if inside else spec.position_offset)
        yield WeightTensor("embed_positions.weight", (rows, spec.hidden))
    if spec.type_vocab:
        yield WeightTensor("embed_types.weight", (spec.type_vocab, spec.hidden))
    if spec.embedding_norm:
        yield from _norm("embed_norm", spec, None)
    if spec.embed_proj_dim:
        yield from _linear("project_in", spec.embed_proj_dim, spec.hidden, False, None)


def output_weights(spec: ModelSpec) -> Iterator[WeightTensor]:
    """Final norm and, for decoders, the LM head (absent when tied to the token embedding)."""
    if spec.final_norm:
        yield from _norm("final_norm", spec, None)
    if spec.embed_proj_dim:
        yield from _linear("project_out", spec.hidden, spec.embed_proj_dim, False, None)
    if spec.is_decoder and not spec.tied_embeddings:
        yield WeightTensor("lm_head.weight", (spec.embed_proj_dim or spec.hidden, spec.vocab))
    if spec.lm_head_bias:
        yield WeightTensor("lm_head.bias", (spec.vocab,))


# Frozen tensors in tuples, a pure function of the spec's fields.
@by_content(maxsize=64)
def template_weights(spec: ModelSpec) -> tuple[tuple[WeightTensor, ...],
                                               tuple[WeightTensor, ...]]:
    """Layer 0's tensors (the template of plans that give every layer one block's shards)
    and the tensors outside the layers (embeddings, then output)."""
    return tuple(layer_weights(spec, 0)), (*embedding_weights(spec), *output_weights(spec))


def all_weights(spec: ModelSpec) -> list[WeightTensor]:
    tensors = list(embedding_weights(spec))
    for layer in range(spec.layers):
        tensors.extend(layer_weights(spec, layer))
    tensors.extend(output_weights(spec))
    return tensors


def parameter_count(spec: ModelSpec) -> int:
    """Unique parameters (a tied LM head counts once, as `model.parameters()` does)."""
    return sum(t.numel for t in all_weights(spec))
