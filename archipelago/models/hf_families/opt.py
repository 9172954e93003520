"""OPT: learned positions offset by 2, biases (enable_bias), pre- or post-norm blocks, and
embeddings of word_embed_proj_dim projected to the hidden size (OPT-350M)."""

from typing import Any

from archipelago.models.features import BIASES, POST_NORM
from archipelago.models.hf_fields import Fields
from archipelago.models.model_families import (
    FamilyNumerics,
    FixedOption,
    ModelFamily,
    StateDictNames,
    register_model_family,
)

_NAMES = StateDictNames(
    "model.decoder.layers.{}.",
    {"attn_norm": "self_attn_layer_norm", "q": "self_attn.q_proj", "k": "self_attn.k_proj",
     "v": "self_attn.v_proj", "attn_out": "self_attn.out_proj", "ffn_norm": "final_layer_norm",
     "ffn_up": "fc1", "ffn_down": "fc2"},
    {"embed_tokens": "model.decoder.embed_tokens",
     "embed_positions": "model.decoder.embed_positions",
     "final_norm": "model.decoder.final_layer_norm", "lm_head": "lm_head"},
    linear_transposed=True,
)
# transformers 5's modeling_opt.py builds nn.LayerNorm without an eps (torch's 1e-5, which no
# config field changes), with a weight and bias unless layer_norm_elementwise_affine is false
# (configuration_opt.py: true).
_NUMERICS = FamilyNumerics(1e-5, None, fixed={
    "layer_norm_elementwise_affine": FixedOption(True, True)})


def _opt(f: Fields) -> dict[str, Any]:
    hidden = f.int("hidden_size")
    proj = f.int("word_embed_proj_dim", hidden)
    pre_norm = f.bool("do_layer_norm_before", True)
    return dict(
        arch="opt", layers=f.int("num_hidden_layers"), hidden=hidden,
        heads=f.int("num_attention_heads"), kv_heads=f.int("num_attention_heads"),
        ffn=f.int("ffn_dim"), vocab=f.int("vocab_size"),
        max_positions=f.int("max_position_embeddings"),
        activation=f.str("activation_function", "relu"),
        pre_norm=pre_norm, final_norm=pre_norm and not f.bool("_remove_final_layer_norm", False),
        attn_bias=f.bool("enable_bias", True), mlp_bias=f.bool("enable_bias", True),
        position_offset=2, embed_proj_dim=None if proj == hidden else proj,
        tied_embeddings=f.bool("tie_word_embeddings", True),
    )


register_model_family(ModelFamily(
    "opt", _opt, decoder=True, features=frozenset({BIASES, POST_NORM}),
    checked={"init_std": "std", "dropout": "probability", "attention_dropout": "probability",
             "layerdrop": "probability", "do_layer_norm_before": "bool",
             "_remove_final_layer_norm": "bool", "enable_bias": "bool",
             "layer_norm_elementwise_affine": "bool", "use_cache": "bool",
             "tie_word_embeddings": "bool"},
    names=_NAMES, numerics=_NUMERICS))
