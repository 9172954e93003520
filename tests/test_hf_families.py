"""Every transformers decoder (and BERT-shaped encoder) family read by its fields, checked
against the model transformers itself builds from the same config on the meta device (no
memory, no download; DeepSeek-V3's 671B parameters cost nothing), and the graph's per-token
work against that model's weight matrices."""

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers
from typer.testing import CliRunner

from archipelago.cli import app
from archipelago.emulate.errors import EmulationError
from archipelago.errors import ConfigError, PartitionError
from archipelago.estimate.workload import Generation
from archipelago.hardware.cluster import resolve_cluster
from archipelago.models.graph import build_graph
from archipelago.models.graph_ops import Phase, decode
from archipelago.models.hf_config import spec_from_hf_config
from archipelago.models.spec import ModelSpec
from archipelago.models.weights import parameter_count
from archipelago.strategies.registry import get_strategy
from archipelago.strategies.tensor_parallel.emulate.rank import check
from archipelago.strategies.tensor_parallel.plan import CommStep

WORK = Generation(8, 8)  # what a split would be chosen for: these plans are rings

DECODERS = ("GPT2", "OPT", "Llama", "Mistral", "Mixtral", "Qwen2", "Qwen2Moe", "Qwen3",
            "Qwen3Moe", "Phi", "Phi3", "Gemma", "Gemma2", "GPTNeoX", "Falcon", "Bloom", "GPTJ",
            "CodeGen", "StableLm", "Olmo", "Olmo2", "Granite", "DeepseekV3")
# Non-default switches each family's reader must follow (small sizes keep them fast).
VARIANTS = [
    ("Falcon", dict(new_decoder_architecture=True, num_kv_heads=8, num_attention_heads=32,
                    hidden_size=256, num_hidden_layers=2, bias=True, alibi=True)),
    ("Falcon", dict(new_decoder_architecture=True, num_kv_heads=8, num_attention_heads=32,
                    hidden_size=256, num_hidden_layers=2, num_ln_in_parallel_attn=1)),
    ("Falcon", dict(parallel_attn=False, multi_query=False, hidden_size=256,
                    num_attention_heads=8, num_hidden_layers=2)),
    ("StableLm", dict(qk_layernorm=True, use_parallel_residual=True, use_qkv_bias=True,
                      num_key_value_heads=8, hidden_size=256, num_hidden_layers=2)),
    ("Phi", dict(qk_layernorm=True, num_hidden_layers=2, hidden_size=256,
                 num_key_value_heads=8)),
    ("Qwen2", dict(use_sliding_window=True, sliding_window=64, max_window_layers=1,
                   num_hidden_layers=3, hidden_size=128, num_attention_heads=4,
                   num_key_value_heads=2, intermediate_size=64)),
    ("Qwen2Moe", dict(decoder_sparse_step=2, mlp_only_layers=[1], num_hidden_layers=4,
                      hidden_size=128, num_attention_heads=4, num_key_value_heads=2,
                      qkv_bias=False)),
    ("DeepseekV3", dict(q_lora_rank=None, num_hidden_layers=4, first_k_dense_replace=1,
                        hidden_size=256, n_shared_experts=2, attention_bias=True,
                        n_routed_experts=16, n_group=4, topk_group=2, num_experts_per_tok=4)),
    ("GPTNeoX", dict(use_parallel_residual=False, attention_bias=False, num_hidden_layers=2)),
    ("Gemma2", dict(tie_word_embeddings=False, head_dim=64, num_hidden_layers=3)),
    ("Olmo", dict(attention_bias=True, tie_word_embeddings=True, num_hidden_layers=2)),
    ("Llama", dict(head_dim=64, num_hidden_layers=2, attention_bias=True, mlp_bias=True)),
    ("Bloom", dict(n_layer=3, hidden_size=128, n_head=4, tie_word_embeddings=False)),
    ("GPTJ", dict(n_inner=1000, n_layer=2, tie_word_embeddings=True)),
]
ENCODERS = [("DistilBert", {}), ("XLMRoberta", {}), ("DebertaV2", {}),
            ("Electra", dict(embedding_size=256))]


