"""Gemma: GeGLU, a tied head, head_dim 256; Gemma-2 adds a norm after each sublayer and
alternates sliding (even layers) and full attention. (1 + w) RMSNorms still hold one
weight each."""

from typing import Any

from archipelago.models.features import BOTH_NORMS, MIXED_SLIDING, SLIDING_WINDOW
from archipelago.models.hf_families.llama import LLAMA_FEATURES, activation, llama_like, window
from archipelago.models.hf_fields import Fields
from archipelago.models.model_families import ModelFamily, Reader, register_model_family


def _gemma(arch: str) -> Reader:
    def read(f: Fields) -> dict[str, Any]:
        values = llama_like(f, arch, activation=activation(f, "gelu_pytorch_tanh"),
                            tied_embeddings=f.bool("tie_word_embeddings", True))
        if arch == "gemma2":
            values.update(sublayer_norms="both",
                          **window(f, values["layers"], lambda i: i % 2 == 0))
        return values
    return read


register_model_family(ModelFamily("gemma", _gemma("gemma"), decoder=True,
                                  features=LLAMA_FEATURES))
register_model_family(ModelFamily(
    "gemma2", _gemma("gemma2"), decoder=True,
    features=LLAMA_FEATURES | {BOTH_NORMS, SLIDING_WINDOW, MIXED_SLIDING}))
