"""OLMo's LayerNorms have no parameters; OLMo-2 normalizes each sublayer's output
(RMSNorm) and the full query and key widths."""

from typing import Any

from archipelago.models.features import (
    OUTPUT_NORMS,
    PARAMETER_FREE_NORMS,
    RMSNORM,
    WIDTH_QK_NORMS,
)
from archipelago.models.hf_families.llama import LLAMA_FEATURES, llama_like
from archipelago.models.hf_fields import Fields
from archipelago.models.model_families import ModelFamily, register_model_family


def _olmo(f: Fields) -> dict[str, Any]:
    return llama_like(f, "olmo", norm="layernorm", norm_affine=False)


def _olmo2(f: Fields) -> dict[str, Any]:
    return llama_like(f, "olmo2", sublayer_norms="output", qk_norm="width")


register_model_family(ModelFamily("olmo", _olmo, decoder=True,
                                  features=LLAMA_FEATURES - {RMSNORM} | {PARAMETER_FREE_NORMS}))
register_model_family(ModelFamily("olmo2", _olmo2, decoder=True,
                                  features=LLAMA_FEATURES | {OUTPUT_NORMS, WIDTH_QK_NORMS}))
