"""Read Hugging Face `config.json` dictionaries into ModelSpecs without importing transformers.

Each architecture has its own field names; one small reader per `model_type` maps them onto
ModelSpec. A missing or ill-typed field is reported with the file and field name.
"""

import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from archipelago.errors import ConfigError, Notice, UnknownNameError, elide_path
from archipelago.families import Family, register_family
from archipelago.models.hf_decoders import DECODER_READERS, llama_like
from archipelago.models.hf_encoders import ENCODER_READERS, NOT_READ_ENCODERS
from archipelago.models.hf_fields import Fields
from archipelago.models.spec import ModelSpec
from archipelago.models.weights import parameter_count
from archipelago.safe_read import is_dir, load_json, probe

# Fields transformers builds the reference model from besides the sizes the readers below
# take (its 5.x config classes): a bad one is one line here, not a TypeError inside
# transformers nor NaN logits from a negative epsilon. Numbers given as integers are kept as
# floats, since transformers' strict config classes refuse an int where they declare float.
_ENCODER = {"layer_norm_eps": "positive", "initializer_range": "std",
            "hidden_dropout_prob": "probability", "attention_probs_dropout_prob": "probability",
            "tie_word_embeddings": "bool"}
_BERT_LIKE = {**_ENCODER, "use_cache": "bool", "add_cross_attention": "bool"}
_CHECKED: dict[str, dict[str, str]] = {
    "gpt2": {"layer_norm_epsilon": "positive", "initializer_range": "std",
             "resid_pdrop": "probability", "embd_pdrop": "probability",
             "attn_pdrop": "probability", "summary_first_dropout": "probability",
             "scale_attn_weights": "bool", "scale_attn_by_inverse_layer_idx": "bool",
             "reorder_and_upcast_attn": "bool", "add_cross_attention": "bool",
             "use_cache": "bool", "tie_word_embeddings": "bool"},
    "opt": {"init_std": "std", "dropout": "probability", "attention_dropout": "probability",
            "layerdrop": "probability", "do_layer_norm_before": "bool",
            "_remove_final_layer_norm": "bool", "enable_bias": "bool",
            "layer_norm_elementwise_affine": "bool", "use_cache": "bool",
            "tie_word_embeddings": "bool"},
    "llama": {"rms_norm_eps": "positive", "rope_theta": "positive", "initializer_range": "std",
              "attention_dropout": "probability", "attention_bias": "bool", "mlp_bias": "bool",
              "use_cache": "bool", "tie_word_embeddings": "bool"},
    "bert": _BERT_LIKE, "roberta": _BERT_LIKE, "ibert": {**_ENCODER, "quant_mode": "bool"},
}


def checked_fields(f: Fields, model_type: str) -> dict[str, Any]:
    """The config with every field of _CHECKED[model_type] it sets validated (numbers as
    floats), and llama's nested rope_parameters likewise."""
    config = dict(f.config)
    for key, kind in _CHECKED.get(model_type, {}).items():
        if config.get(key) is None:  # absent or null: transformers' default
            continue
        config[key] = f.bool(key, False) if kind == "bool" else f.number(key, kind)
    rope = config.get("rope_parameters")
    if model_type == "llama" and rope is not None:
        if not isinstance(rope, Mapping):
            raise ConfigError(f.source, "rope_parameters", f"must be an object, got {rope!r}")
        if rope.get("rope_theta") is not None:
            theta = f.number("rope_theta", "positive", "rope_parameters")
            config["rope_parameters"] = {**rope, "rope_theta": theta}
    return config


def _gpt2(f: Fields) -> dict[str, Any]:
    hidden = f.int("n_embd")
    return dict(
        arch="gpt2", layers=f.int("n_layer"), hidden=hidden, heads=f.int("n_head"),
        kv_heads=f.int("n_head"),
        ffn=4 * hidden if f.config.get("n_inner") is None else f.int("n_inner"),
        vocab=f.int("vocab_size"), max_positions=f.int("n_positions"),
        activation=f.str("activation_function", "gelu_new"),
    )


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


_READERS: dict[str, Callable[[Fields], dict[str, Any]]] = {
    "gpt2": _gpt2,
    "opt": _opt,
    "llama": lambda f: llama_like(f, "llama"),
    **DECODER_READERS,
    **ENCODER_READERS,
}


