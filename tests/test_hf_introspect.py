"""Config files read from the model transformers itself builds (models/hf_meta.py,
hf_introspect.py, hf_modules.py): every causal LM transformers ships either plans with its
exact parameter count or is refused in one line; the hand-written families agree with the
module tree; what is read is cached by content, and a second read imports no torch."""

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch
import transformers

from archipelago.cache_dir import DIR_ENV
from archipelago.errors import ArchipelagoError, ConfigError
from archipelago.models import hf_meta
from archipelago.models.hf_config import spec_from_config_file, spec_from_hf_config
from archipelago.models.model_families import get_model_family, model_families
from archipelago.models.spec import ModelSpec
from archipelago.models.weights import parameter_count
from archipelago.models.zoo import model_names, zoo_configs, zoo_model
from benchmarks.model_sweep import causal_lm_types, default_config, read_default

TYPES = causal_lm_types()
# Fields both readers set that introspection sees in the module tree.
STRUCTURE = ("layers", "hidden", "heads", "kv_heads", "vocab", "norm", "norm_affine",
             "attn_bias", "out_bias", "mlp_bias", "gated_ffn", "tied_embeddings", "head_dim",
             "qk_norm", "sublayer_norms", "moe", "mla", "lm_head_bias")


def meta_count(config: dict, decoder: bool = True) -> int:
    """transformers' own count, built here from the config, apart from hf_meta."""
    with torch.device("meta"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        built = transformers.AutoConfig.for_model(**config)
        if decoder:
            model = transformers.AutoModelForCausalLM.from_config(built)
        else:
            model = transformers.AutoModel.from_config(built, add_pooling_layer=False)
    return sum(p.numel() for p in model.parameters())


def test_the_sweep_covers_transformers_causal_lm_mapping() -> None:
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    assert sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES) == TYPES and len(TYPES) > 100


@pytest.mark.parametrize("model_type", TYPES)
def test_every_causal_lm_plans_with_its_exact_count_or_is_refused_in_one_line(
        model_type: str, tmp_path: Path) -> None:
    """Through the public path: a spec whose count equals transformers' (built again here),
    or the project's one-line error; any other exception fails the test."""
    row = read_default(model_type, tmp_path)
    if row.reason is not None:
        assert "\n" not in row.reason and row.reason.strip()
        return
    config = json.loads((tmp_path / model_type / "config.json").read_text())
    spec = spec_from_config_file(tmp_path / model_type)
    assert spec.arch == config["model_type"]  # gpt-sw3 ships GPT-2's config
    assert row.parameters == parameter_count(spec) == meta_count(config, spec.is_decoder)


def _hand_families() -> list[str]:
    return sorted(a for a, f in model_families().items()
                  if f.decoder and f.reader.__module__.startswith("archipelago.models.hf_fam"))


@pytest.mark.parametrize("arch", _hand_families())
def test_each_hand_family_agrees_with_the_module_tree(arch: str) -> None:
    """The hand reader's count is transformers', and where introspection maps the same
    default config, every structure field it can see agrees."""
    config = default_config(arch)
    spec = spec_from_hf_config(config, arch, "cfg.json")
    read = hf_meta.transformers_read(config, decoder=True)
    assert read is not None and read.parameters == parameter_count(spec) == meta_count(config)
    if read.values is None:  # GPT-2's Conv1D, parallel blocks: the count alone is checked
        assert read.refusal
        return
    seen = ModelSpec(name=arch, **{**read.values, "arch": arch})
    for field in STRUCTURE:
        assert getattr(seen, field) == getattr(spec, field), field
    assert seen.sliding_layers == spec.sliding_layers or not spec.sliding_layers


@pytest.mark.parametrize("name", model_names())
def test_each_zoo_model_has_transformers_count(name: str) -> None:
    """The zoo plans without torch (no check when it is resolved): checked here instead."""
    config = zoo_configs()[name]
    spec = zoo_model(name)
    assert parameter_count(spec) == meta_count(config, decoder=spec.is_decoder)


def test_introspection_reads_the_families_that_carry_no_reader_by_hand() -> None:
    """OLMoE (64 experts, top 8), MiniCPM3 (latent attention), Gemma-3 (sliding layers):
    each field against its default config's own number; Cohere's parallel block (its
    decoder layer's forward() runs attention and MLP on one norm's output)."""
    olmoe = transformers.AutoConfig.for_model("olmoe")
    spec = spec_from_hf_config(olmoe.to_dict(), "o", "cfg.json")
    assert spec.moe is not None and (spec.moe.experts, spec.moe.per_token,
                                     spec.moe.expert_ffn) == (
        olmoe.num_experts, olmoe.num_experts_per_tok, olmoe.intermediate_size)
    assert spec.qk_norm == "width" and spec.features <= get_model_family("olmoe").features
    mini = transformers.AutoConfig.for_model("minicpm3")
    mla = spec_from_hf_config(mini.to_dict(), "m", "cfg.json").mla
    assert mla is not None and (mla.q_rank, mla.kv_rank, mla.rope_dim, mla.nope_dim,
                                mla.v_dim) == (mini.q_lora_rank, mini.kv_lora_rank,
                                               mini.qk_rope_head_dim, mini.qk_nope_head_dim,
                                               mini.v_head_dim)
    gemma = transformers.AutoConfig.for_model("gemma3_text")
    spec = spec_from_hf_config(gemma.to_dict(), "g", "cfg.json")
    slides = [i for i, k in enumerate(gemma.layer_types) if k == "sliding_attention"]
    assert list(spec.sliding_layers) == slides and spec.sliding_window == gemma.sliding_window
    assert get_model_family("gemma3_text").numerics is None
    cohere = spec_from_hf_config(default_config("cohere"), "c", "cfg.json")
    assert cohere.parallel_block and cohere.shared_block_norm  # one norm feeds both
    assert cohere.norm == "layernorm" and not cohere.norm_bias


