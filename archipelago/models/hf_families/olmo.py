"""OLMo's LayerNorms have no parameters: no module of transformers' model holds them, so
the module tree cannot tell where they run (OLMo-2 and later are read from it)."""

from typing import Any

from archipelago.models.features import PARAMETER_FREE_NORMS, RMSNORM
from archipelago.models.hf_families.llama import LLAMA_FEATURES, llama_like
from archipelago.models.hf_fields import Fields
from archipelago.models.model_families import ModelFamily, register_model_family


def _olmo(f: Fields) -> dict[str, Any]:
    return llama_like(f, "olmo", norm="layernorm", norm_affine=False)


register_model_family(ModelFamily("olmo", _olmo, decoder=True,
                                  features=LLAMA_FEATURES - {RMSNORM} | {PARAMETER_FREE_NORMS}))