# The standard fields of a transformers decoder config: an unknown model_type that has them
# all is read as LLaMA-shaped, the most common layout of today's decoders.
STANDARD_FIELDS = ("hidden_size", "num_hidden_layers", "num_attention_heads",
                   "intermediate_size", "vocab_size")
_ENCODER_DECODER = "an encoder-decoder model (its decoder cross-attends to an encoder)"
_VISION = "a vision model (it reads image patches, not tokens)"
_NOT_DECODERS = {
    **dict.fromkeys(("mamba", "mamba2", "falcon_mamba"),
                    "a state-space model (a selective scan, no attention)"),
    "rwkv": "a recurrent model (RWKV time mixing, no attention)",
    **dict.fromkeys(("t5", "mt5", "umt5", "longt5", "bart", "mbart", "pegasus", "marian",
                     "whisper", "switch_transformers"), _ENCODER_DECODER),
    **dict.fromkeys(("vit", "deit", "beit", "swin", "convnext", "resnet", "regnet", "dinov2",
                     "clip", "siglip", "efficientnet", "mobilenet_v2"), _VISION),
}


def _unknown_reader(model_type: str, f: Fields) -> Callable[[Fields], dict[str, Any]]:
    """Refuse a config that is not a decoder transformer, saying why; read an unknown one
    with the standard fields as LLaMA-shaped, with a one-line notice naming the assumption."""
    config = f.config
    if model_type in NOT_READ_ENCODERS:
        raise ConfigError(f.source, "model_type", NOT_READ_ENCODERS[model_type])
    why = _NOT_DECODERS.get(model_type) or (
        _ENCODER_DECODER if config.get("is_encoder_decoder") is True else None) or (
        _VISION if "image_size" in config else None)
    if why:
        raise ConfigError(f.source, "model_type", f"'{model_type}' is {why}, not a decoder "
                          "transformer; Archipelago plans transformer decoders and encoders")
    missing = [key for key in STANDARD_FIELDS if key not in config]
    if missing:
        raise UnknownNameError(f"model_type in {elide_path(f.source, 80)} (it lacks the "
                               f"standard decoder fields {', '.join(missing)})", model_type,
                               _READERS)
    warnings.warn(Notice(f"{f.source}: model_type '{model_type}' is not a known family; read "
                         "as a llama-style decoder (RMSNorm, SwiGLU, rotary positions, no "
                         "biases, untied LM head) from its standard fields"), stacklevel=3)
    return lambda fields: llama_like(fields, "llama")


def spec_from_hf_config(config: Mapping[str, Any] | Any, name: str, source: str) -> ModelSpec:
    """Build a ModelSpec from a config dict or any object with `to_dict()` (a transformers
    PretrainedConfig), so callers never need transformers imported here."""
    if not isinstance(config, Mapping):
        config = config.to_dict()
    fields = Fields(config, source)
    model_type = config.get("model_type")
    if not isinstance(model_type, str) or not model_type.strip():
        raise UnknownNameError(f"model_type in {elide_path(source, 80)}", str(model_type),
                               _READERS)
    read = _READERS.get(model_type) or _unknown_reader(model_type, fields)
    values = read(fields)
    try:
        return ModelSpec(name=name, hf_config=checked_fields(fields, model_type), **values)
    except ValidationError as err:
        raise ConfigError.from_validation(source, err) from None


def spec_from_config_file(path: Path) -> ModelSpec:
    """Read a local config.json (a file, or a checkpoint directory that holds one)."""
    file = path / "config.json" if is_dir(path, "config.json") else path
    config = load_json(file, "config.json")
    if not isinstance(config, dict):
        raise ConfigError(str(file), "config", "top level must be a JSON object")
    return spec_from_hf_config(config, name=file.parent.name or file.stem, source=str(file))


def _is_config_path(text: str) -> bool:
    """Anything on disk, or a .json that is not (so the error names the missing file); an
    empty name is no path: Path("") is the working directory."""
    return bool(text.strip()) and (probe(Path(text), "model") is not None
                                   or Path(text).suffix == ".json")


# Last of the built-ins: a zoo name or a DAG file wins over a same-named path.
register_family(Family("config.json", "model", matches=_is_config_path,
                       load=lambda text: spec_from_config_file(Path(text)),
                       choices=lambda: ("<path to config.json>",), order=60,
                       parameters=parameter_count))
