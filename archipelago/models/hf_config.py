"""Read Hugging Face `config.json` dictionaries into ModelSpecs without importing transformers.

Each architecture has its own field names; one small reader per `model_type` maps them onto
ModelSpec. A missing or ill-typed field is reported with the file and field name.
"""

import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from archipelago.errors import ConfigError, Notice, UnknownNameError, elide_path
from archipelago.families import Family, register_family
from archipelago.models.hf_families.llama import llama_like
from archipelago.models.hf_fields import Fields
from archipelago.models.model_families import Reader, model_families
from archipelago.models.spec import ModelSpec
from archipelago.models.weights import parameter_count
from archipelago.safe_read import is_dir, load_json, probe


def checked_fields(f: Fields, model_type: str) -> dict[str, Any]:
    """The config with every field its family checks (`ModelFamily.checked`: the fields
    transformers builds the reference model from besides the sizes its reader takes) that
    it sets validated, and those inside its objects (`checked_within`: LLaMA's nested
    rope_parameters) likewise: a bad one is one line here, not a TypeError inside
    transformers nor NaN logits from a negative epsilon. Numbers given as integers are kept
    as floats, since transformers' strict config classes refuse an int where they declare
    float."""
    config = dict(f.config)
    family = model_families().get(model_type)
    for key, kind in (family.checked if family else {}).items():
        if config.get(key) is None:  # absent or null: transformers' default
            continue
        config[key] = f.bool(key, False) if kind == "bool" else f.number(key, kind)
    for within, checked in (family.checked_within if family else {}).items():
        inner = config.get(within)
        if inner is None:
            continue
        if not isinstance(inner, Mapping):
            raise ConfigError(f.source, within, f"must be an object, got {inner!r}")
        config[within] = {**inner, **{key: f.number(key, kind, within)
                                      for key, kind in checked.items()
                                      if inner.get(key) is not None}}
    return config


# The standard fields of a transformers decoder config: an unknown model_type that has them
# all is read as LLaMA-shaped, the most common layout of today's decoders.
STANDARD_FIELDS = ("hidden_size", "num_hidden_layers", "num_attention_heads",
                   "intermediate_size", "vocab_size")
# Encoders transformers ships whose structure ModelSpec cannot hold, with why.
NOT_READ_ENCODERS = {
    "albert": "ALBERT shares one set of layer weights across all layers (num_hidden_groups) "
              "and embeds at a narrower width projected up; ModelSpec holds one weight set "
              "per layer, so its parameters would be counted num_hidden_layers times",
    "modernbert": "ModernBERT's pre-norm GeGLU encoder (no attention norm in its first layer, "
                  "local and global attention alternating, rotary positions) is not modelled",
}
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


def _unknown_reader(model_type: str, f: Fields) -> Reader:
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
                               model_families())
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
                               model_families())
    family = model_families().get(model_type)
    read = family.reader if family else _unknown_reader(model_type, fields)
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
