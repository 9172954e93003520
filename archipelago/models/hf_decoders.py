"""Readers for the decoder families transformers ships beyond GPT-2, OPT and LLaMA: each maps
one `model_type`'s field names (and the defaults its 5.x config class fills in) onto
ModelSpec, so a family's parameters match what transformers builds from the same config.

Most are LLaMA-shaped (`llama_like`) and differ in a few fields; the parallel-block
families (GPT-J, CodeGen, GPT-NeoX, Falcon, Phi, StableLM) and the mixtures of experts
(Mixtral, Qwen-MoE, DeepSeek-V3) add theirs on top.
"""

from collections.abc import Callable
from typing import Any

from archipelago.models.hf_fields import Fields
from archipelago.models.spec import MAX_LAYERS

Reader = Callable[[Fields], dict[str, Any]]
# BLOOM's config has no length field: ALiBi sets no hard limit, and 2048 is the sequence
# length BLOOM was trained at (BigScience, "BLOOM", 2022, §3.5 / Table 3).
BLOOM_POSITIONS = 2048


def _head_size(f: Fields, hidden: int, heads: int) -> int | None:
    """An explicit head_dim only where it differs from hidden / heads (Gemma, Qwen3), so a
    config that spells out the usual value reads as the plain spec."""
    size = f.optional_int("head_dim")
    return None if size is None or (size * heads == hidden) else size


def _activation(f: Fields, default: str) -> str:
    """Gemma-2 names it hidden_activation, the rest hidden_act."""
    key = "hidden_activation" if f.config.get("hidden_activation") is not None else "hidden_act"
    return f.str(key, default)


def _window(f: Fields, layers: int, default_sliding: Callable[[int], bool]) -> dict[str, Any]:
    """Sliding-window attention: the layers `layer_types` marks sliding, or where a config
    predates that field, those the family's own rule picks (transformers' config classes
    fill layer_types the same way); none when use_sliding_window is false."""
    if f.config.get("use_sliding_window") is False or not f.config.get("sliding_window"):
        return {}
    kinds = f.config.get("layer_types")
    if isinstance(kinds, list):
        ids = tuple(i for i, kind in enumerate(kinds[:layers]) if kind == "sliding_attention")
    else:
        ids = tuple(i for i in range(layers) if default_sliding(i))
    return dict(sliding_window=f.int("sliding_window"), sliding_layers=ids) if ids else {}


def _every_layer(_: int) -> bool:
    return True


def llama_like(f: Fields, arch: str, **extra: Any) -> dict[str, Any]:
    """The fields LLaMA and most later decoders share (RMSNorm, SwiGLU, rotary positions,
    separate LM head, q/k/v/o without biases unless attention_bias)."""
    heads, hidden = f.int("num_attention_heads"), f.int("hidden_size")
    values = dict(
        arch=arch, layers=f.int("num_hidden_layers", at_most=MAX_LAYERS), hidden=hidden,
        heads=heads, kv_heads=f.int("num_key_value_heads", heads),
        ffn=f.int("intermediate_size"), vocab=f.int("vocab_size"),
        max_positions=f.int("max_position_embeddings"), activation=_activation(f, "silu"),
        norm="rmsnorm", gated_ffn=True,
        attn_bias=f.bool("attention_bias", False), mlp_bias=f.bool("mlp_bias", False),
        tied_embeddings=f.bool("tie_word_embeddings", False), learned_positions=False,
        head_size=_head_size(f, hidden, heads),
    )
    return {**values, **extra}


def _sliding_all(arch: str) -> Reader:
    """Mistral, Phi-3: a sliding window, when set, applies to every layer."""
    def read(f: Fields) -> dict[str, Any]:
        values = llama_like(f, arch)
        return {**values, **_window(f, values["layers"], _every_layer)}
    return read


# Which layers slide when a Qwen config predates layer_types (transformers' config classes
# fill it the same way): from max_window_layers on; Qwen2-MoE every other one below it;
# Qwen3-MoE every layer.
_QWEN_SLIDING: dict[str, Callable[[int, int], bool]] = {
    "qwen2": lambda i, first: i >= first,
    "qwen3": lambda i, first: i >= first,
    "qwen2_moe": lambda i, first: i % 2 == 0 and i < first,
    "qwen3_moe": lambda i, first: True,
}


def _qwen(arch: str) -> Reader:
    """Qwen2 biases q, k and v but not the output projection; Qwen3 replaces those biases
    (attention_bias, default off) with RMSNorms over each head's queries and keys."""
    def read(f: Fields) -> dict[str, Any]:
        values = llama_like(f, arch)
        if arch.startswith("qwen2"):
            values.update(attn_bias=f.bool("qkv_bias", True), attn_out_bias=False)
        else:
            values.update(qk_norm="head")
        first = f.count("max_window_layers", 28)
        values.update(_window(f, values["layers"], lambda i: _QWEN_SLIDING[arch](i, first)))
        if arch.endswith("moe"):
            values["moe"] = _qwen_moe(f, values["layers"])
        return values
    return read


