"""Operator graph of a transformer: block templates repeated over the layers, plus the
embedding and output ops. Shapes are per token; a Phase supplies how many new tokens flow
through and how long the attended context is, so the same graph serves prefill, decode at
any context length, and encoder passes.

A model whose layers differ (DeepSeek's dense layers before its MoE ones, Gemma-2's
alternating sliding-window and full attention) has one template per kind of layer
(`Graph.variants`); `Graph.block` is the most common one.

Mixture of experts: the router, then one gated FFN as wide as the routed experts a token
runs through plus the shared experts (`MoE.active_ffn`): that is a token's compute (FLOPs
stay per token), while every expert's weights are held (models/weights.py). What a step
reads is another matter: its tokens route to different experts, and a step of B tokens
reads the weights of the distinct experts they route to (E x (1 - (1 - k/E)^B) in
expectation under uniform routing, models/expert_routing.py; a batch of 8 with top-2 of 8
reads 7.2 experts, not 2), the shared experts and the router always. The FFN's ops carry
this as `Op.routed`, and every engine asks `Op.read_scale` for the bytes a step's tokens
read. A prompt's P tokens of B sequences read expected_distinct(E, k, B x P) the same way:
every expert, but for the rare prompt of a few tokens. The weighted sum of the experts'
outputs (about 2 x per_token x hidden flops, under 0.1% of the FFN's) is not an op.
Multi-head latent attention (DeepSeek-V3): the query and key/value down and up projections
as transformers runs them for each new token, scores over qk_nope + qk_rope dimensions per
head; the cache holds the latent (`ModelSpec.kv_values_per_token`). `absorbed_block` is the
same block in the form DeepSeek-V2's paper (arXiv 2405.04434, §2.1.2-2.1.3) gives inference:
W_UK absorbed into the query and W_UV into the output, so a new token scores the cached
latents themselves instead of re-expanding them into keys and values. ALiBi adds one bias per
score (not counted: softmax's five operations per score dominate it); it has no position
embedding, as rotary models have none.
"""

from collections import Counter
from dataclasses import dataclass, replace

import numpy as np

from archipelago.memo import by_content
from archipelago.models.graph_ops import Op, Phase, Routed
from archipelago.models.spec import ModelSpec


@dataclass(frozen=True)
class Graph:
    """The model as ops: `embed` once, a block per layer, `output` once (last token only
    for decoders, every token for encoders). `variants` holds each distinct block with the
    layers that run it; `block` is the one most layers run."""

    spec: ModelSpec
    embed: tuple[Op, ...]
    block: tuple[Op, ...]
    output: tuple[Op, ...]
    variants: tuple[tuple[tuple[Op, ...], tuple[int, ...]], ...] = ()

    def flops(self, phase: Phase) -> int:
        out_phase = Phase(1, phase.context, phase.causal) if self.spec.is_decoder else phase
        blocks = self.variants or ((self.block, range(self.spec.layers)),)
        return (
            sum(op.flops(phase) for op in self.embed)
            + sum(len(ids) * sum(op.flops(phase) for op in ops) for ops, ids in blocks)
            + sum(op.flops(out_phase) for op in self.output)
        )

    def kv_cache_bytes(self, context: int, bytes_per_value: float) -> float:
        """Keys and values of every layer for `context` tokens (decoders only); a
        sliding-window layer keeps only its last `window` tokens."""
        spec = self.spec
        if not spec.is_decoder:
            return 0.0
        sliding = len(spec.sliding_layers)
        tokens = (spec.layers - sliding) * context
        if sliding:
            tokens = tokens + sliding * np.minimum(context, spec.sliding_window)
        return tokens * spec.kv_values_per_token() * bytes_per_value


def _attention(spec: ModelSpec, src: str, window: int | None, absorbed: bool = False
               ) -> list[Op]:
    if spec.mla:
        return (_absorbed_attention if absorbed else _latent_attention)(spec, src, window)
    h, hd, q = spec.hidden, spec.head_dim, spec.q_dim
    ops = [
        Op("v", "linear", h, spec.kv_dim, (src,), weight="v"),
        Op("k", "linear", h, spec.kv_dim, (src,), weight="k"),
        Op("q", "linear", h, q, (src,), weight="q"),
    ]
    score_in = ("q", "k")
    if spec.qk_norm != "none":
        ops += [Op("q_norm", "norm", q, q, ("q",), weight="q_norm"),
                Op("k_norm", "norm", spec.kv_dim, spec.kv_dim, ("k",), weight="k_norm")]
        score_in = ("q_norm", "k_norm")
    return [*ops, *_scores(spec, score_in, "v", hd, hd, window),
            Op("attn_out", "linear", q, h, ("attn_context",), weight="attn_out")]


