"""Read Hugging Face `config.json` dictionaries into ModelSpecs without importing transformers.

Each architecture has its own field names; one small reader per `model_type` maps them onto
ModelSpec. A missing or ill-typed field is reported with the file and field name.
"""

import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from archipelago.errors import ConfigError, UnknownNameError
from archipelago.families import Family, register_family
from archipelago.models.spec import ModelSpec
from archipelago.safe_read import is_dir, load_json, probe


class _Fields:
    """Typed access to a config dictionary that names the source on every failure."""

    def __init__(self, config: Mapping[str, Any], source: str) -> None:
        self.config, self.source = config, source

    def int(self, key: str, default: int | None = None) -> int:
        value = self.config.get(key, default)
        if value is None:
            raise ConfigError(self.source, key, "missing (an integer is required)")
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ConfigError(self.source, key, f"must be a positive integer, got {value!r}")
        return value

    def str(self, key: str, default: str | None = None) -> str:
        value = self.config.get(key, default)
        if not isinstance(value, str):
            raise ConfigError(self.source, key, f"must be a string, got {value!r}")
        return value

    def bool(self, key: str, default: bool) -> bool:
        value = self.config.get(key, default)
        if not isinstance(value, bool):
            raise ConfigError(self.source, key, f"must be true or false, got {value!r}")
        return value

    def number(self, key: str, kind: str, within: str = "") -> float:
        """A float field of kind "positive", "std" or "probability" (see _CHECKED), at the
        top level or inside the object `within`."""
        value = (self.config[within] if within else self.config)[key]
        key = f"{within}.{key}" if within else key
        low, high, zero_ok, need = _NUMBER_KINDS[kind]
        if (isinstance(value, bool) or not isinstance(value, int | float)
                or not math.isfinite(value) or not low <= value <= high
                or (value == 0 and not zero_ok)):
            raise ConfigError(self.source, key, f"must be {need}, got {value!r}")
        return float(value)


# Fields transformers builds the reference model from besides the sizes the readers below
# take (its 5.x config classes): a bad one is one line here, not a TypeError inside
# transformers nor NaN logits from a negative epsilon. Numbers given as integers are kept as
# floats, since transformers' strict config classes refuse an int where they declare float.
_NUMBER_KINDS = {  # kind: (low, high, zero allowed, what the message asks for)
    "positive": (0.0, math.inf, False, "a finite number > 0"),
    # weights drawn wider than 1 overflow fp16 activations (real configs use about 0.02)
    "std": (0.0, 1.0, True, "a standard deviation in [0, 1]"),
    "probability": (0.0, 1.0, True, "a probability in [0, 1]"),
}
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


def checked_fields(f: _Fields, model_type: str) -> dict[str, Any]:
    """The config with every field of _CHECKED[model_type] it sets validated (numbers as
    floats), and llama's nested rope_parameters likewise."""
    config = dict(f.config)
    for key, kind in _CHECKED[model_type].items():
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


def _gpt2(f: _Fields) -> dict[str, Any]:
    hidden = f.int("n_embd")
    return dict(
        arch="gpt2", layers=f.int("n_layer"), hidden=hidden, heads=f.int("n_head"),
        kv_heads=f.int("n_head"),
        ffn=4 * hidden if f.config.get("n_inner") is None else f.int("n_inner"),
        vocab=f.int("vocab_size"), max_positions=f.int("n_positions"),
        activation=f.str("activation_function", "gelu_new"),
    )


def _opt(f: _Fields) -> dict[str, Any]:
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


def _llama(f: _Fields) -> dict[str, Any]:
    heads = f.int("num_attention_heads")
    return dict(
        arch="llama", layers=f.int("num_hidden_layers"), hidden=f.int("hidden_size"),
        heads=heads, kv_heads=f.int("num_key_value_heads", heads),
        ffn=f.int("intermediate_size"), vocab=f.int("vocab_size"),
        max_positions=f.int("max_position_embeddings"), activation=f.str("hidden_act", "silu"),
        norm="rmsnorm", gated_ffn=True, attn_bias=f.bool("attention_bias", False),
        mlp_bias=f.bool("mlp_bias", False), tied_embeddings=f.bool("tie_word_embeddings", False),
        learned_positions=False,
    )


def _bert_like(arch: str) -> Callable[[_Fields], dict[str, Any]]:
    def read(f: _Fields) -> dict[str, Any]:
        heads = f.int("num_attention_heads")
        return dict(
            arch=arch, layers=f.int("num_hidden_layers"), hidden=f.int("hidden_size"),
            heads=heads, kv_heads=heads, ffn=f.int("intermediate_size"),
            vocab=f.int("vocab_size"), max_positions=f.int("max_position_embeddings"),
            activation=f.str("hidden_act", "gelu"), pre_norm=False, final_norm=False,
            embedding_norm=True, type_vocab=f.int("type_vocab_size", 2),
            position_offset=0 if arch == "bert" else 2,
        )

    return read


_READERS: dict[str, Callable[[_Fields], dict[str, Any]]] = {
    "gpt2": _gpt2,
    "opt": _opt,
    "llama": _llama,
    "bert": _bert_like("bert"),
    "roberta": _bert_like("roberta"),
    "ibert": _bert_like("ibert"),
}


def spec_from_hf_config(config: Mapping[str, Any] | Any, name: str, source: str) -> ModelSpec:
    """Build a ModelSpec from a config dict or any object with `to_dict()` (a transformers
    PretrainedConfig), so callers never need transformers imported here."""
    if not isinstance(config, Mapping):
        config = config.to_dict()
    fields = _Fields(config, source)
    model_type = config.get("model_type")
    if not isinstance(model_type, str) or model_type not in _READERS:
        raise UnknownNameError(f"model_type in {source}", str(model_type), _READERS)
    values = _READERS[model_type](fields)
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
                       choices=lambda: ("<path to config.json>",), order=60))
