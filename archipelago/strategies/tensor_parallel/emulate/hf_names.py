"""Canonical tensor names (models/weights.py) -> transformers state-dict names and layouts.

Canonical matrices are (in_features, out_features). GPT-2's Conv1D stores that layout already
and fuses q, k and v into one c_attn matrix (three equal column blocks); OPT's and LLaMA's
nn.Linear store (out_features, in_features), so their matrices are read transposed.
Mixtral's experts are stored one matrix per expert (`experts.{e}.w1/w3/w2`: gate, up, down,
the hub layout transformers also saves in); they are read into one (experts, in, out) stack.
"""

from dataclasses import dataclass, replace

from archipelago.models.spec import ModelSpec
from archipelago.models.weights import WeightTensor


@dataclass(frozen=True)
class HFSource:
    """Where a canonical tensor lives: `key` in the state dict, stored transposed or not, and
    for a fused matrix which of `parts` equal blocks along the output axis it is."""

    key: str
    transposed: bool = False
    part: int = 0
    parts: int = 1
    experts: int = 0  # > 0: `key` has a '{}' for the expert index, one 2-D matrix each


@dataclass(frozen=True)
class _ArchNames:
    layer_prefix: str            # formatted with the layer index
    layer: dict[str, str]        # canonical module -> path inside one layer
    other: dict[str, str]        # canonical module -> full path
    linear_transposed: bool      # nn.Linear (out, in) rather than Conv1D (in, out)
    fused: dict[str, tuple[int, int]]
    experts: frozenset[str] = frozenset()  # modules stored one matrix per expert


_GPT2 = _ArchNames(
    "transformer.h.{}.",
    {"attn_norm": "ln_1", "q": "attn.c_attn", "k": "attn.c_attn", "v": "attn.c_attn",
     "attn_out": "attn.c_proj", "ffn_norm": "ln_2", "ffn_up": "mlp.c_fc",
     "ffn_down": "mlp.c_proj"},
    {"embed_tokens": "transformer.wte", "embed_positions": "transformer.wpe",
     "final_norm": "transformer.ln_f"},
    linear_transposed=False,
    fused={"q": (0, 3), "k": (1, 3), "v": (2, 3)},
)
_OPT = _ArchNames(
    "model.decoder.layers.{}.",
    {"attn_norm": "self_attn_layer_norm", "q": "self_attn.q_proj", "k": "self_attn.k_proj",
     "v": "self_attn.v_proj", "attn_out": "self_attn.out_proj", "ffn_norm": "final_layer_norm",
     "ffn_up": "fc1", "ffn_down": "fc2"},
    {"embed_tokens": "model.decoder.embed_tokens",
     "embed_positions": "model.decoder.embed_positions",
     "final_norm": "model.decoder.final_layer_norm", "lm_head": "lm_head"},
    linear_transposed=True,
    fused={},
)
_LLAMA = _ArchNames(
    "model.layers.{}.",
    {"attn_norm": "input_layernorm", "q": "self_attn.q_proj", "k": "self_attn.k_proj",
     "v": "self_attn.v_proj", "attn_out": "self_attn.o_proj",
     "ffn_norm": "post_attention_layernorm", "ffn_gate": "mlp.gate_proj",
     "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"},
    {"embed_tokens": "model.embed_tokens", "final_norm": "model.norm", "lm_head": "lm_head"},
    linear_transposed=True,
    fused={},
)
# Mistral, Qwen2 and Qwen3 keep LLaMA's names (Qwen3 adds per-head q/k norms); Mixtral's
# FFN is the router and experts of block_sparse_moe.
_QWEN3 = replace(_LLAMA, layer={**_LLAMA.layer, "q_norm": "self_attn.q_norm",
                                "k_norm": "self_attn.k_norm"})
_MIXTRAL = replace(_LLAMA, layer={
    **{k: v for k, v in _LLAMA.layer.items() if not k.startswith("ffn_") or k == "ffn_norm"},
    "router": "block_sparse_moe.gate", "experts_gate": "block_sparse_moe.experts.{}.w1",
    "experts_up": "block_sparse_moe.experts.{}.w3",
    "experts_down": "block_sparse_moe.experts.{}.w2"},
    experts=frozenset({"experts_gate", "experts_up", "experts_down"}))
ARCH_NAMES = {"gpt2": _GPT2, "opt": _OPT, "llama": _LLAMA, "mistral": _LLAMA, "qwen2": _LLAMA,
              "qwen3": _QWEN3, "mixtral": _MIXTRAL}
# Lookup tables are (rows, width) in both layouts; every other matrix is a linear map.
_TABLES = frozenset({"embed_tokens", "embed_positions"})


def hf_source(spec: ModelSpec, tensor: WeightTensor) -> HFSource:
    """The state-dict entry holding `tensor` (KeyError for an architecture or module that has
    no mapping: callers check `ARCH_NAMES` and the spec first)."""
    names = ARCH_NAMES[spec.arch]
    module, param = tensor.role.rsplit(".", 1)
    if tensor.layer is None:
        path = names.other[module]
    else:
        path = names.layer_prefix.format(tensor.layer) + names.layer[module]
    transposed = names.linear_transposed and len(tensor.shape) >= 2 and module not in _TABLES
    part, parts = names.fused.get(module, (0, 1))
    experts = tensor.shape[0] if module in names.experts else 0
    return HFSource(f"{path}.{param}", transposed, part, parts, experts)
