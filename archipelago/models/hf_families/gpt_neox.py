"""GPT-NeoX-style sizes with LayerNorms and biases, attention and MLP side by side: GPT-NeoX
itself, Phi-1/2 (one LayerNorm feeding both sublayers, an LM head bias) and StableLM
(SwiGLU, q/k/v biases without the output's, optional q/k LayerNorms)."""

from typing import Any

from archipelago.models.features import (
    BIASES,
    GATED_MLP,
    GROUPED_QUERY,
    HEAD_QK_NORMS,
    LM_HEAD_BIAS,
    PARALLEL_BLOCK,
    UNEVEN_OUT_BIAS,
    WIDTH_QK_NORMS,
)
from archipelago.models.hf_fields import Fields
from archipelago.models.model_families import ModelFamily, register_model_family


def _layernorm_parallel(f: Fields, arch: str, **extra: Any) -> dict[str, Any]:
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


_BASE = frozenset({BIASES, GROUPED_QUERY, PARALLEL_BLOCK})
register_model_family(ModelFamily("gpt_neox", _gpt_neox, decoder=True, features=_BASE))
register_model_family(ModelFamily("phi", _phi, decoder=True,
                                  features=_BASE | {LM_HEAD_BIAS, HEAD_QK_NORMS}))
register_model_family(ModelFamily(
    "stablelm", _stablelm, decoder=True,
    features=_BASE | {GATED_MLP, UNEVEN_OUT_BIAS, WIDTH_QK_NORMS}))