@pytest.mark.parametrize(("model_type", "fields", "why"), [
    ("gpt_oss", {}, r"model\.layers\.0\.self_attn \(GptOssAttention\) holds its own "
                    r"parameters \['sinks'\]"),
    ("jamba", {}, r"model\.layers\.0\.mamba \(JambaMambaMixer\) is not read"),
    ("nanochat", {}, r"model\.layers\.0 \(NanoChatDecoderLayer\) holds \['mlp', "
                     r"'self_attn'\]"),  # parameter-free norms: where they run is not seen
    ("llama", dict(num_hidden_layers=10**6), r"at most 1024"),
    ("qwen3_next", dict(num_experts=10**6), r"num_experts: must be at most 4096, got 1000000"),
])
def test_what_does_not_map_is_named_in_one_line(model_type: str, fields: dict,
                                                why: str) -> None:
    config = {**transformers.AutoConfig.for_model(model_type).to_dict(), **fields}
    with pytest.raises(ConfigError, match=why) as err:
        spec_from_hf_config(config, "x", "cfg.json")
    assert "\n" not in str(err.value)


def test_a_second_read_comes_from_the_cache_without_torch(tmp_path: Path,
                                                          monkeypatch) -> None:
    """One small JSON per config under <cache>/config-reads; a fresh process reads the
    same file from it without importing torch or transformers."""
    monkeypatch.setenv(DIR_ENV, str(tmp_path / "cache"))
    folder = tmp_path / "olmoe"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(default_config("olmoe")))
    first = spec_from_config_file(folder)
    entries = list((tmp_path / "cache" / hf_meta.FOLDER).iterdir())
    assert len(entries) == 1 and entries[0].suffix == ".json"
    code = ("import sys\nfrom pathlib import Path\n"
            "from archipelago.models.hf_config import spec_from_config_file\n"
            f"print(spec_from_config_file(Path({str(folder)!r})).model_dump_json())\n"
            "assert not {'torch', 'transformers'} & set(sys.modules), 'torch imported'\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, DIR_ENV: str(tmp_path / "cache")}, timeout=120)
    assert out.returncode == 0, out.stderr
    assert ModelSpec.model_validate_json(out.stdout) == first


def test_a_damaged_cache_entry_is_read_again(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(DIR_ENV, str(tmp_path))
    config = default_config("helium")
    first = spec_from_hf_config(config, "h", "cfg.json")
    (entry,) = (tmp_path / hf_meta.FOLDER).iterdir()
    entry.write_text('{"parameters": "many"')
    assert spec_from_hf_config(config, "h", "cfg.json") == first
    assert json.loads(entry.read_text())["parameters"] == parameter_count(first)


def test_without_transformers_hand_families_read_and_others_say_what_to_install(
        monkeypatch) -> None:
    monkeypatch.setattr(hf_meta, "transformers_version", lambda: None)
    spec = spec_from_hf_config(default_config("mistral"), "m", "cfg.json")
    assert spec.arch == "mistral"
    with pytest.raises(ArchipelagoError, match=r"needs torch and transformers: pip install "
                                               r"'archipelago\[emulate\]'"):
        spec_from_hf_config({**default_config("helium"), "model_type": "helium"}, "h", "c")


def test_a_count_that_differs_from_transformers_is_refused_as_a_defect(monkeypatch) -> None:
    """A hand reader that missed a tensor is never planned: here transformers' count is
    made one more than the reader's."""
    real = hf_meta.transformers_read

    def off_by_one(config: dict, decoder: bool) -> hf_meta.MetaRead | None:
        read = real(config, decoder)
        assert read is not None and read.parameters is not None
        return hf_meta.MetaRead(read.parameters + 1, read.values, read.refusal)

    monkeypatch.setattr("archipelago.models.hf_config.transformers_read", off_by_one)
    with pytest.raises(ConfigError, match=r"a defect: Archipelago reads [\d,]+ parameters "
                                          r"where transformers builds [\d,]+"):
        spec_from_hf_config(default_config("mistral"), "m", "cfg.json")


def test_a_spec_sent_to_another_process_brings_its_family(tmp_path: Path) -> None:
    """`archi compare` sends specs to Dask worker processes: one read from transformers'
    model there names a family that process has not read."""
    import pickle

    spec = spec_from_hf_config(default_config("olmoe"), "o", "cfg.json")
    (tmp_path / "spec.pickle").write_bytes(pickle.dumps(spec))
    code = ("import pickle, sys\n"
            f"spec = pickle.loads(open({str(tmp_path / 'spec.pickle')!r}, 'rb').read())\n"
            "print(spec.is_decoder, sorted(f.key for f in spec.features))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"True {sorted(f.key for f in spec.features)}"
