"""GPT-J and CodeGen: GPT-2's field names, rotary positions, one LayerNorm before a
parallel block, bias-free attention, an untied LM head with a bias."""

from typing import Any

from archipelago.models.features import BIASES, LM_HEAD_BIAS, PARALLEL_BLOCK
from archipelago.models.hf_fields import Fields
from archipelago.models.model_families import ModelFamily, Reader, register_model_family


def _gptj(arch: str) -> Reader:
    def read(f: Fields) -> dict[str, Any]:
        hidden, heads = f.int("n_embd"), f.int("n_head")
        return dict(
            arch=arch, layers=f.int("n_layer"), hidden=hidden, heads=heads, kv_heads=heads,
            ffn=4 * hidden if f.config.get("n_inner") is None else f.int("n_inner"),
            vocab=f.int("vocab_size"), max_positions=f.int("n_positions"),
            activation=f.str("activation_function", "gelu_new"), attn_bias=False,
            tied_embeddings=f.bool("tie_word_embeddings", False), learned_positions=False,
            parallel_block=True, shared_block_norm=True, lm_head_bias=True,
        )
    return read


_FEATURES = frozenset({BIASES, PARALLEL_BLOCK, LM_HEAD_BIAS})
register_model_family(ModelFamily("gptj", _gptj("gptj"), decoder=True, features=_FEATURES))
register_model_family(ModelFamily("codegen", _gptj("codegen"), decoder=True,
                                  features=_FEATURES))
