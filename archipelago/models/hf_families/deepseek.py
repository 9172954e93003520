"""DeepSeek-V3: MLA attention and an MoE FFN (n_shared_experts shared experts of the routed
width) after first_k_dense_replace dense layers."""

from typing import Any

from archipelago.models.features import (
    EXPERTS,
    LATENT_ATTENTION,
    MIXED_DENSE_MOE,
    SHARED_EXPERTS,
)
from archipelago.models.hf_families.llama import LLAMA_FEATURES, llama_like
from archipelago.models.hf_fields import Fields
from archipelago.models.model_families import ModelFamily, register_model_family


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
    features=LLAMA_FEATURES | {LATENT_ATTENTION, EXPERTS, SHARED_EXPERTS, MIXED_DENSE_MOE}))
