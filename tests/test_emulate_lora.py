"""Emulation of LORA plans (seeds/002): the column-split residual stream with distributed
LayerNorm in FP, and W8A8 whose split runs equal the one-device run in every integer."""

from typing import Any

import pytest
import transformers

from archipelago.api import emulate
from tests.conftest import TINY_GPT2
from tests.test_emulate import (
    FP32_REL_TOL,
    GPT2,
    SEED,
    TOKENS,
    hf_greedy,
    hf_model,
    write_config,
)

LAYERS, NEW = GPT2["n_layer"], int(TOKENS.split(":")[1])
# W8A8 needs activations an int8 grid can hold; transformers' 0.02 init gives near-uniform
# logits, 0.1 gives varied tokens with realistic ranges.
GPT2_Q = {**TINY_GPT2, "initializer_range": 0.1}
# Per-tensor int8 rounds each operand to 1/254 of its range; over 2 layers of 4 int8 matmuls
# with random (outlier-free) weights the logits move a few percent of their scale. A wrong
# scale, sign or slice moves them by their whole scale, so 10% separates the two.
W8A8_REL_TOL = 0.10


@pytest.fixture(scope="module")
def gpt2_reference() -> transformers.PreTrainedModel:
    return hf_model(GPT2, SEED)


@pytest.mark.parametrize("ranks", [1, 2, 4])
def test_lora_f_generates_what_transformers_generates(ranks, gpt2_reference, tmp_path) -> None:
    report = emulate(write_config(tmp_path, GPT2), f"{ranks}xu280", "lora-f", {"tokens": TOKENS},
                     seed=SEED)
    expected, scale = hf_greedy(gpt2_reference, report["prompt"])
    assert report["generated"] == expected and report["tokens_match"]
    assert report["max_abs_logit_diff"] <= FP32_REL_TOL * scale
    # seeds/002 §III-A: 4 all-gathers and 2 all-reduces per block; the final LayerNorm adds
    # one of each before the LM head.
    assert report["collectives"] == {"all_gather": (4 * LAYERS + 1) * NEW,
                                     "all_reduce": (2 * LAYERS + 1) * NEW,
                                     "argmax_gather": NEW}


@pytest.fixture(scope="module")
def w8a8_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[int, dict[str, Any]]:
    config = write_config(tmp_path_factory.mktemp("tiny-w8a8"), GPT2_Q)
    return {n: emulate(config, f"{n}xu280", "lora-q", {"tokens": TOKENS, "precision": "fp16"},
                       seed=SEED) for n in (1, 2, 4)}


def test_w8a8_split_runs_equal_the_one_device_run(w8a8_runs) -> None:
    """Every int32 accumulator (by an additive digest over ranks), every token and the
    logits' distance from the reference are identical on 1, 2 and 4 ranks."""
    one = w8a8_runs[1]
    assert one["numerics"] == "w8a8" and one["integer_checksum"]
    for run in (w8a8_runs[2], w8a8_runs[4]):
        assert run["integer_checksum"] == one["integer_checksum"]
        assert run["generated"] == one["generated"]
        assert run["max_abs_logit_diff"] == one["max_abs_logit_diff"]


def test_w8a8_agrees_with_the_fp32_reference(w8a8_runs) -> None:
    one = w8a8_runs[1]
    expected, scale = hf_greedy(hf_model(GPT2_Q, SEED), one["prompt"])
    assert one["generated"] == expected and one["tokens_match"]
    assert 0 < one["max_abs_logit_diff"] <= W8A8_REL_TOL * scale


def test_w8a8_ranks_hold_int8_slices(w8a8_runs) -> None:
    """Block matrices in HBM at one byte per weight, split N ways."""
    h, f = GPT2_Q["n_embd"], 4 * GPT2_Q["n_embd"]
    matrices = LAYERS * (4 * h * h + 2 * h * f)
    for ranks, run in w8a8_runs.items():
        assert [m["hbm"] for m in run["bytes_per_rank_by_memory"]] == [matrices // ranks] * ranks
