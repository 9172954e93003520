"""Model specs against transformers models built from the same config (on the meta device,
so even 7B-parameter models cost no memory)."""

import json
import re

import pytest
import torch
import transformers

from archipelago.errors import ConfigError, UnknownNameError
from archipelago.models.hf_config import spec_from_hf_config
from archipelago.models.weights import parameter_count
from archipelago.models.zoo import model_names, resolve_model, zoo_configs

TINY = {
    "gpt2": {"model_type": "gpt2", "n_embd": 48, "n_head": 6, "n_layer": 3, "vocab_size": 101,
             "n_positions": 40, "n_inner": 100},
    "opt": {"model_type": "opt", "hidden_size": 32, "num_attention_heads": 4,
            "num_hidden_layers": 2, "ffn_dim": 80, "vocab_size": 90,
            "max_position_embeddings": 30, "word_embed_proj_dim": 16,
            "activation_function": "relu"},
    "llama": {"model_type": "llama", "hidden_size": 32, "intermediate_size": 88,
              "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2,
              "vocab_size": 77, "max_position_embeddings": 64},
    "bert": {"model_type": "bert", "hidden_size": 32, "num_attention_heads": 4,
             "num_hidden_layers": 2, "intermediate_size": 64, "vocab_size": 50,
             "max_position_embeddings": 20, "type_vocab_size": 3},
}


def transformers_parameter_count(config: dict, decoder: bool) -> int:
    cfg = dict(config)
    conf = transformers.AutoConfig.for_model(cfg.pop("model_type"), **cfg)
    with torch.device("meta"):
        if decoder:
            model = transformers.AutoModelForCausalLM.from_config(conf)
        else:
            model = transformers.AutoModel.from_config(conf, add_pooling_layer=False)
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("name", model_names())
def test_zoo_parameter_counts_match_transformers(name: str) -> None:
    spec = resolve_model(name)
    assert parameter_count(spec) == transformers_parameter_count(zoo_configs()[name],
                                                                 spec.is_decoder)


@pytest.mark.parametrize("arch", sorted(TINY))
def test_tiny_configs_with_unusual_fields_match(arch: str) -> None:
    """GQA, OPT's projection dim, an explicit n_inner and 3 token types all count right."""
    spec = spec_from_hf_config(TINY[arch], name=arch, source="test")
    assert parameter_count(spec) == transformers_parameter_count(TINY[arch], spec.is_decoder)


def test_transformers_config_object_is_accepted() -> None:
    conf = transformers.GPT2Config(**{k: v for k, v in TINY["gpt2"].items() if k != "model_type"})
    spec = spec_from_hf_config(conf, name="obj", source="object")
    assert (spec.hidden, spec.heads, spec.ffn, spec.layers) == (48, 6, 100, 3)


def test_dfx_table_one_shapes() -> None:
    """seeds/001 Table I."""
    for name, dims in {"gpt2-345m": (1024, 16, 24), "gpt2-774m": (1280, 20, 36),
                       "gpt2-1.5b": (1536, 24, 48)}.items():
        spec = resolve_model(name)
        assert (spec.hidden, spec.heads, spec.layers, spec.head_dim) == (*dims, 64)


def test_local_config_json_path(tmp_path) -> None:
    path = tmp_path / "my-model" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(TINY["llama"]))
    assert resolve_model(str(path)).kv_heads == 2
    assert resolve_model(str(path.parent)).name == "my-model"


def test_malformed_config_names_file_and_field(tmp_path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**TINY["gpt2"], "n_head": "six"}))
    with pytest.raises(ConfigError, match=r"config\.json: field 'n_head'"):
        resolve_model(str(path))
    path.write_text(json.dumps({k: v for k, v in TINY["gpt2"].items() if k != "n_layer"}))
    with pytest.raises(ConfigError, match="'n_layer': missing"):
        resolve_model(str(path))
    path.write_text("{not json")
    with pytest.raises(ConfigError, match="invalid JSON"):
        resolve_model(str(path))


def test_indivisible_heads_in_config_is_reported(tmp_path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**TINY["gpt2"], "n_head": 5}))
    with pytest.raises(ConfigError, match="not divisible by heads 5"):
        resolve_model(str(path))


