"""Mistral and Phi-3 (LLaMA's layout with a sliding window that, when set, covers every
layer) and Mixtral (Mistral whose FFN is a router over experts, stored one matrix per
expert as block_sparse_moe.experts.{e}.w1/w3/w2: gate, up, down)."""

from dataclasses import replace
from typing import Any

from archipelago.models.features import EXPERTS, SLIDING_WINDOW
from archipelago.models.hf_families.llama import (
    LLAMA_FEATURES,
    LLAMA_NAMES,
    llama_like,
    rotary_numerics,
    window,
)
from archipelago.models.hf_fields import Fields
from archipelago.models.model_families import ModelFamily, Reader, register_model_family

_FEATURES = LLAMA_FEATURES | {SLIDING_WINDOW}
_MIXTRAL_NAMES = replace(LLAMA_NAMES, layer={
    **{k: v for k, v in LLAMA_NAMES.layer.items() if not k.startswith("ffn_") or k == "ffn_norm"},
    "router": "block_sparse_moe.gate", "experts_gate": "block_sparse_moe.experts.{}.w1",
    "experts_up": "block_sparse_moe.experts.{}.w3",
    "experts_down": "block_sparse_moe.experts.{}.w2"},
    experts=frozenset({"experts_gate", "experts_up", "experts_down"}))


def sliding_all(arch: str) -> Reader:
    """A sliding window, when set, applies to every layer."""
    def read(f: Fields) -> dict[str, Any]:
        values = llama_like(f, arch)
        return {**values, **window(f, values["layers"], lambda _: True)}
    return read


def _mixtral(f: Fields) -> dict[str, Any]:
    values = sliding_all("mixtral")(f)
    moe = dict(experts=f.int("num_local_experts"), per_token=f.int("num_experts_per_tok"),
               expert_ffn=values["ffn"])
    return {**values, "moe": moe}


register_model_family(ModelFamily("mistral", sliding_all("mistral"), decoder=True,
                                  features=_FEATURES, names=LLAMA_NAMES,
                                  numerics=rotary_numerics(1e-6)))  # configuration_mistral.py
register_model_family(ModelFamily("phi3", sliding_all("phi3"), decoder=True,
                                  features=_FEATURES))
# configuration_mixtral.py: rms_norm_eps 1e-5, default_theta 1e6
register_model_family(ModelFamily("mixtral", _mixtral, decoder=True,
                                  features=_FEATURES | {EXPERTS}, names=_MIXTRAL_NAMES,
                                  numerics=rotary_numerics(1e-5, 1e6)))
