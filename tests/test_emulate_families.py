"""Emulation of today's decoder shapes (GQA, SwiGLU, rotary, explicit head_dim, Qwen2's q/k/v
biases, Qwen3's per-head q/k norms, Mistral's sliding window, a Mixtral-shaped MoE) on 1, 2
and 4 rank processes, against transformers models the tests build from the same config and
seed; and the bytes each ring link carried, counted by hand."""

from pathlib import Path
from typing import Any

import pytest
import torch

from archipelago.api import emulate, make_plan
from archipelago.emulate.errors import EmulationError
from archipelago.emulate.job import EmulationJob
from archipelago.estimate.workload import parse_tokens
from archipelago.strategies.tensor_parallel.emulate import emulate as emulate_plan
from tests.test_emulate import (
    FP32_REL_TOL,
    NEW,
    PROMPT,
    SEED,
    TOKENS,
    hf_greedy,
    hf_model,
    write_config,
)

# 8 query heads over 4 key/value heads (GQA that divides 1, 2 and 4 ranks), head_dim 8 given
# explicitly so the query width (64) differs from the hidden size (32).
ROTARY = {"hidden_size": 32, "intermediate_size": 48, "num_attention_heads": 8,
          "num_key_value_heads": 4, "head_dim": 8, "num_hidden_layers": 2, "vocab_size": 77,
          "max_position_embeddings": 64, "initializer_range": 0.5}
WINDOW = 5  # under the 8-token prompt: every later query loses its earliest keys
MISTRAL = {**ROTARY, "model_type": "mistral", "sliding_window": WINDOW}
QWEN2 = {**ROTARY, "model_type": "qwen2", "num_attention_heads": 4, "num_key_value_heads": 2,
         "head_dim": None}
QWEN3 = {**ROTARY, "model_type": "qwen3"}
EXPERTS, PER_TOKEN = 4, 2
MIXTRAL = {**ROTARY, "model_type": "mixtral", "intermediate_size": 24,
           "num_local_experts": EXPERTS, "num_experts_per_tok": PER_TOKEN}
ROWS = PROMPT + NEW - 1  # rows through each block: the prompt, then one per decode step

RUNS = {  # (config, ranks, strategy): each rank count and both sync schemes covered
    "mistral-1-dfx": (MISTRAL, 1, "dfx"), "mistral-2-lora": (MISTRAL, 2, "lora-f"),
    "mistral-4-dfx": (MISTRAL, 4, "dfx"), "qwen3-4-lora": (QWEN3, 4, "lora-f"),
    "mixtral-1-dfx": (MIXTRAL, 1, "dfx"), "mixtral-2-lora": (MIXTRAL, 2, "lora-f"),
    "mixtral-4-dfx": (MIXTRAL, 4, "dfx"),
}


def _config(config: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in config.items() if v is not None}


@pytest.fixture(scope="module", params=list(RUNS))
def run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
        ) -> tuple[dict[str, Any], dict[str, Any]]:
    config, ranks, strategy = RUNS[request.param]
    path = write_config(tmp_path_factory.mktemp(request.param), _config(config))
    return config, emulate(path, f"{ranks}xu280", strategy, {"tokens": TOKENS}, seed=SEED)


def test_generates_what_transformers_generates(run) -> None:
    config, report = run
    expected, scale = hf_greedy(hf_model(_config(config), SEED), report["prompt"])
    assert len(set(expected)) > 3  # not one repeated token
    assert report["generated"] == expected == report["reference"]
    assert report["max_abs_logit_diff"] <= FP32_REL_TOL * scale


def test_the_window_changes_the_tokens() -> None:
    """Mistral's window matters here: with a window as long as the text (same weights, the
    window does not change the initialization) transformers generates other tokens, so the
    emulated runs matching the windowed model checks the window."""
    prompt = torch.randint(MISTRAL["vocab_size"], (PROMPT,),
                           generator=torch.Generator().manual_seed(1)).tolist()
    windowed = hf_greedy(hf_model(MISTRAL, SEED), prompt)[0]
    whole = hf_greedy(hf_model({**MISTRAL, "sliding_window": PROMPT + NEW}, SEED), prompt)[0]
    assert windowed != whole


