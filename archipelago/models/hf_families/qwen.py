"""Qwen2 biases q, k and v but not the output projection; Qwen3 replaces those biases
(attention_bias, default off) with RMSNorms over each head's queries and keys (state-dict
names self_attn.q_norm / k_norm beside LLaMA's). Hand-read for their state-dict names and
numerics (emulation); their MoE variants are read from transformers' model
(models/hf_introspect.py)."""

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from archipelago.models.features import (
    HEAD_QK_NORMS,
    MIXED_SLIDING,
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
# fill it the same way): from max_window_layers on.
_QWEN_SLIDING: dict[str, Callable[[int, int], bool]] = {
    "qwen2": lambda i, first: i >= first,
    "qwen3": lambda i, first: i >= first,
}
_QWEN3_NAMES = replace(LLAMA_NAMES, layer={**LLAMA_NAMES.layer, "q_norm": "self_attn.q_norm",
                                           "k_norm": "self_attn.k_norm"})


def _qwen(arch: str) -> Reader:
    def read(f: Fields) -> dict[str, Any]:
        values = llama_like(f, arch)
        if arch == "qwen2":
            values.update(attn_bias=f.bool("qkv_bias", True), attn_out_bias=False)
        else:
            values.update(qk_norm="head")
        first = f.count("max_window_layers", 28)
        values.update(window(f, values["layers"], lambda i: _QWEN_SLIDING[arch](i, first)))
        return values
    return read


_SLIDING = frozenset({SLIDING_WINDOW, MIXED_SLIDING})
register_model_family(ModelFamily("qwen2", _qwen("qwen2"), decoder=True,
                                  features=LLAMA_FEATURES | _SLIDING | {UNEVEN_OUT_BIAS},
                                  names=LLAMA_NAMES,
                                  numerics=rotary_numerics(1e-6)))  # configuration_qwen2.py
register_model_family(ModelFamily("qwen3", _qwen("qwen3"), decoder=True,
                                  features=LLAMA_FEATURES | _SLIDING | {HEAD_QK_NORMS},
                                  names=_QWEN3_NAMES,
                                  numerics=rotary_numerics(1e-6)))  # configuration_qwen3.py
