"""DeepSeek-V3: MLA attention and an MoE FFN (n_shared_experts shared experts of the routed
width) after first_k_dense_replace dense layers. Names and numerics from transformers 5's
modeling_deepseek_v3.py and configuration_deepseek_v3.py: experts saved one matrix per
expert (mlp.experts.{e}.gate_proj/up_proj/down_proj), the router a sigmoid over experts
with group-limited top-k (DeepseekV3TopkRouter), rotary pairs interleaved (rope_interleave,
default true) over the qk_rope_head_dim dimensions."""

from typing import Any

from archipelago.models.features import (
    EXPERTS,
    LATENT_ATTENTION,
    MIXED_DENSE_MOE,
    SHARED_EXPERTS,
)
from archipelago.models.hf_families.llama import (
    LLAMA_FEATURES,
    LLAMA_NAMES,
    ROTARY_FIXED,
    llama_like,
)
from archipelago.models.hf_fields import Fields
from archipelago.models.model_families import (
    FamilyNumerics,
    FixedOption,
    ModelFamily,
    StateDictNames,
    register_model_family,
)

_ATTENTION = "self_attn."
_NAMES = StateDictNames(
    LLAMA_NAMES.layer_prefix,
    {**{k: v for k, v in LLAMA_NAMES.layer.items() if k not in ("q", "k", "v")},
     **{role: _ATTENTION + name for role, name in (
         ("q", "q_proj"), ("q_a", "q_a_proj"), ("q_a_norm", "q_a_layernorm"),
         ("q_b", "q_b_proj"), ("kv_a", "kv_a_proj_with_mqa"),
         ("kv_a_norm", "kv_a_layernorm"), ("kv_b", "kv_b_proj"))},
     "router": "mlp.gate", "experts_gate": "mlp.experts.{}.gate_proj",
     "experts_up": "mlp.experts.{}.up_proj", "experts_down": "mlp.experts.{}.down_proj",
     "shared_gate": "mlp.shared_experts.gate_proj", "shared_up": "mlp.shared_experts.up_proj",
     "shared_down": "mlp.shared_experts.down_proj"},
    LLAMA_NAMES.other, linear_transposed=True,
    experts=frozenset({"experts_gate", "experts_up", "experts_down"}))
# DeepseekV3RMSNorm's default eps (1e-6) is what q_a_layernorm and kv_a_layernorm use
# whatever rms_norm_eps says, so only that value is computed exactly everywhere.
_NUMERICS = FamilyNumerics(
    1e-6, "rms_norm_eps", 10000.0,
    {**ROTARY_FIXED, "rms_norm_eps": FixedOption(1e-6, 1e-6),
     "rope_interleave": FixedOption(True, True)}, rope_interleaved=True,
    routing={"n_group": 8, "topk_group": 4, "norm_topk_prob": True,
             "routed_scaling_factor": 2.5})


def _deepseek_v3(f: Fields) -> dict[str, Any]:
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


register_model_family(ModelFamily(
    "deepseek_v3", _deepseek_v3, decoder=True,
    features=LLAMA_FEATURES | {LATENT_ATTENTION, EXPERTS, SHARED_EXPERTS, MIXED_DENSE_MOE},
    names=_NAMES, numerics=_NUMERICS))