def _scores(spec: ModelSpec, qk: tuple[str, ...], v: str, qk_dim: int, v_dim: int,
            window: int | None) -> list[Op]:
    heads = spec.heads
    return [
        Op("attn_score", "attn_score", qk_dim, qk_dim, qk, heads=heads, window=window),
        Op("softmax", "softmax", qk_dim, qk_dim, ("attn_score",), heads=heads, window=window),
        Op("attn_context", "attn_context", v_dim, v_dim, ("softmax", v), heads=heads,
           window=window),
    ]


def _latent_projections(spec: ModelSpec, src: str) -> list[Op]:
    """MLA's query path (through the q_rank bottleneck, or direct) and the key/value down
    projection with its norm: the latent plus the rotary key (`kv_a`), the latent
    normalized (`kv_a_norm`)."""
    m, h, heads = spec.mla, spec.hidden, spec.heads
    assert m is not None
    if m.q_rank:
        ops = [Op("q_a", "linear", h, m.q_rank, (src,), weight="q_a"),
               Op("q_a_norm", "norm", m.q_rank, m.q_rank, ("q_a",), weight="q_a_norm"),
               Op("q_b", "linear", m.q_rank, heads * m.qk_dim, ("q_a_norm",), weight="q_b")]
    else:
        ops = [Op("q", "linear", h, heads * m.qk_dim, (src,), weight="q")]
    return [*ops, Op("kv_a", "linear", h, m.kv_rank + m.rope_dim, (src,), weight="kv_a"),
            Op("kv_a_norm", "norm", m.kv_rank, m.kv_rank, ("kv_a",), weight="kv_a_norm")]


def _latent_attention(spec: ModelSpec, src: str, window: int | None) -> list[Op]:
    """DeepSeek-V3's MLA as transformers runs it (see the module docstring), shapes as
    models/weights.py holds them: the latent expanded by kv_b into each head's key and
    value; the scores also read the rotary key (kv_a) and the latent (kv_a_norm) the
    cache keeps."""
    m, heads = spec.mla, spec.heads
    assert m is not None
    ops = _latent_projections(spec, src)
    query = ops[-3].name
    ops.append(Op("kv_b", "linear", m.kv_rank, heads * (m.nope_dim + m.v_dim),
                  ("kv_a_norm",), weight="kv_b"))
    scores = _scores(spec, (query, "kv_b", "kv_a_norm", "kv_a"), "kv_b", m.qk_dim, m.v_dim,
                     window)
    return [*ops, *scores,
            Op("attn_out", "linear", heads * m.v_dim, spec.hidden, ("attn_context",),
               weight="attn_out")]


def _absorbed_attention(spec: ModelSpec, src: str, window: int | None) -> list[Op]:
    """MLA absorbed (DeepSeek-V2, arXiv 2405.04434, §2.1.3: "W_UK can be absorbed into W_Q,
    and W_UV can be absorbed into W_O"), applied by associativity rather than as merged
    matrices (those would be heads x kv_rank wide, larger than the factors): each head's
    query is taken into the latent space by its W_UK block (`q_latent`: nope_dim x
    kv_rank per head, kv_b's key columns), scored against the cached latents plus the
    rotary key (kv_rank + rope_dim per pair), the probabilities weight the latents
    (`latent_context`, kv_rank per head) and each head's W_UV block (`v_up`, kv_b's value
    columns) takes that to v_dim. kv_b's weights are read once, as in the expanded form;
    the per-head `linear` ops (`heads` set) have fan_in x fan_out one head's block times
    the heads, so their FLOPs and weight bytes are the block-diagonal products'."""
    m, heads = spec.mla, spec.heads
    assert m is not None
    ops = _latent_projections(spec, src)
    query = ops[-3].name
    latent = m.kv_rank + m.rope_dim
    return [*ops,
            Op("q_latent", "linear", m.nope_dim, heads * m.kv_rank, (query,), weight="kv_b",
               heads=heads),
            Op("attn_score", "attn_score", latent, latent,
               ("q_latent", query, "kv_a_norm", "kv_a"), heads=heads, window=window),
            Op("softmax", "softmax", latent, latent, ("attn_score",), heads=heads,
               window=window),
            Op("latent_context", "attn_context", m.kv_rank, m.kv_rank,
               ("softmax", "kv_a_norm"), heads=heads, window=window),
            Op("v_up", "linear", m.kv_rank, heads * m.v_dim, ("latent_context",),
               weight="kv_b", heads=heads),
            Op("attn_out", "linear", heads * m.v_dim, spec.hidden, ("v_up",),
               weight="attn_out")]