def config(family: str, **fields: object) -> transformers.PretrainedConfig:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return getattr(transformers, f"{family}Config")(**fields)


def meta_model(cfg: transformers.PretrainedConfig, decoder: bool = True) -> torch.nn.Module:
    with torch.device("meta"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if decoder:
            return transformers.AutoModelForCausalLM.from_config(cfg)
        try:
            return transformers.AutoModel.from_config(cfg, add_pooling_layer=False)
        except TypeError:  # DistilBERT and DeBERTa have no pooler to leave out
            return transformers.AutoModel.from_config(cfg)


def count(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("family", DECODERS)
def test_default_config_parameters_match_transformers(family: str) -> None:
    cfg = config(family)
    spec = spec_from_hf_config(cfg, family, "test")
    assert spec.is_decoder and spec.arch == cfg.model_type
    assert parameter_count(spec) == count(meta_model(cfg))


@pytest.mark.parametrize(("family", "fields"), VARIANTS,
                         ids=[f"{f}-{i}" for i, (f, _) in enumerate(VARIANTS)])
def test_switched_fields_match_transformers(family: str, fields: dict) -> None:
    """MQA vs GQA vs new-architecture Falcon, per-head q/k norms, qkv biases without the
    output's, sparse steps and dense-only layers, MLA without a query bottleneck, ..."""
    cfg = config(family, **fields)
    assert parameter_count(spec_from_hf_config(cfg, family, "test")) == count(meta_model(cfg))


@pytest.mark.parametrize(("family", "fields"), ENCODERS, ids=[f for f, _ in ENCODERS])
def test_encoder_parameters_match_transformers(family: str, fields: dict) -> None:
    cfg = config(family, **fields)
    spec = spec_from_hf_config(cfg, family, "test")
    assert not spec.is_decoder
    assert parameter_count(spec) == count(meta_model(cfg, decoder=False))


@pytest.mark.parametrize(("family", "fields", "why"), [
    ("Albert", {}, "shares one set of layer weights"),
    ("ModernBert", {}, "ModernBERT"),
    ("Electra", {}, "embedding_size.*width 128 projected"),
    ("DebertaV2", dict(relative_attention=True), "disentangled attention"),
    ("Mamba", {}, r"backbone\.layers\.0\.mixer \(MambaMixer\) is not read"),
    ("T5", {}, "an encoder-decoder model with no causal-LM class"),
    ("ViT", {}, "'vit' is a model with no causal-LM class"),
])
def test_unreadable_configs_are_refused_saying_why(family: str, fields: dict,
                                                   why: str) -> None:
    with pytest.raises(ConfigError, match=why) as err:
        spec_from_hf_config(config(family, **fields), family, "cfg.json")
    assert "\n" not in str(err.value) and str(err.value).startswith("cfg.json: ")


def test_an_unknown_type_is_refused_not_read_as_another_family() -> None:
    """What transformers does not know is not guessed at (it once read as LLaMA)."""
    fields = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=96, vocab_size=100, max_position_embeddings=32)
    with pytest.raises(ConfigError, match="model_type 'newlm' is unknown to transformers"):
        spec_from_hf_config({"model_type": "newlm", **fields}, "x", "cfg.json")


def layer_matrix_macs(model: torch.nn.Module, spec: ModelSpec) -> float:
    """Multiply-accumulates per token in the blocks, from transformers' own weights: every
    matrix once, stacked experts (3-D) at the fraction a token routes to."""
    share = spec.moe.per_token / spec.moe.experts if spec.moe else 0
    return sum(p.numel() * (share if p.dim() == 3 else 1)
               for name, p in model.named_parameters()
               if p.dim() >= 2 and (".layers." in name or ".h." in name))


@pytest.mark.parametrize("family", DECODERS)
def test_graph_per_token_matmuls_are_the_models_matrices(family: str) -> None:
    """Explicit head_dim, GQA, fused and parallel blocks, routed + shared experts, MLA: a
    decode step's linear ops multiply each token by exactly the matrices it uses."""
    cfg = config(family)
    spec = spec_from_hf_config(cfg, family, "test")
    graph = build_graph(spec)
    macs = sum(len(ids) * sum(op.fan_in * op.fan_out for op in ops if op.kind == "linear")
               for ops, ids in graph.variants)
    assert sum(len(ids) for _, ids in graph.variants) == spec.layers
    assert macs == pytest.approx(layer_matrix_macs(meta_model(cfg), spec), rel=1e-12)


def test_sliding_window_pairs_by_brute_force() -> None:
    for new, context, window in [(1, 100, 30), (7, 7, 3), (10, 40, 35), (5, 20, 50)]:
        brute = sum(min(p + 1, window) for p in range(context - new, context))
        assert Phase(new, context).pairs_within(window) == brute
    contexts = np.array([10, 31, 64])
    assert list(Phase(1, contexts).pairs_within(32)) == [10, 31, 32]


def test_kv_cache_by_hand() -> None:
    """Gemma-2: 13 of 26 layers keep only the 4096-token window, K and V of 4 heads x 256;
    DeepSeek-V3 caches the 512-wide latent plus the 64-wide rotary key per layer."""
    gemma = build_graph(spec_from_hf_config(config("Gemma2"), "g", "t"))
    assert gemma.kv_cache_bytes(8192, 2) == (13 * 8192 + 13 * 4096) * 2 * 4 * 256 * 2
    assert gemma.kv_cache_bytes(100, 2) == 26 * 100 * 2 * 4 * 256 * 2
    deepseek = build_graph(spec_from_hf_config(config("DeepseekV3"), "d", "t"))
    assert deepseek.kv_cache_bytes(1000, 1) == 61 * 1000 * (512 + 64)
    layers = {len(ids) for _, ids in deepseek.variants}
    assert layers == {58, 3} and deepseek.block[-1].name == "ffn_residual"


def test_moe_decode_flops_count_active_experts_only() -> None:
    """Mixtral: 2 of 8 experts per token, so a block's FFN matmuls are 2 x 3 x h x ffn."""
    spec = spec_from_hf_config(config("Mixtral"), "m", "t")
    ffn = [op for op in build_graph(spec).block if op.name.startswith(("ffn_", "router"))]
    linear = sum(op.flops(decode(10)) for op in ffn if op.kind == "linear")
    assert linear == 2 * (2 * 3 * 4096 * 14336 + 4096 * 8)


def tiny(family: str, **fields: object) -> ModelSpec:
    sizes = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, intermediate_size=128, vocab_size=128,
                 max_position_embeddings=64)
    return spec_from_hf_config(config(family, **{**sizes, **fields}), family.lower(), "t")


