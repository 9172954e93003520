"""Qwen2 biases q, k and v but not the output projection; Qwen3 replaces those biases
(attention_bias, default off) with RMSNorms over each head's queries and keys (state-dict
names self_attn.q_norm / k_norm beside LLaMA's). Their MoE variants route every
decoder_sparse_step-th layer over experts; Qwen2-MoE adds a sigmoid-gated shared expert."""

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from archipelago.models.features import (
    EXPERTS,
    HEAD_QK_NORMS,
    MIXED_DENSE_MOE,
    MIXED_SLIDING,
    SHARED_EXPERTS,
    SLIDING_WINDOW,
    UNEVEN_OUT_BIAS,
)
from archipelago.models.hf_families.llama import (
    LLAMA_FEATURES,
    LLAMA_NAMES,
    llama_like,
    rotary_numerics,
    window,
)
from archipelago.models.hf_fields import Fields
from archipelago.models.model_families import ModelFamily, Reader, register_model_family

# Which layers slide when a Qwen config predates layer_types (transformers' config classes
# fill it the same way): from max_window_layers on; Qwen2-MoE every other one below it;
# Qwen3-MoE every layer.
_QWEN_SLIDING: dict[str, Callable[[int, int], bool]] = {
    "qwen2": lambda i, first: i >= first,
    "qwen3": lambda i, first: i >= first,
    "qwen2_moe": lambda i, first: i % 2 == 0 and i < first,
    "qwen3_moe": lambda i, first: True,
}
_QWEN3_NAMES = replace(LLAMA_NAMES, layer={**LLAMA_NAMES.layer, "q_norm": "self_attn.q_norm",
                                           "k_norm": "self_attn.k_norm"})


def _qwen(arch: str) -> Reader:
    def read(f: Fields) -> dict[str, Any]:
        values = llama_like(f, arch)
        if arch.startswith("qwen2"):
            values.update(attn_bias=f.bool("qkv_bias", True), attn_out_bias=False)
        else:
            values.update(qk_norm="head")
        first = f.count("max_window_layers", 28)
        values.update(window(f, values["layers"], lambda i: _QWEN_SLIDING[arch](i, first)))
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


_SLIDING = frozenset({SLIDING_WINDOW, MIXED_SLIDING})
_QWEN2 = LLAMA_FEATURES | _SLIDING | {UNEVEN_OUT_BIAS}
_QWEN3 = LLAMA_FEATURES | _SLIDING | {HEAD_QK_NORMS}
_MOE = frozenset({EXPERTS, MIXED_DENSE_MOE})
register_model_family(ModelFamily("qwen2", _qwen("qwen2"), decoder=True, features=_QWEN2,
                                  names=LLAMA_NAMES,
                                  numerics=rotary_numerics(1e-6)))  # configuration_qwen2.py
register_model_family(ModelFamily("qwen2_moe", _qwen("qwen2_moe"), decoder=True,
                                  features=_QWEN2 | _MOE | {SHARED_EXPERTS}))
register_model_family(ModelFamily("qwen3", _qwen("qwen3"), decoder=True, features=_QWEN3,
                                  names=_QWEN3_NAMES,
                                  numerics=rotary_numerics(1e-6)))  # configuration_qwen3.py
register_model_family(ModelFamily("qwen3_moe", _qwen("qwen3_moe"), decoder=True,
                                  features=_QWEN3 | _MOE))