def _ffn(spec: ModelSpec, src: str, moe: bool) -> list[Op]:
    h, f = spec.hidden, spec.ffn
    if moe:  # the router, then the active experts as one gated FFN (module docstring)
        m = spec.moe
        assert m is not None
        f = m.active_ffn
        ops = [Op("router", "linear", h, m.experts, (src,), weight="router")]
        if m.shared_gate:
            ops.append(Op("shared_scale", "linear", h, 1, (src,), weight="shared_scale"))
        cols, rows = (Routed(m.experts, m.per_token, m.expert_ffn, m.shared_ffn, axis)
                      for axis in ("out", "in"))
        return [*ops,
                Op("ffn_gate", "linear", h, f, (src, "router"), weight="experts_gate",
                   routed=cols),
                Op("ffn_up", "linear", h, f, (src, "router"), weight="experts_up",
                   routed=cols),
                Op("ffn_act", "gated_activation", f, f, ("ffn_gate", "ffn_up")),
                Op("ffn_down", "linear", f, h, ("ffn_act",), weight="experts_down",
                   routed=rows)]
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


def _norm(name: str, spec: ModelSpec, src: str) -> Op:
    return Op(name, "norm", spec.hidden, spec.hidden, (src,), weight=name)


def _sublayer(name: str, ops: list[Op], spec: ModelSpec, src: str) -> tuple[list[Op], str]:
    """`ops` read `src` (behind an input norm when the block has them) and, when the block
    normalizes sublayer outputs (OLMo-2, Gemma-2), their output goes through one more norm.
    Returns the ops and the name of their result."""
    before = [_norm(f"{name}_norm", spec, src)] if spec.sublayer_norms != "output" else []
    after = [_norm(f"{name}_post_norm", spec, ops[-1].name)] \
        if spec.sublayer_norms != "input" else []
    return [*before, *ops, *after], (after or ops)[-1].name


def _pre_norm(spec: ModelSpec, moe: bool, window: int | None, absorbed: bool = False
              ) -> tuple[Op, ...]:
    h = spec.hidden
    if spec.parallel_block:  # GPT-J, NeoX, Falcon, Phi: x + attn(norm(x)) + ffn(norm'(x))
        attn_src = "attn_norm"
        ffn_src = "attn_norm" if spec.shared_block_norm else "ffn_norm"
        norms = [_norm("attn_norm", spec, "block_in")]
        if not spec.shared_block_norm:
            norms.append(_norm("ffn_norm", spec, "block_in"))
        return (*norms, *_attention(spec, attn_src, window, absorbed),
                *_ffn(spec, ffn_src, moe),
                Op("block_residual", "residual", h, h, ("attn_out", "ffn_down", "block_in")))
    attn, attn_out = _sublayer("attn", _attention(spec, "", window, absorbed), spec,
                               "block_in")
    attn = _rewire(attn, "block_in" if spec.sublayer_norms == "output" else "attn_norm")
    ffn, ffn_out = _sublayer("ffn", _ffn(spec, "", moe), spec, "attn_residual")
    ffn = _rewire(ffn, "attn_residual" if spec.sublayer_norms == "output" else "ffn_norm")
    return (*attn, Op("attn_residual", "residual", h, h, (attn_out, "block_in")),
            *ffn, Op("ffn_residual", "residual", h, h, (ffn_out, "attn_residual")))