def test_tensor_parallel_carries_head_local_qk_norms_and_moe() -> None:
    """Qwen3's per-head q/k norms run on each device's own heads (no all-reduce, unlike the
    block's norms); Mixtral's experts split like an FFN (its router whole on each device)."""
    lora = get_strategy("lora-f")
    cluster = resolve_cluster("2xu280")
    qwen = lora.plan(tiny("Qwen3", head_dim=32), cluster, None, WORK).program
    reduced = {s.tensor for s in qwen.block_steps if isinstance(s, CommStep)
               and s.kind == "all_reduce"}
    assert reduced == {"attn_norm", "ffn_norm"}
    gathered = [s for s in qwen.block_steps if isinstance(s, CommStep) and
                s.tensor == "attn_context"]
    assert [s.width for s in gathered] == [4 * 32]  # all heads' context, not hidden (64)
    mixtral = lora.plan(tiny("Mixtral", num_local_experts=4, num_experts_per_tok=2), cluster,
                        None, WORK).program
    held = mixtral.devices[0].held_bytes(mixtral.spec, 1.0, "hbm")
    assert held >= 2 * 4 * 3 * 64 * 128 / 2  # every expert, split over the two devices


@pytest.mark.parametrize(("family", "fields", "why"), [
    ("Olmo2", {}, "query/key norms over the whole width"),
    ("Gemma2", dict(head_dim=16), "sliding-window and full attention layers mixed"),
])
def test_tensor_parallel_refuses_what_no_sync_scheme_covers(family: str, fields: dict,
                                                             why: str) -> None:
    spec = tiny(family, **fields)
    with pytest.raises(PartitionError, match=why):
        get_strategy("lora-f").plan(spec, resolve_cluster("2xu280"), None, WORK)