def _qwen_moe(f: Fields, layers: int) -> dict[str, Any]:
    """Every decoder_sparse_step-th layer routes over the experts unless mlp_only_layers
    keeps it dense; Qwen2-MoE adds one shared expert scaled by a sigmoid gate."""
    step, dense_only = f.int("decoder_sparse_step", 1), set(f.indices("mlp_only_layers"))
    shared = f.config.get("shared_expert_intermediate_size")
    experts_key = "num_experts" if f.config.get("num_experts") is not None \
        else "num_local_experts"
    return dict(
        experts=f.int(experts_key), per_token=f.int("num_experts_per_tok"),
        expert_ffn=f.int("moe_intermediate_size"),
        shared_ffn=0 if shared is None else f.int("shared_expert_intermediate_size"),
        shared_gate=shared is not None,
        dense_layers=tuple(i for i in range(layers) if i in dense_only or (i + 1) % step),
    )


def _mixtral(f: Fields) -> dict[str, Any]:
    values = _sliding_all("mixtral")(f)
    moe = dict(experts=f.int("num_local_experts"), per_token=f.int("num_experts_per_tok"),
               expert_ffn=values["ffn"])
    return {**values, "moe": moe}


def _deepseek_v3(f: Fields) -> dict[str, Any]:
    """MLA attention and an MoE FFN (n_shared_experts shared experts of the routed width)
    after first_k_dense_replace dense layers."""
    values = llama_like(f, "deepseek_v3", head_size=None)
    expert = f.int("moe_intermediate_size")
    mla = dict(q_rank=f.count("q_lora_rank"),
               kv_rank=f.int("kv_lora_rank"), rope_dim=f.int("qk_rope_head_dim"),
               nope_dim=f.int("qk_nope_head_dim"), v_dim=f.int("v_head_dim"))
    dense = min(f.count("first_k_dense_replace"), values["layers"])
    moe = dict(experts=f.int("n_routed_experts"), per_token=f.int("num_experts_per_tok"),
               expert_ffn=expert,
               shared_ffn=f.count("n_shared_experts") * expert, dense_layers=tuple(range(dense)))
    return {**values, "mla": mla, "moe": moe}


def _gemma(arch: str) -> Reader:
    """Gemma: GeGLU, a tied head, head_dim 256; Gemma-2 adds a norm after each sublayer
    and alternates sliding (even layers) and full attention. (1 + w) RMSNorms still hold one
    weight each."""
    def read(f: Fields) -> dict[str, Any]:
        values = llama_like(f, arch, activation=_activation(f, "gelu_pytorch_tanh"),
                             tied_embeddings=f.bool("tie_word_embeddings", True))
        if arch == "gemma2":
            values.update(sublayer_norms="both",
                          **_window(f, values["layers"], lambda i: i % 2 == 0))
        return values
    return read


def _olmo(arch: str) -> Reader:
    """OLMo's LayerNorms have no parameters; OLMo-2 normalizes each sublayer's output
    (RMSNorm) and the full query and key widths."""
    def read(f: Fields) -> dict[str, Any]:
        if arch == "olmo":
            return llama_like(f, arch, norm="layernorm", norm_affine=False)
        return llama_like(f, arch, sublayer_norms="output", qk_norm="width")
    return read


def _layernorm_parallel(f: Fields, arch: str, **extra: Any) -> dict[str, Any]:
    """GPT-NeoX-style sizes with LayerNorms and biases, attention and MLP side by side."""
    heads = f.int("num_attention_heads")
    values = dict(
        arch=arch, layers=f.int("num_hidden_layers"), hidden=f.int("hidden_size"), heads=heads,
        kv_heads=f.int("num_key_value_heads", heads), ffn=f.int("intermediate_size"),
        vocab=f.int("vocab_size"), max_positions=f.int("max_position_embeddings"),
        activation=f.str("hidden_act", "gelu"), tied_embeddings=f.bool("tie_word_embeddings",
                                                                       False),
        learned_positions=False, parallel_block=True,
    )
    return {**values, **extra}


def _gpt_neox(f: Fields) -> dict[str, Any]:
    """Two LayerNorms per block whether or not use_parallel_residual runs them side by side."""
    return _layernorm_parallel(f, "gpt_neox", attn_bias=f.bool("attention_bias", True),
                               parallel_block=f.bool("use_parallel_residual", True))


