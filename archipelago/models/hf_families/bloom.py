"""BLOOM: ALiBi positions, a LayerNorm on the embeddings, biases everywhere, a tied head."""

from typing import Any

from archipelago.models.features import ALIBI, BIASES, EMBEDDING_NORM
from archipelago.models.hf_fields import Fields
from archipelago.models.model_families import ModelFamily, register_model_family

# BLOOM's config has no length field: ALiBi sets no hard limit, and 2048 is the sequence
# length BLOOM was trained at (BigScience, "BLOOM", 2022, §3.5 / Table 3).
BLOOM_POSITIONS = 2048


def _bloom(f: Fields) -> dict[str, Any]:
    hidden = f.int("hidden_size", f.config.get("n_embed"))
    return dict(
        arch="bloom", layers=f.int("n_layer"), hidden=hidden, heads=f.int("n_head"),
        kv_heads=f.int("n_head"), ffn=4 * hidden, vocab=f.int("vocab_size"),
        max_positions=BLOOM_POSITIONS, activation="gelu_pytorch_tanh",
        tied_embeddings=f.bool("tie_word_embeddings", True), learned_positions=False,
        alibi=True, embedding_norm=True,
    )


register_model_family(ModelFamily("bloom", _bloom, decoder=True,
                                  features=frozenset({ALIBI, BIASES, EMBEDDING_NORM})))