def test_emulation_refuses_new_families_naming_the_emulated_ones() -> None:
    lora, cluster = get_strategy("lora-f"), resolve_cluster("2xu280")
    emulated = ("emulated for deepseek_v3, gpt2, llama, mistral, mixtral, opt, qwen2, qwen3 "
                "decoders")
    for spec, why in [(tiny("Phi3"), f"{emulated}, not 'phi3'"),
                      (tiny("Qwen2Moe"), f"{emulated}, not 'qwen2_moe'")]:
        with pytest.raises(EmulationError, match=why):
            check(lora.plan(spec, cluster, None, WORK).program, None)  # type: ignore[arg-type]


def test_plan_prints_a_config_files_parameter_count(tmp_path: Path) -> None:
    cfg = config("Mistral", hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, intermediate_size=128, vocab_size=128)
    path = tmp_path / "mistral-tiny" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(cfg.to_dict()))
    expected = count(meta_model(cfg))
    args = ("plan", str(path), "--cluster", "2xu280", "--strategy", "lora-q")
    shown = CliRunner().invoke(app, [*args, "--json"])
    assert shown.exit_code == 0, shown.output
    assert list(json.loads(shown.stdout))[:2] == ["model", "parameters"]
    assert json.loads(shown.stdout)["parameters"] == expected
    human = CliRunner().invoke(app, list(args))
    assert f"{expected:,} parameters" in human.stdout


def test_cli_refuses_a_type_that_does_not_map_in_one_line(tmp_path: Path) -> None:
    """Mamba's default config: its mixer is named, exit 2, no traceback."""
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps(config("Mamba", num_hidden_layers=2).to_dict()))
    out = CliRunner().invoke(app, ["plan", str(path), "--cluster", "2xu280", "--strategy",
                                   "dfx", "--tokens", "16:16"])
    assert out.exit_code == 2 and len(out.stderr.strip().splitlines()) == 1, out.output
    assert "mixer (MambaMixer) is not read" in out.stderr


def test_sliding_window_caps_a_decode_steps_attention() -> None:
    """Mistral with a 16-token window: a step at context 100 costs what the same model
    without a window costs at context 16 (the block attends to 16 keys either way)."""
    from archipelago.strategies.tensor_parallel.costs import decode_seconds

    lora, cluster = get_strategy("lora-q"), resolve_cluster("2xu280")
    windowed = lora.plan(tiny("Mistral", sliding_window=16), cluster, None, WORK).program
    full = lora.plan(tiny("Mistral", sliding_window=None), cluster, None, WORK).program
    assert decode_seconds(windowed, np.array([100])) == decode_seconds(full, np.array([16]))
    assert decode_seconds(full, np.array([100])) > decode_seconds(full, np.array([16]))


def test_a_huge_layer_count_is_refused_before_any_per_layer_list() -> None:
    """Qwen's sliding and MoE layer lists are built per layer: 10**9 layers must be one
    line, not a billion-entry tuple."""
    fields = {**config("Qwen2Moe").to_dict(), "num_hidden_layers": 10**9}
    with pytest.raises(ConfigError, match=r"num_hidden_layers.*at most 1024"):
        spec_from_hf_config(fields, "q", "cfg.json")
