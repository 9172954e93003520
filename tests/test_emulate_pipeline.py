"""Emulation of tensor x pipeline plans: a tiny Llama-shaped decoder (GQA, SwiGLU, rotary) and
a tiny GPT-2 on two rings of two boards (tp=2, pp=2: 4 processes) and two rings of one
(tp=1, pp=2: 2 processes), against transformers models the tests build from the same config
and seed; the collectives each stage's ranks ran and the bytes each stage link carried,
counted by hand; each rank holding only its stage's tensors."""

from dataclasses import replace
from typing import Any

import pytest

from archipelago.api import emulate, make_plan, parse_workload
from archipelago.emulate.errors import EmulationError
from archipelago.emulate.job import EmulationJob
from archipelago.strategies.tensor_parallel.emulate import emulate as emulate_plan
from tests.test_emulate import (
    FP32_REL_TOL,
    GPT2,
    LLAMA,
    NEW,
    PROMPT,
    SEED,
    TOKENS,
    hf_greedy,
    hf_model,
    write_config,
)

LLAMA3 = {**LLAMA, "num_hidden_layers": 3}  # 4 heads over 2 key/value heads: 3 layers split 2+1
ROWS = PROMPT + NEW - 1  # rows each forward pass moves: the prompt, then one per decode step
FP32 = 4

RUNS = {  # config, cluster, split, strategy: both sync schemes, even and uneven stages
    "llama-2x2-lora": (LLAMA3, "2x2xu280", "tp=2,pp=2,layers=2+1", "lora-f"),
    "llama-2x1-dfx": (LLAMA3, "2x1xu280", "tp=1,pp=2", "dfx"),
    "gpt2-2x2-dfx": (GPT2, "2x2xu280", "tp=2,pp=2", "dfx"),
    "gpt2-2x1-lora": (GPT2, "2x1xu280", "tp=1,pp=2,layers=1+1", "lora-f"),
}


@pytest.fixture(scope="module", params=list(RUNS))
def run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
        ) -> tuple[dict[str, Any], dict[str, Any]]:
    config, cluster, split, strategy = RUNS[request.param]
    path = write_config(tmp_path_factory.mktemp(request.param), config)
    return config, emulate(path, cluster, strategy, {"tokens": TOKENS, "split": split},
                           seed=SEED)


def _hidden(config: dict[str, Any]) -> int:
    return config.get("hidden_size") or config["n_embd"]


def _layers(config: dict[str, Any]) -> int:
    return config.get("num_hidden_layers") or config["n_layer"]


def test_generates_what_transformers_generates(run) -> None:
    config, report = run
    expected, scale = hf_greedy(hf_model(config, SEED), report["prompt"])
    assert len(set(expected)) > 3  # not one repeated token
    assert report["generated"] == expected == report["reference"]
    assert report["tokens_match"]
    assert report["max_abs_logit_diff"] <= FP32_REL_TOL * scale


def test_split_and_ranks(run) -> None:
    config, report = run
    split = report["split"]
    assert report["ranks"] == split["tp"] * split["pp"] == len(report["bytes_per_rank"])
    assert split["pp"] == 2 and sum(split["layers"]) == _layers(config)
    assert min(split["layers"]) >= 1


def test_stage_link_bytes_by_hand(run) -> None:
    """Each TP rank pair between the stages carries, over the run, every row of the block
    output that rank holds (ROWS rows: the prompt and one per decode step), fp32: the whole
    hidden vector under DFX (gathered), its hidden / tp columns under LORA (column-split
    residual); the token returns as an int32 for each step but the last."""
    config, report = run
    tp, hidden = report["split"]["tp"], _hidden(config)
    width = hidden if report["strategy"] == "dfx" else hidden // tp
    hop = ROWS * width * FP32
    assert report["stage_links"] == [
        {"from_stage": 0, "to_stage": 1, "carries": "hidden state", "bytes": [hop] * tp},
        {"from_stage": 1, "to_stage": 0, "carries": "token", "bytes": [(NEW - 1) * 4] * tp},
    ]
    assert report["bytes_per_link"]["stage_send"] == hop
    assert report["bytes_per_link"]["token_send"] == (NEW - 1) * 4


def test_collectives_per_stage_by_hand(run) -> None:
    """Per forward pass (NEW of them), a stage's ranks run the ring plan's collectives of
    its own layers: DFX four all-gathers per layer (seeds/001 Algorithm 1), its head whole
    on every rank; LORA four all-gathers and two all-reduces per layer, and on the last
    stage one more of each for the final norm and an argmax_gather (seeds/002 §III). The
    hidden state goes out on every pass but from the last stage, the token back on every
    pass but the last."""
    _, report = run
    counts = report["split"]["layers"]
    for stage, (layers, ran) in enumerate(zip(counts, report["collectives"], strict=True)):
        first, last = stage == 0, stage == len(counts) - 1
        if report["strategy"] == "dfx":
            expected = {"all_gather": 4 * layers * NEW}
        else:
            expected = {"all_gather": (4 * layers + last) * NEW,
                        "all_reduce": (2 * layers + last) * NEW,
                        "argmax_gather": last * NEW}
        expected.update(stage_send=(not last) * NEW, stage_recv=(not first) * NEW,
                        token_send=last * (NEW - 1), token_recv=first * (NEW - 1))
        assert ran == {k: n for k, n in expected.items() if n}, stage


