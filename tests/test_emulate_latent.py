"""Emulation of a DeepSeek-V3-shaped model (multi-head latent attention with q_lora_rank and
kv_lora_rank set, a dense layer before two MoE layers of routed experts under DeepSeek's
group-limited sigmoid router and a shared expert) on 1, 2 and 4 rank processes under both
sync schemes, and in two pipeline stages, against the transformers model the test builds
from the same config and seed: the prompt runs latent attention expanded, every later token
absorbed (graph.absorbed_block), so matching tokens checks both forms."""

from typing import Any

import pytest
import torch

from archipelago.api import emulate
from archipelago.strategies.tensor_parallel.emulate.reference import greedy_generate
from tests.test_emulate import FP32_REL_TOL, SEED, TOKENS, hf_greedy, hf_model, write_config

EXPERTS = 8
DEEPSEEK = {"model_type": "deepseek_v3", "hidden_size": 32, "num_hidden_layers": 3,
            "num_attention_heads": 4, "num_key_value_heads": 4, "intermediate_size": 48,
            "moe_intermediate_size": 8, "n_routed_experts": EXPERTS, "num_experts_per_tok": 2,
            "n_group": 2, "topk_group": 1, "n_shared_experts": 1, "first_k_dense_replace": 1,
            "q_lora_rank": 16, "kv_lora_rank": 12, "qk_rope_head_dim": 4,
            "qk_nope_head_dim": 8, "v_head_dim": 8, "vocab_size": 77,
            "max_position_embeddings": 64, "initializer_range": 0.5}
RUNS = {"1-dfx": ("1xu280", "dfx", ""), "2-lora": ("2xu280", "lora-f", ""),
        "4-dfx": ("4xu280", "dfx", ""), "4-lora": ("4xu280", "lora-f", ""),
        # the dense layer in one stage, the MoE layers in the other
        "2-stages": ("2x1xu280", "dfx", "tp=1,pp=2,layers=1+2")}


@pytest.fixture(scope="module", params=list(RUNS))
def run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
        ) -> dict[str, Any]:
    cluster, strategy, split = RUNS[request.param]
    path = write_config(tmp_path_factory.mktemp(request.param), DEEPSEEK)
    options = {"tokens": TOKENS, **({"split": split} if split else {})}
    return emulate(path, cluster, strategy, options, seed=SEED)


def test_generates_what_transformers_generates(run) -> None:
    expected, scale = hf_greedy(hf_model(DEEPSEEK, SEED), run["prompt"])
    assert len(set(expected)) > 3  # not one repeated token
    assert run["generated"] == expected == run["reference"]
    assert run["max_abs_logit_diff"] <= FP32_REL_TOL * scale


def test_ranks_split_the_up_projections_and_hold_the_latent_path_whole(run) -> None:
    """DFX on one ring: q_b, kv_b and o split over the ranks (whole heads), the dense
    MLP's and every routed and shared expert's columns too; the down projections q_a and
    kv_a, their norms, the router, embeddings and LM head whole on every rank (fp32)."""
    if run["strategy"] != "dfx" or run["cluster"] == "2x1xu280":
        pytest.skip("DFX's placement on one ring")
    ranks, model = run["ranks"], hf_model(DEEPSEEK, SEED)
    split_modules = ("q_b_proj", "kv_b_proj", "o_proj", "experts", "gate_proj", "up_proj",
                     "down_proj")
    split = sum(p.numel() for n, p in model.named_parameters()
                if any(m in n for m in split_modules))
    whole = sum(p.numel() for p in model.parameters())
    assert split % ranks == 0
    assert run["bytes_per_rank"] == [4 * (whole - split + split // ranks)] * ranks


def test_the_reference_generates_the_models_own_eos_token() -> None:
    """transformers fills a generation config's unset fields from the model's (eos id 1
    here), and min_new_tokens would then forbid that token: the reference must pick it
    where it is the argmax, as a full forward pass over the text does (seed 0 and this
    prompt lead there at the fourth token)."""
    config = {**DEEPSEEK, "num_hidden_layers": 2, "first_k_dense_replace": 0}
    model, ids = hf_model(config, 0), [32, 73, 56, 58, 8, 58, 48, 66]
    assert model.generation_config.eos_token_id == 1
    argmax = list(ids)
    with torch.no_grad():
        for _ in range(6):
            argmax.append(int(model(torch.tensor([argmax])).logits[0, -1].argmax()))
    assert 1 in argmax[len(ids):]
    assert greedy_generate(model, torch.tensor(ids), 6) == argmax[len(ids):]
