"""GPT-2: Conv1D matrices stored (in, out), q, k and v fused into one c_attn matrix (three
equal column blocks), learned positions, biases everywhere, a tied head."""

from typing import Any

from archipelago.models.features import BIASES
from archipelago.models.hf_fields import Fields
from archipelago.models.model_families import (
    FamilyNumerics,
    FixedOption,
    ModelFamily,
    StateDictNames,
    register_model_family,
)

_NAMES = StateDictNames(
    "transformer.h.{}.",
    {"attn_norm": "ln_1", "q": "attn.c_attn", "k": "attn.c_attn", "v": "attn.c_attn",
     "attn_out": "attn.c_proj", "ffn_norm": "ln_2", "ffn_up": "mlp.c_fc",
     "ffn_down": "mlp.c_proj"},
    {"embed_tokens": "transformer.wte", "embed_positions": "transformer.wpe",
     "final_norm": "transformer.ln_f"},
    linear_transposed=False,
    fused={"q": (0, 3), "k": (1, 3), "v": (2, 3)},
)
# transformers 5's configuration_gpt2.py: layer_norm_epsilon 1e-5; attention scores divided
# by sqrt(head size) (scale_attn_weights True) and not also by the layer index + 1.
_NUMERICS = FamilyNumerics(1e-5, "layer_norm_epsilon", fixed={
    "scale_attn_weights": FixedOption(True, True),
    "scale_attn_by_inverse_layer_idx": FixedOption(False, False)})


def _gpt2(f: Fields) -> dict[str, Any]:
    hidden = f.int("n_embd")
    return dict(
        arch="gpt2", layers=f.int("n_layer"), hidden=hidden, heads=f.int("n_head"),
        kv_heads=f.int("n_head"),
        ffn=4 * hidden if f.config.get("n_inner") is None else f.int("n_inner"),
        vocab=f.int("vocab_size"), max_positions=f.int("n_positions"),
        activation=f.str("activation_function", "gelu_new"),
    )


register_model_family(ModelFamily(
    "gpt2", _gpt2, decoder=True, features=frozenset({BIASES}),
    checked={"layer_norm_epsilon": "positive", "initializer_range": "std",
             "resid_pdrop": "probability", "embd_pdrop": "probability",
             "attn_pdrop": "probability", "summary_first_dropout": "probability",
             "scale_attn_weights": "bool", "scale_attn_by_inverse_layer_idx": "bool",
             "reorder_and_upcast_attn": "bool", "add_cross_attention": "bool",
             "use_cache": "bool", "tie_word_embeddings": "bool"},
    names=_NAMES, numerics=_NUMERICS))