def test_ranks_hold_a_share_of_every_expert_and_the_whole_router(run) -> None:
    """Each rank holds 1/R of the columns of every expert and of q, k, v and o (fp32), and
    everything else whole: embeddings, norms, LM head and the router, which every rank runs
    to pick its tokens' experts without a collective."""
    config, report = run
    if "num_local_experts" not in config or report["strategy"] != "dfx":
        pytest.skip("DFX's placement of a Mixtral")
    ranks = report["ranks"]
    model = hf_model(_config(config), SEED)
    split = sum(p.numel() for n, p in model.named_parameters()
                if any(m in n for m in ("q_proj", "k_proj", "v_proj", "o_proj", "experts")))
    router = sum(p.numel() for n, p in model.named_parameters() if n.endswith("mlp.gate.weight"))
    whole = sum(p.numel() for p in model.parameters())
    assert router == config["num_hidden_layers"] * EXPERTS * config["hidden_size"]
    assert report["bytes_per_rank"] == [4 * (whole - split + split // ranks)] * ranks


def test_lora_link_bytes_by_hand(run) -> None:
    """LORA per block: all-gathers of the attention norm, the attention context (all heads),
    the FFN norm and the active experts' activations; one more of the final norm and the
    (max, token) pairs per generated token; all-reduces of two float64 partial sums per row
    and norm. An all-gather puts R - 1 slices on each ring link, an all-reduce 2 (R-1)/R."""
    config, report = run
    if report["strategy"] != "lora-f":
        pytest.skip("LORA's collectives")
    ranks, layers, hidden = report["ranks"], config["num_hidden_layers"], config["hidden_size"]
    q_dim = config["num_attention_heads"] * config["head_dim"]
    ffn = config["intermediate_size"] * config.get("num_experts_per_tok", 1)
    per_row = 4 * (ranks - 1) // ranks  # fp32 slices an all-gather forwards, per element
    gathered = layers * ROWS * (2 * hidden + q_dim + ffn) + NEW * hidden
    stats = 2 * 8 * 2 * (ranks - 1) / ranks  # (sum, sum of squares) in float64, reduced
    assert report["bytes_per_link"] == {
        "all_gather": gathered * per_row,
        "all_reduce": (2 * layers * ROWS + NEW) * stats,
        "argmax_gather": NEW * 2 * 8 * (ranks - 1),
    }


def test_qwen2_query_key_value_biases(tmp_path) -> None:
    """transformers initializes biases to zero, so random ones go in through a local
    checkpoint; zeroing them again changes the tokens, so they are being added."""
    model = hf_model(_config(QWEN2), seed=11)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("_proj.bias"):
                param.normal_(0, 0.5, generator=torch.Generator().manual_seed(len(name)))
    assert sum(n.endswith("_proj.bias") for n, _ in model.named_parameters()) == 6  # q, k, v
    model.save_pretrained(tmp_path / "ckpt")
    ckpt = str(tmp_path / "ckpt")
    report = emulate(ckpt, "2xu280", "dfx", {"tokens": TOKENS, "checkpoint": ckpt}, seed=SEED)
    expected = hf_greedy(model, report["prompt"])[0]
    assert report["generated"] == expected and report["tokens_match"]
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("_proj.bias"):
                param.zero_()
    assert hf_greedy(model, report["prompt"])[0] != expected


@pytest.mark.parametrize(("config", "strategy", "what"), [
    ({**MIXTRAL}, "lora-q", "W8A8 experts not emulated"),
    ({**ROTARY, "model_type": "phi3"}, "dfx", "generation is emulated for"),
], ids=["w8a8-experts", "phi3"])
def test_what_is_not_emulated_is_refused_in_one_line(config, strategy, what, tmp_path) -> None:
    plan = make_plan(write_config(tmp_path, _config(config)), "2xu280", strategy)
    with pytest.raises(EmulationError, match=what) as err:
        emulate_plan(plan, EmulationJob(parse_tokens(TOKENS), seed=SEED))
    assert "\n" not in str(err.value)


def test_sliding_window_cache_keeps_the_window(tmp_path: Path) -> None:
    """The per-rank KV cache of a sliding-window layer holds its last `window` tokens, as
    the plan's memory estimate (graph.kv_cache_bytes) assumes."""
    from archipelago.strategies.tensor_parallel.emulate.state import RankState

    rs = RankState(None, {}, None, None, (0, 1), (0, 1))  # type: ignore[arg-type]
    rs.layer = 0
    returned = [rs.extend_cache("k", torch.full((2, 4, 8), float(step)), keep=WINDOW).shape[1]
                for step in range(3)]
    assert returned == [4, 8, 9]  # the new keys beside what was kept, all scored
    assert rs.cache[(0, "k")].shape == (2, WINDOW, 8)
    assert rs.cache[(0, "k")][0, :, 0].tolist() == [1.0, 2.0, 2.0, 2.0, 2.0]
