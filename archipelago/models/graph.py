"""Operator graph of a transformer: one block template repeated `layers` times, plus the
embedding and output ops. Shapes are per token; a Phase supplies how many new tokens flow
through and how long the attended context is, so the same graph serves prefill, decode at
any context length, and encoder passes.
"""

from dataclasses import dataclass
from typing import Literal

import numpy as np

from archipelago.models.spec import ModelSpec

OpKind = Literal[
    "embedding", "norm", "linear", "attn_score", "softmax", "attn_context",
    "activation", "gated_activation", "residual", "lm_head",
]


@dataclass(frozen=True)
class Phase:
    """`new_tokens` enter the model while attending to `context` keys (which include them).
    `context` may be an array of lengths: engines then cost a whole decode run in one numpy
    pass, one entry per context length."""

    new_tokens: int
    context: int | np.ndarray
    causal: bool = True

    def __post_init__(self) -> None:
        assert self.new_tokens >= 1 and np.all(np.asarray(self.context) >= self.new_tokens), \
            (self.new_tokens, self.context)

    @property
    def attended_pairs(self) -> int:
        """(query, key) pairs scored: token at position p attends to p+1 keys when causal."""
        if not self.causal:
            return self.new_tokens * self.context
        first = self.context - self.new_tokens + 1
        return self.new_tokens * (first + self.context) // 2


def prefill(tokens: int) -> Phase:
    return Phase(tokens, tokens)


def decode(context: int) -> Phase:
    return Phase(1, context)


@dataclass(frozen=True)
class Op:
    """One operator. `weight` names the tensor role it reads (e.g. 'q' for q.weight/q.bias);
    `inputs` are the ops (or 'block_in') whose outputs it consumes, so the graph is a DAG."""

    name: str
    kind: OpKind
    fan_in: int
    fan_out: int
    inputs: tuple[str, ...]
    weight: str | None = None
    heads: int = 0

    def flops(self, phase: Phase) -> int:
        """Floating-point operations (multiply and add counted separately)."""
        n = phase.new_tokens
        if self.kind in {"linear", "lm_head"}:
            return 2 * n * self.fan_in * self.fan_out
        if self.kind in {"attn_score", "attn_context"}:
            return 2 * self.heads * self.fan_in * phase.attended_pairs
        if self.kind == "softmax":
            return 5 * self.heads * phase.attended_pairs  # max, sub, exp, sum, scale
        if self.kind == "norm":
            return 8 * n * self.fan_out
        if self.kind in {"activation", "gated_activation", "residual", "embedding"}:
            return n * self.fan_out * (2 if self.kind == "gated_activation" else 1)
        raise AssertionError(self.kind)


@dataclass(frozen=True)
class Graph:
    """The model as ops: `embed` once, `block` per layer, `output` once (last token only
    for decoders, every token for encoders)."""

    spec: ModelSpec
    embed: tuple[Op, ...]
    block: tuple[Op, ...]
    output: tuple[Op, ...]

    def flops(self, phase: Phase) -> int:
        out_phase = Phase(1, phase.context, phase.causal) if self.spec.is_decoder else phase
        return (
            sum(op.flops(phase) for op in self.embed)
            + self.spec.layers * sum(op.flops(phase) for op in self.block)
            + sum(op.flops(out_phase) for op in self.output)
        )

    def kv_cache_bytes(self, context: int, bytes_per_value: float) -> float:
        """Keys and values of every layer for `context` tokens (decoders only)."""
        if not self.spec.is_decoder:
            return 0.0
        return 2 * self.spec.layers * context * self.spec.kv_dim * bytes_per_value


def _attention(spec: ModelSpec, src: str) -> list[Op]:
    h, hd = spec.hidden, spec.head_dim
    return [
        Op("v", "linear", h, spec.kv_dim, (src,), weight="v"),
        Op("k", "linear", h, spec.kv_dim, (src,), weight="k"),
        Op("q", "linear", h, h, (src,), weight="q"),
        Op("attn_score", "attn_score", hd, hd, ("q", "k"), heads=spec.heads),
        Op("softmax", "softmax", hd, hd, ("attn_score",), heads=spec.heads),
        Op("attn_context", "attn_context", hd, hd, ("softmax", "v"), heads=spec.heads),
        Op("attn_out", "linear", h, h, ("attn_context",), weight="attn_out"),
    ]


def _ffn(spec: ModelSpec, src: str) -> list[Op]:
    h, f = spec.hidden, spec.ffn
    if spec.gated_ffn:
        return [
            Op("ffn_gate", "linear", h, f, (src,), weight="ffn_gate"),
            Op("ffn_up", "linear", h, f, (src,), weight="ffn_up"),
            Op("ffn_act", "gated_activation", f, f, ("ffn_gate", "ffn_up")),
            Op("ffn_down", "linear", f, h, ("ffn_act",), weight="ffn_down"),
        ]
    return [
        Op("ffn_up", "linear", h, f, (src,), weight="ffn_up"),
        Op("ffn_act", "activation", f, f, ("ffn_up",)),
        Op("ffn_down", "linear", f, h, ("ffn_act",), weight="ffn_down"),
    ]


def build_block(spec: ModelSpec) -> tuple[Op, ...]:
    """Pre-norm (GPT-2, OPT, LLaMA) or post-norm (BERT family) transformer block."""
    h = spec.hidden
    if spec.pre_norm:
        return (
            Op("attn_norm", "norm", h, h, ("block_in",), weight="attn_norm"),
            *_attention(spec, "attn_norm"),
            Op("attn_residual", "residual", h, h, ("attn_out", "block_in")),
            Op("ffn_norm", "norm", h, h, ("attn_residual",), weight="ffn_norm"),
            *_ffn(spec, "ffn_norm"),
            Op("ffn_residual", "residual", h, h, ("ffn_down", "attn_residual")),
        )
    return (
        *_attention(spec, "block_in"),
        Op("attn_residual", "residual", h, h, ("attn_out", "block_in")),
        Op("attn_norm", "norm", h, h, ("attn_residual",), weight="attn_norm"),
        *_ffn(spec, "attn_norm"),
        Op("ffn_residual", "residual", h, h, ("ffn_down", "attn_norm")),
        Op("ffn_norm", "norm", h, h, ("ffn_residual",), weight="ffn_norm"),
    )


def build_graph(spec: ModelSpec) -> Graph:
    h = spec.hidden
    embed = (Op("embed", "embedding", spec.vocab, h, ("tokens",), weight="embed_tokens"),)
    output: list[Op] = []
    if spec.final_norm:
        output.append(Op("final_norm", "norm", h, h, ("block_out",), weight="final_norm"))
    if spec.is_decoder:
        head_weight = "embed_tokens" if spec.tied_embeddings else "lm_head"
        src = output[-1].name if output else "block_out"
        output.append(Op("lm_head", "lm_head", h, spec.vocab, (src,), weight=head_weight))
    return Graph(spec, embed, build_block(spec), tuple(output))
