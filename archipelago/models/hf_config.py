"""Read Hugging Face `config.json` dictionaries into ModelSpecs.

A built-in family (models/hf_families/) reads its own field names, without transformers;
any other `model_type` is read from the model transformers builds from the config
(hf_meta.py, hf_introspect.py) and registered as a family of its own. Where transformers is
installed, every spec's parameter count is checked against that model's (cached by the
config's content). A missing or ill-typed field is reported with the file and field name.
"""

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from archipelago.errors import ConfigError, UnknownNameError, elide_path
from archipelago.families import Family, register_family
from archipelago.models.hf_fields import Fields
from archipelago.models.hf_meta import INSTALL, transformers_read
from archipelago.models.model_families import (
    ModelFamily,
    model_families,
    register_model_family,
    unregister_model_family,
)
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


# Encoders transformers ships whose structure ModelSpec cannot hold, with why.
NOT_READ_ENCODERS = {
    "albert": "ALBERT shares one set of layer weights across all layers (num_hidden_groups) "
              "and embeds at a narrower width projected up; ModelSpec holds one weight set "
              "per layer, so its parameters would be counted num_hidden_layers times",
    "modernbert": "ModernBERT's pre-norm GeGLU encoder (no attention norm in its first layer, "
                  "local and global attention alternating, rotary positions) is not modelled",
}


def _read_introspected(f: Fields) -> dict[str, Any]:
    """The reader of every family registered from transformers' own model: its fields as
    hf_meta.py read them from the modules (cached), or its one-line refusal."""
    model_type = f.config.get("model_type")
    read = transformers_read(f.config, decoder=True)
    if read is None:
        raise ConfigError(f.source, "model_type", f"'{model_type}' is no built-in family; "
                          "reading it from transformers' own model needs torch and "
                          f"transformers: {INSTALL}")
    if read.values is None:
        raise ConfigError(f.source, "model_type", f"'{model_type}' is refused: {read.refusal}")
    return {**read.values, "arch": model_type}


def _family(model_type: str, fields: Fields) -> ModelFamily:
    """The registered family of `model_type`, or one registered now for a decoder
    transformers builds and hf_introspect.py maps (its features grow as specs use them;
    no names or numerics: the kinds that load or compute weights refuse it by name)."""
    family = model_families().get(model_type)
    if family is not None:
        return family
    if model_type in NOT_READ_ENCODERS:
        raise ConfigError(fields.source, "model_type", NOT_READ_ENCODERS[model_type])
    _read_introspected(fields)  # refuses before anything is registered
    return register_read_family(model_type)


def register_read_family(model_type: str) -> ModelFamily:
    """The family of a type read from transformers' model (its features are added as its
    specs show them: `_with_features`)."""
    return register_model_family(ModelFamily(model_type, _read_introspected, decoder=True,
                                             features=frozenset()))


def _with_features(family: ModelFamily, spec: ModelSpec) -> None:
    """An introspected family declares the features its models were found to use."""
    found = spec.features
    if family.reader is _read_introspected and not found <= family.features:
        unregister_model_family(family.arch)
        register_model_family(replace(family, features=family.features | found))


def _verified(spec: ModelSpec, config: Mapping[str, Any], source: str) -> ModelSpec:
    """The spec, once its parameter count equals that of the model transformers builds from
    the same config (where transformers is installed and builds it: a built-in family's
    reader also reads configs transformers refuses, such as a tiny vocabulary below the
    default pad_token_id): a hand reader's miss is refused as the defect it is."""
    read = transformers_read(config, decoder=spec.is_decoder)
    if read is None or read.parameters is None:  # a hand family's reader stands alone
        return spec
    ours = parameter_count(spec)
    if ours != read.parameters:
        raise ConfigError(source, "model_type", f"a defect: Archipelago reads {ours:,} "
                          f"parameters where transformers builds {read.parameters:,}; not "
                          "planned (please report it)")
    return spec


def spec_from_hf_config(config: Mapping[str, Any] | Any, name: str, source: str,
                        verify: bool = True) -> ModelSpec:
    """Build a ModelSpec from a config dict or any object with `to_dict()` (a transformers
    PretrainedConfig), so callers never need transformers imported here. `verify`: check
    its parameter count against transformers' (off for the built-in zoo, which must plan
    without torch; tests/test_hf_introspect.py checks those counts)."""
    if not isinstance(config, Mapping):
        config = config.to_dict()
    fields = Fields(config, source)
    model_type = config.get("model_type")
    if not isinstance(model_type, str) or not model_type.strip():
        raise UnknownNameError(f"model_type in {elide_path(source, 80)}", str(model_type),
                               model_families())
    family = _family(model_type, fields)
    values = family.reader(fields)
    try:
        spec = ModelSpec(name=name, hf_config=checked_fields(fields, model_type), **values)
    except ValidationError as err:
        raise ConfigError.from_validation(source, err) from None
    _with_features(family, spec)
    return _verified(spec, config, source) if verify else spec


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