def test_unknown_model_lists_choices() -> None:
    with pytest.raises(UnknownNameError, match="gpt2-345m"):
        resolve_model("gpt5")
    with pytest.raises(ConfigError, match=r"model_type 'mamba9' is unknown to transformers"):
        spec_from_hf_config({"model_type": "mamba9"}, name="x", source="cfg.json")


def test_activation_names_are_exactly_those_transformers_builds() -> None:
    """The edge refuses any activation a reference model could not be built with, and
    accepts every one it could."""
    from transformers.activations import ACT2FN

    from archipelago.models.spec import ACTIVATIONS

    assert set(ACTIVATIONS) == set(ACT2FN)
    config = transformers.GPT2Config(n_layer=1, n_embd=32, n_head=2,
                                     activation_function="gleu").to_dict()
    with pytest.raises(ConfigError, match="unknown activation 'gleu'; valid: gelu, "):
        spec_from_hf_config(config, name="typo", source="config.json")


def test_opt_without_an_activation_takes_the_transformers_default() -> None:
    config = transformers.OPTConfig(num_hidden_layers=1, hidden_size=32, ffn_dim=64,
                                    num_attention_heads=2).to_dict()
    del config["activation_function"]
    spec = spec_from_hf_config(config, name="opt-minimal", source="config.json")
    assert spec.activation == transformers.OPTConfig().activation_function == "relu"


@pytest.mark.parametrize(("arch", "field", "value", "message"), [
    ("gpt2", "layer_norm_epsilon", -1, "must be a finite number > 0, got -1"),
    ("gpt2", "layer_norm_epsilon", float("nan"), "must be a finite number > 0, got nan"),
    ("gpt2", "tie_word_embeddings", "yes", "must be true or false, got 'yes'"),
    ("gpt2", "attn_pdrop", 1.5, "must be a probability in [0, 1], got 1.5"),
    ("gpt2", "initializer_range", -0.02, "must be a standard deviation in [0, 1]"),
    ("gpt2", "initializer_range", 1e308, "must be a standard deviation in [0, 1], got 1e+308"),
    ("opt", "do_layer_norm_before", 1, "must be true or false, got 1"),
    ("llama", "rope_theta", -1.0, "must be a finite number > 0, got -1.0"),
    ("llama", "rms_norm_eps", float("inf"), "must be a finite number > 0, got inf"),
    ("llama", "rope_parameters", {"rope_theta": 0}, ".rope_theta': must be a finite"),
    ("llama", "rope_parameters", 5, "must be an object, got 5"),
    ("bert", "layer_norm_eps", True, "must be a finite number > 0, got True"),
])
def test_fields_the_reference_model_is_built_from_are_checked_at_the_edge(
        arch: str, field: str, value: object, message: str) -> None:
    with pytest.raises(ConfigError, match=rf"^cfg.json: field '{field}.*{re.escape(message)}"):
        spec_from_hf_config({**TINY[arch], field: value}, name="bad", source="cfg.json")


def test_checked_fields_are_those_transformers_types_and_integers_become_floats() -> None:
    """Every field checked is one transformers' config class declares (as bool where
    checked as one); an integer epsilon, which transformers' strict class refuses, is
    handed to it as a float."""
    import dataclasses

    from archipelago.models.model_families import model_families

    for model_type, family in model_families().items():
        checked = family.checked
        declared = {f.name: f.type for f in dataclasses.fields(
            transformers.AutoConfig.for_model(model_type).__class__)}
        for name, kind in checked.items():
            if name == "rope_theta":  # llama: read into rope_parameters by transformers
                continue
            assert name in declared, (model_type, name)
            assert (declared[name] in (bool, "bool")) == (kind == "bool"), (model_type, name)
    spec = spec_from_hf_config({**TINY["llama"], "rms_norm_eps": 1, "rope_theta": 500},
                               name="ints", source="cfg.json")
    config = dict(spec.hf_config)
    built = transformers.AutoConfig.for_model(config.pop("model_type"), **config)
    assert built.rms_norm_eps == 1.0 and built.rope_parameters["rope_theta"] == 500.0