def _stage_of(name: str, counts: list[int]) -> list[int]:
    """The stages holding transformers parameter `name`: its layer's, or the first for the
    embeddings and the last for the final norm and LM head (GPT-2's tied head reads the
    token table, so the last stage holds it too)."""
    parts = name.split(".")
    for i, part in enumerate(parts[:-1]):
        if part in ("h", "layers") and parts[i + 1].isdigit():
            layer, start = int(parts[i + 1]), 0
            for stage, n in enumerate(counts):
                if start <= layer < start + n:
                    return [stage]
                start += n
    if "wte" in name:
        return [0, len(counts) - 1]
    return [0] if ("wpe" in name or "embed_tokens" in name) else [len(counts) - 1]


# DFX splits the blocks' matrices and their biases across a stage's ranks (seeds/001 §IV-B)
_DFX_SPLIT = ("c_attn", "c_proj", "c_fc", "q_proj", "k_proj", "v_proj", "o_proj",
              "gate_proj", "up_proj", "down_proj")


def test_each_rank_holds_only_its_stage(run) -> None:
    """A rank holds the parameters of its stage only (fp32): exactly them with one board
    per stage; under DFX on two, each rank half of each block matrix (and its bias) and
    the rest whole; under LORA, the stage's ranks together at least them, never twice."""
    config, report = run
    counts, tp = report["split"]["layers"], report["split"]["tp"]
    whole, dfx = [0] * len(counts), [0] * len(counts)
    for name, param in hf_model(config, SEED).named_parameters():
        for stage in _stage_of(name, counts):
            whole[stage] += param.numel() * FP32
            split = any(m in name for m in _DFX_SPLIT)
            dfx[stage] += param.numel() * FP32 // (tp if split else 1)
    ranks = report["bytes_per_rank"]
    if tp == 1:
        assert ranks == whole
    elif report["strategy"] == "dfx":
        assert ranks == [dfx[r // tp] for r in range(len(ranks))]
    else:
        by_stage = [sum(ranks[s * tp:(s + 1) * tp]) for s in range(len(counts))]
        assert all(h <= b < tp * h for h, b in zip(whole, by_stage, strict=True))


def test_auto_runs_the_split_the_estimate_chooses(tmp_path) -> None:
    """Without --split a cluster of rings runs the split `archi plan` chooses."""
    path = write_config(tmp_path, LLAMA3)
    chosen = make_plan(path, "2x2xu280", "dfx", workload={"tokens": TOKENS},
                       command="emulate").split
    report = emulate(path, "2x2xu280", "dfx", {"tokens": TOKENS}, seed=SEED)
    assert report["split"] == {"tp": chosen.tp, "pp": chosen.pp,
                               "layers": list(chosen.layers), "chosen": "auto"}
    assert report["tokens_match"]


def test_a_stage_without_layers_is_refused_in_one_line(tmp_path) -> None:
    plan = make_plan(write_config(tmp_path, LLAMA3), "2x2xu280", "dfx",
                     workload={"split": "tp=2,pp=2"}, command="emulate")
    first, second = plan.stages
    plan = replace(plan, stages=[replace(first, layers=range(0)),
                                 replace(second, layers=range(3))])
    job = EmulationJob(parse_workload("dfx", {"tokens": TOKENS}, "emulate"), seed=SEED)
    with pytest.raises(EmulationError, match="at least one layer") as err:
        emulate_plan(plan, job)
    assert "\n" not in str(err.value)


def test_a_split_the_ring_emulator_refuses_is_refused_for_stages(tmp_path) -> None:
    """Each stage runs the ring plan, so its checks apply: 3 heads do not split over 2."""
    config = {**LLAMA3, "num_attention_heads": 3, "num_key_value_heads": 3, "hidden_size": 24}
    with pytest.raises(EmulationError, match="even splits") as err:
        emulate(write_config(tmp_path, config), "2x2xu280", "dfx",
                {"tokens": TOKENS, "split": "tp=2,pp=2"}, seed=SEED)
    assert "\n" not in str(err.value)


def test_w8a8_stages_accumulate_what_one_ring_does(tmp_path) -> None:
    """LORA-Q's int32 accumulators (their digest) are the same whether the layers run on one
    ring of two boards or on two stages of two: the stages split the work, not the sums."""
    path = write_config(tmp_path, LLAMA3)
    work = {"tokens": TOKENS, "precision": "fp16"}
    ring = emulate(path, "2xu280", "lora-q", work, seed=SEED)
    stages = emulate(path, "2x2xu280", "lora-q", {**work, "split": "tp=2,pp=2"}, seed=SEED)
    assert stages["integer_checksum"] == ring["integer_checksum"] is not None
    assert stages["generated"] == ring["generated"]
