"""Falcon-7B: multi-query attention and one LayerNorm before a parallel block;
new_decoder_architecture (40B/180B): num_kv_heads and a LayerNorm per sublayer. ALiBi or
rotary positions; `bias` on every linear layer."""

from typing import Any

from archipelago.models.features import ALIBI, BIASES, GROUPED_QUERY, PARALLEL_BLOCK
from archipelago.models.hf_fields import Fields
from archipelago.models.model_families import ModelFamily, register_model_family


def _falcon(f: Fields) -> dict[str, Any]:
    heads, hidden = f.int("num_attention_heads"), f.int("hidden_size")
    new = f.bool("new_decoder_architecture", False)
    kv = f.int("num_kv_heads", heads) if new else (
        1 if f.bool("multi_query", True) else heads)
    parallel = f.bool("parallel_attn", True)
    norms = f.count("num_ln_in_parallel_attn", 2 if new else 1)
    bias = f.bool("bias", False)
    return dict(
        arch="falcon", layers=f.int("num_hidden_layers"), hidden=hidden, heads=heads,
        kv_heads=kv, ffn=f.int("ffn_hidden_size", 4 * hidden), vocab=f.int("vocab_size"),
        max_positions=f.int("max_position_embeddings", 2048),
        activation=f.str("activation", "gelu"), attn_bias=bias, mlp_bias=bias,
        tied_embeddings=f.bool("tie_word_embeddings", True), learned_positions=False,
        alibi=f.bool("alibi", False), parallel_block=parallel,
        shared_block_norm=parallel and not (new and norms == 2),
    )


register_model_family(ModelFamily("falcon", _falcon, decoder=True,
                                  features=frozenset({BIASES, GROUPED_QUERY, ALIBI,
                                                      PARALLEL_BLOCK})))
