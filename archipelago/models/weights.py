"""Every parameter tensor of a model, named by role.

This single list is what parameter counts, strategies' shards and the emulator's weight
loading all read, so they can never disagree about what a model contains. Matrices are
stored as (in_features, out_features): the layout the FPGA designs stream.
"""

from collections.abc import Iterator
from dataclasses import dataclass
from math import prod

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

    @property
    def numel(self) -> int:
        return prod(self.shape)


def _norm(role: str, spec: ModelSpec, layer: int | None) -> Iterator[WeightTensor]:
    yield WeightTensor(f"{role}.weight", (spec.hidden,), layer)
    if spec.norm == "layernorm":
        yield WeightTensor(f"{role}.bias", (spec.hidden,), layer)


def _linear(
    role: str, fan_in: int, fan_out: int, bias: bool, layer: int | None
) -> Iterator[WeightTensor]:
    yield WeightTensor(f"{role}.weight", (fan_in, fan_out), layer)
    if bias:
        yield WeightTensor(f"{role}.bias", (fan_out,), layer)


def layer_weights(spec: ModelSpec, layer: int) -> Iterator[WeightTensor]:
    """The tensors of one transformer block; pre- and post-norm blocks hold the same ones."""
    h, kv = spec.hidden, spec.kv_dim
    yield from _norm("attn_norm", spec, layer)
    yield from _linear("q", h, h, spec.attn_bias, layer)
    yield from _linear("k", h, kv, spec.attn_bias, layer)
    yield from _linear("v", h, kv, spec.attn_bias, layer)
    yield from _linear("attn_out", h, h, spec.attn_bias, layer)
    yield from _norm("ffn_norm", spec, layer)
    if spec.gated_ffn:
        yield from _linear("ffn_gate", h, spec.ffn, spec.mlp_bias, layer)
    yield from _linear("ffn_up", h, spec.ffn, spec.mlp_bias, layer)
    yield from _linear("ffn_down", spec.ffn, h, spec.mlp_bias, layer)


def embedding_weights(spec: ModelSpec) -> Iterator[WeightTensor]:
    width = spec.embed_proj_dim or spec.hidden
    yield WeightTensor("embed_tokens.weight", (spec.vocab, width))
    if spec.learned_positions:
        rows = spec.max_positions + spec.position_offset
        if spec.arch in {"roberta", "ibert"}:
            rows = spec.max_positions  # RoBERTa's padding offset is inside max_positions
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


def all_weights(spec: ModelSpec) -> list[WeightTensor]:
    tensors = list(embedding_weights(spec))
    for layer in range(spec.layers):
        tensors.extend(layer_weights(spec, layer))
    tensors.extend(output_weights(spec))
    return tensors


def parameter_count(spec: ModelSpec) -> int:
    """Unique parameters (a tied LM head counts once, as `model.parameters()` does)."""
    return sum(t.numel for t in all_weights(spec))