def _phi(f: Fields) -> dict[str, Any]:
    """Phi-1/2: one LayerNorm feeds both sublayers; biases everywhere, the LM head too."""
    return _layernorm_parallel(
        f, "phi", activation=f.str("hidden_act", "gelu_new"), shared_block_norm=True,
        lm_head_bias=True, qk_norm="head" if f.bool("qk_layernorm", False) else "none",
        qk_norm_bias=True)


def _stablelm(f: Fields) -> dict[str, Any]:
    """SwiGLU and LayerNorms; q/k/v biases (use_qkv_bias) without the output's; per-head
    bias-free q/k LayerNorms hold one weight per query and key column."""
    parallel = f.bool("use_parallel_residual", False)
    return _layernorm_parallel(
        f, "stablelm", activation=f.str("hidden_act", "silu"), gated_ffn=True,
        attn_bias=f.bool("use_qkv_bias", False), attn_out_bias=False, mlp_bias=False,
        parallel_block=parallel, shared_block_norm=parallel,
        qk_norm="width" if f.bool("qk_layernorm", False) else "none")


def _gptj(arch: str) -> Reader:
    """GPT-J and CodeGen: GPT-2's field names, rotary positions, one LayerNorm before a
    parallel block, bias-free attention, an untied LM head with a bias."""
    def read(f: Fields) -> dict[str, Any]:
        hidden, heads = f.int("n_embd"), f.int("n_head")
        return dict(
            arch=arch, layers=f.int("n_layer"), hidden=hidden, heads=heads, kv_heads=heads,
            ffn=4 * hidden if f.config.get("n_inner") is None else f.int("n_inner"),
            vocab=f.int("vocab_size"), max_positions=f.int("n_positions"),
            activation=f.str("activation_function", "gelu_new"), attn_bias=False,
            tied_embeddings=f.bool("tie_word_embeddings", False), learned_positions=False,
            parallel_block=True, shared_block_norm=True, lm_head_bias=True,
        )
    return read


def _falcon(f: Fields) -> dict[str, Any]:
    """Falcon-7B: multi-query attention and one LayerNorm before a parallel block;
    new_decoder_architecture (40B/180B): num_kv_heads and a LayerNorm per sublayer. ALiBi
    or rotary positions; `bias` on every linear layer."""
    heads, hidden = f.int("num_attention_heads"), f.int("hidden_size")
    new = f.bool("new_decoder_architecture", False)
    kv = f.int("num_kv_heads", heads) if new else (
        1 if f.bool("multi_query", True) else heads)
    parallel = f.bool("parallel_attn", True)
    norms = f.count("num_ln_in_parallel_attn", 2 if new else 1)
    bias = f.bool("bias", False)
    return dict(
        arch="falcon", layers=f.int("num_hidden_layers"), hidden=hidden, heads=heads,
        kv_heads=kv, ffn=f.int("ffn_hidden_size", 4 * hidden), vocab=f.int("vocab_size"),
        max_positions=f.int("max_position_embeddings", 2048),
        activation=f.str("activation", "gelu"), attn_bias=bias, mlp_bias=bias,
        tied_embeddings=f.bool("tie_word_embeddings", True), learned_positions=False,
        alibi=f.bool("alibi", False), parallel_block=parallel,
        shared_block_norm=parallel and not (new and norms == 2),
    )


def _bloom(f: Fields) -> dict[str, Any]:
    """ALiBi positions, a LayerNorm on the embeddings, biases everywhere, a tied head."""
    hidden = f.int("hidden_size", f.config.get("n_embed"))
    return dict(
        arch="bloom", layers=f.int("n_layer"), hidden=hidden, heads=f.int("n_head"),
        kv_heads=f.int("n_head"), ffn=4 * hidden, vocab=f.int("vocab_size"),
        max_positions=BLOOM_POSITIONS, activation="gelu_pytorch_tanh",
        tied_embeddings=f.bool("tie_word_embeddings", True), learned_positions=False,
        alibi=True, embedding_norm=True,
    )


DECODER_READERS: dict[str, Reader] = {
    "mistral": _sliding_all("mistral"),
    "mixtral": _mixtral,
    "qwen2": _qwen("qwen2"),
    "qwen2_moe": _qwen("qwen2_moe"),
    "qwen3": _qwen("qwen3"),
    "qwen3_moe": _qwen("qwen3_moe"),
    "phi": _phi,
    "phi3": _sliding_all("phi3"),
    "gemma": _gemma("gemma"),
    "gemma2": _gemma("gemma2"),
    "gpt_neox": _gpt_neox,
    "falcon": _falcon,
    "bloom": _bloom,
    "gptj": _gptj("gptj"),
    "codegen": _gptj("codegen"),
    "stablelm": _stablelm,
    "olmo": _olmo("olmo"),
    "olmo2": _olmo("olmo2"),
    "granite": lambda f: llama_like(f, "granite"),
    "deepseek_v3": _deepseek_v3,
}