def _rewire(ops: list[Op], src: str) -> list[Op]:
    """Point the ops built with a placeholder input ("") at `src`."""
    return [replace(o, inputs=tuple(src if i == "" else i for i in o.inputs)) for o in ops]


def build_block(spec: ModelSpec, layer: int = 0, absorbed: bool = False) -> tuple[Op, ...]:
    """Pre-norm (GPT-2, OPT, LLaMA and later decoders) or post-norm (BERT family) block
    of `layer` (layers differ in MoE or dense FFN and sliding or full attention);
    `absorbed`: latent attention in its absorbed form (`absorbed_block`)."""
    h, moe, window = spec.hidden, spec.is_moe_layer(layer), spec.window(layer)
    if spec.pre_norm:
        return _pre_norm(spec, moe, window, absorbed)
    return (
        *_attention(spec, "block_in", window),
        Op("attn_residual", "residual", h, h, ("attn_out", "block_in")),
        Op("attn_norm", "norm", h, h, ("attn_residual",), weight="attn_norm"),
        *_ffn(spec, "attn_norm", moe),
        Op("ffn_residual", "residual", h, h, ("ffn_down", "attn_norm")),
        Op("ffn_norm", "norm", h, h, ("ffn_residual",), weight="ffn_norm"),
    )


def _variants(spec: ModelSpec) -> tuple[tuple[tuple[Op, ...], tuple[int, ...]], ...]:
    """Each distinct block with the layers running it, the most common first."""
    kinds = {layer: (spec.is_moe_layer(layer), spec.window(layer))
             for layer in range(spec.layers)}
    order = [kind for kind, _ in Counter(kinds.values()).most_common()]
    return tuple((build_block(spec, next(i for i, k in kinds.items() if k == kind)),
                  tuple(i for i, k in kinds.items() if k == kind)) for kind in order)


def absorbed_block(spec: ModelSpec, layer: int | None = None) -> tuple[Op, ...]:
    """`layer`'s block (None: `Graph.block`'s) with latent attention absorbed
    (`_absorbed_attention`): the form a new
    token runs against a cache of latents. With the cache holding only latents, the
    expanded form must re-expand every earlier token through kv_b at each step
    (transformers' expand_kv does): 2 x heads x kv_rank x (nope_dim + v_dim) FLOPs per
    earlier token, besides 2 x heads x (qk_dim + v_dim) per (query, key) pair; the absorbed
    form spends 2 x heads x (2 kv_rank + rope_dim) per pair and, per new token, as much
    as expanding it once (q_latent and v_up). At context L it is cheaper by
    2 heads ((L - 1) kv_rank (nope_dim + v_dim) - L (2 kv_rank + rope_dim - qk_dim -
    v_dim)): for DeepSeek-V3 whenever L >= 2, every decode step (only a token-serial
    prompt's first pass, L = 1, costs a little more, tests/test_latent_plan.py). A prompt
    with no cache before it runs the expanded form, whose pairs are cheaper. Models
    without latent attention run `Graph.block` alike."""
    graph = build_graph(spec)
    layer = graph.variants[0][1][0] if layer is None else layer
    if spec.mla is None:
        return next(ops for ops, ids in graph.variants if layer in ids)
    return build_block(spec, layer, absorbed=True)


# A graph is frozen (tuples of frozen ops) and a pure function of the spec's fields.
@by_content(maxsize=64)
def build_graph(spec: ModelSpec) -> Graph:
    h = spec.hidden
    embed = [Op("embed", "embedding", spec.vocab, h, ("tokens",), weight="embed_tokens")]
    if spec.embedding_norm and spec.is_decoder:  # BLOOM's LayerNorm on the embeddings
        embed.append(Op("embed_norm", "norm", h, h, ("embed",), weight="embed_norm"))
    output: list[Op] = []
    if spec.final_norm:
        output.append(Op("final_norm", "norm", h, h, ("block_out",), weight="final_norm"))
    if spec.is_decoder:
        head_weight = "embed_tokens" if spec.tied_embeddings else "lm_head"
        src = output[-1].name if output else "block_out"
        output.append(Op("lm_head", "lm_head", h, spec.vocab, (src,), weight=head_weight))
    variants = _variants(spec)
    return Graph(spec, tuple(embed), variants[0][0], tuple(output), variants)
