"""LLaMA and the decoders that keep its layout (Granite), and `llama_like`: the fields LLaMA
and most later decoders share, which the other LLaMA-shaped families build on."""

from collections.abc import Callable
from typing import Any

from archipelago.models.features import (
    BIASES,
    EXPLICIT_HEAD_DIM,
    GATED_MLP,
    GROUPED_QUERY,
    RMSNORM,
)
from archipelago.models.hf_fields import Fields
from archipelago.models.limits import MAX_LAYERS
from archipelago.models.model_families import (
    FamilyNumerics,
    FixedOption,
    ModelFamily,
    StateDictNames,
    register_model_family,
)

LLAMA_FEATURES = frozenset({GATED_MLP, RMSNORM, GROUPED_QUERY, BIASES, EXPLICIT_HEAD_DIM})
LLAMA_NAMES = StateDictNames(
    "model.layers.{}.",
    {"attn_norm": "input_layernorm", "q": "self_attn.q_proj", "k": "self_attn.k_proj",
     "v": "self_attn.v_proj", "attn_out": "self_attn.o_proj",
     "ffn_norm": "post_attention_layernorm", "ffn_gate": "mlp.gate_proj",
     "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"},
    {"embed_tokens": "model.embed_tokens", "final_norm": "model.norm", "lm_head": "lm_head"},
    linear_transposed=True,
)
# Rotary positions as transformers 5 computes them by default (modeling_rope_utils.py):
# rope_type "default" (inside rope_parameters), no rope_scaling, every head dimension rotated
# (partial_rotary_factor, 1.0 where absent); other values rotate by other frequencies.
ROTARY_FIXED = {"rope_type": FixedOption("default", "default", within="rope_parameters"),
                "rope_scaling": FixedOption(None, None),
                "partial_rotary_factor": FixedOption(1.0, 1.0)}


def rotary_numerics(rms_norm_eps: float, rope_theta: float = 10000.0) -> FamilyNumerics:
    """An RMSNorm epsilon under rms_norm_eps and a rotary base, with the family's
    transformers defaults where a config leaves them out: `rms_norm_eps` from its
    configuration_*.py, `rope_theta` its default_theta (RotaryEmbeddingConfigMixin's
    10000.0 in modeling_rope_utils.py unless the family overrides it)."""
    return FamilyNumerics(rms_norm_eps, "rms_norm_eps", rope_theta, ROTARY_FIXED)


def _head_size(f: Fields, hidden: int, heads: int) -> int | None:
    """An explicit head_dim only where it differs from hidden / heads (Gemma, Qwen3), so a
    config that spells out the usual value reads as the plain spec."""
    size = f.optional_int("head_dim")
    return None if size is None or (size * heads == hidden) else size


def activation(f: Fields, default: str) -> str:
    """Gemma-2 names it hidden_activation, the rest hidden_act."""
    key = "hidden_activation" if f.config.get("hidden_activation") is not None else "hidden_act"
    return f.str(key, default)


def window(f: Fields, layers: int, default_sliding: Callable[[int], bool]) -> dict[str, Any]:
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


def llama_like(f: Fields, arch: str, **extra: Any) -> dict[str, Any]:
    """The fields LLaMA and most later decoders share (RMSNorm, SwiGLU, rotary positions,
    separate LM head, q/k/v/o without biases unless attention_bias)."""
    heads, hidden = f.int("num_attention_heads"), f.int("hidden_size")
    values = dict(
        arch=arch, layers=f.int("num_hidden_layers", at_most=MAX_LAYERS), hidden=hidden,
        heads=heads, kv_heads=f.int("num_key_value_heads", heads),
        ffn=f.int("intermediate_size"), vocab=f.int("vocab_size"),
        max_positions=f.int("max_position_embeddings"), activation=activation(f, "silu"),
        norm="rmsnorm", gated_ffn=True,
        attn_bias=f.bool("attention_bias", False), mlp_bias=f.bool("mlp_bias", False),
        tied_embeddings=f.bool("tie_word_embeddings", False), learned_positions=False,
        head_size=_head_size(f, hidden, heads),
    )
    return {**values, **extra}


register_model_family(ModelFamily(
    "llama", lambda f: llama_like(f, "llama"), decoder=True,
    features=LLAMA_FEATURES,
    checked={"rms_norm_eps": "positive", "rope_theta": "positive",
             "initializer_range": "std", "attention_dropout": "probability",
             "attention_bias": "bool", "mlp_bias": "bool", "use_cache": "bool",
             "tie_word_embeddings": "bool"},
    checked_within={"rope_parameters": {"rope_theta": "positive"}},
    names=LLAMA_NAMES,
    numerics=rotary_numerics(1e-6)))  # configuration_llama.py: rms_norm_eps 1e-6
