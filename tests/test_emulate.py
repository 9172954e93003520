"""Functional emulation of DFX plans: tiny decoders run on 1, 2 and 4 rank processes against
transformers models the tests build themselves from the same config and seed."""

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch
import transformers

from archipelago.api import emulate, make_plan
from archipelago.emulate.job import EmulationJob
from archipelago.estimate.workload import parse_tokens
from archipelago.models.hf_meta import FOLDER
from archipelago.models.weights import all_weights
from archipelago.strategies.tensor_parallel.emulate import emulate as emulate_plan
from archipelago.strategies.tensor_parallel.plan import CommStep, ComputeStep, Plan, Shard
from tests.conftest import TINY_GPT2

# A larger init spread than transformers' 0.02 gives varied greedy tokens, so a wrong KV cache
# or position cannot hide behind a model that repeats one token whatever its context.
GPT2 = {**TINY_GPT2, "initializer_range": 0.5}
OPT = {"model_type": "opt", "hidden_size": 32, "num_attention_heads": 4, "num_hidden_layers": 2,
       "ffn_dim": 80, "vocab_size": 90, "max_position_embeddings": 30,
       "activation_function": "relu", "init_std": 0.5}
LLAMA = {"model_type": "llama", "hidden_size": 32, "intermediate_size": 88,
         "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2,
         "vocab_size": 77, "max_position_embeddings": 64, "initializer_range": 0.5}
TOKENS, PROMPT, NEW = "8:12", 8, 12
SEED = 3

# fp32 (unit roundoff 2**-24 ~ 6e-8): our matmuls and transformers' sum in different orders
# (e.g. q, k, v apart vs GPT-2's fused c_attn), so a length-K dot product differs by about
# sqrt(K)·u relative (K <= 256: ~1e-6), compounded over 2 layers of ~7 matmul/norm steps:
# well under 1e-5 of the logit scale.
FP32_REL_TOL = 1e-5
# fp16 keeps 11 significant bits: u = 2**-11 ~ 4.9e-4. Weights and every activation are
# rounded to fp16; the independent roundings in a length-K accumulation add like a random
# walk, ~sqrt(K)·u relative error (K = 256, the FFN fan-in, the longest accumulation:
# 16u ~ 0.8%), and each of the 2 layers adds its own: 2·sqrt(256)·u ~ 1.6% of the logit scale.
FP16_REL_TOL = 2 * 256 ** 0.5 * 2.0 ** -11


def write_config(directory: Path, config: dict[str, Any]) -> str:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(config))
    return str(directory / "config.json")


def hf_model(config: dict[str, Any], seed: int) -> transformers.PreTrainedModel:
    """The unsplit model, built here from the config with transformers' own initialization."""
    cfg = dict(config)
    hf_config = transformers.AutoConfig.for_model(cfg.pop("model_type"), **cfg)
    torch.manual_seed(seed)
    return transformers.AutoModelForCausalLM.from_config(hf_config).eval()


def hf_greedy(model: transformers.PreTrainedModel, prompt: list[int]) -> tuple[list[int], float]:
    """transformers' greedy tokens and the largest |logit| along the way (the logit scale)."""
    ids = torch.tensor([prompt])
    out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                         max_new_tokens=NEW, min_new_tokens=NEW, eos_token_id=None,
                         pad_token_id=0, output_logits=True, return_dict_in_generate=True)
    scale = max(float(step.abs().max()) for step in out.logits)
    return out.sequences[0, len(prompt):].tolist(), scale


def held_numel(model: transformers.PreTrainedModel, ranks: int) -> tuple[int, int]:
    """(all parameters one rank holds, its share of the block matrices) under DFX's split
    (seeds/001 §IV-B): the decoder blocks' weight matrices and their biases divide across
    ranks; embeddings and LayerNorms are replicated (the LM head is tied to the embedding)."""
    split = [p for n, p in model.named_parameters()
             if ".h." in f".{n}" and any(m in n for m in ("c_attn", "c_proj", "c_fc"))]
    whole = sum(p.numel() for p in model.parameters())
    share = sum(p.numel() for p in split)
    return whole - share + share // ranks, sum(p.numel() for p in split if p.dim() == 2) // ranks


@pytest.fixture(scope="module", params=[1, 2, 4])
def gpt2_run(request: pytest.FixtureRequest, gpt2_config: str) -> dict[str, Any]:
    return emulate(gpt2_config, f"{request.param}xu280", "dfx", {"tokens": TOKENS}, seed=SEED)


def test_gpt2_generates_what_transformers_generates(gpt2_run, gpt2_reference) -> None:
    prompt = gpt2_run["prompt"]
    assert len(prompt) == PROMPT and all(0 <= t < GPT2["vocab_size"] for t in prompt)
    expected, scale = hf_greedy(gpt2_reference, prompt)
    assert len(set(expected)) > 3  # the check below is not about one repeated token
    assert gpt2_run["generated"] == expected == gpt2_run["reference"]
    assert gpt2_run["tokens_match"] is True and gpt2_run["agrees"] is True
    assert gpt2_run["max_abs_logit_diff"] <= FP32_REL_TOL * scale


def test_each_rank_holds_one_nth_of_the_block_weights(gpt2_run, gpt2_reference) -> None:
    ranks = gpt2_run["ranks"]
    total, matrices = held_numel(gpt2_reference, ranks)
    assert gpt2_run["bytes_per_rank"] == [4 * total] * ranks  # fp32
    for held in gpt2_run["bytes_per_rank_by_memory"]:  # DFX keeps the matrices in HBM
        assert held["hbm"] == 4 * matrices


def test_dfx_runs_four_all_gathers_per_layer(gpt2_run) -> None:
    """seeds/001 Algorithm 1: sync after attention, its projection, FFN1+GELU and FFN2.
    Nothing else crosses between ranks: every rank runs the LM head whole and picks the
    same token."""
    layers = GPT2["n_layer"]
    assert gpt2_run["collectives"] == {"all_gather": 4 * layers * NEW}


def test_dfx_link_bytes_by_hand(gpt2_run) -> None:
    """Each all-gather forwards the other R - 1 ranks' slices over every ring link: per layer
    and row, the attention context, its projection and FFN2's output (hidden wide each) and
    the FFN1 activation (4 x hidden), in fp32; rows are the prompt, then one per new token."""
    ranks, hidden = gpt2_run["ranks"], GPT2["n_embd"]
    rows = PROMPT + NEW - 1
    slices = GPT2["n_layer"] * rows * (3 * hidden + 4 * hidden) // ranks
    assert gpt2_run["bytes_per_link"] == {"all_gather": 4 * (ranks - 1) * slices}


def test_the_timeline_orders_every_step(gpt2_run) -> None:
    """The report's timeline: the launcher's marks in the order it takes its steps, every
    rank's stamps in the order a rank goes, all of them after the weights were provided
    and before the launcher saw the ranks exit; the reference ready before the check."""
    from archipelago.emulate.timeline import RANK_PHASES

    launcher, ranks = gpt2_run["timeline"]["launcher"], gpt2_run["timeline"]["ranks"]
    steps = [launcher[s] for s in ("reaper", "fork_server", "weights", "forked", "exited",
                                   "results", "checked", "removed")]
    assert steps == sorted(steps) and steps[0] >= 0
    assert launcher["weights"] < launcher["reference"] <= launcher["checked"]
    assert len(ranks) == gpt2_run["ranks"]
    for rank in ranks:
        stamps = [rank[phase] for phase in RANK_PHASES]
        assert stamps == sorted(stamps)
        assert launcher["weights"] < stamps[0] and stamps[-1] < launcher["exited"]


def test_fp16_logits_within_rounding_tolerance(gpt2_config, gpt2_reference) -> None:
    report = emulate(gpt2_config, "2xu280", "dfx", {"tokens": TOKENS, "precision": "fp16"},
                     seed=SEED)
    _, scale = hf_greedy(gpt2_reference, report["prompt"])
    assert 0 < report["max_abs_logit_diff"] <= FP16_REL_TOL * scale
    assert report["bytes_per_rank"] == [2 * held_numel(gpt2_reference, 2)[0]] * 2


@pytest.mark.parametrize("config", [OPT, LLAMA], ids=["opt-relu-offset2", "llama-rope-gqa"])
def test_opt_and_llama_on_two_ranks(config, tmp_path) -> None:
    report = emulate(write_config(tmp_path, config), "2xu280", "dfx", {"tokens": TOKENS}, seed=SEED)
    expected, scale = hf_greedy(hf_model(config, SEED), report["prompt"])
    assert report["generated"] == expected and report["tokens_match"]
    assert report["max_abs_logit_diff"] <= FP32_REL_TOL * scale


def row_split_ffn(plan: Plan) -> Plan:
    """The DFX plan with FFN2 split by rows instead of columns, its partial sums all-reduced
    (Megatron-LM's split, the kind of step LORA's scheme adds), and the FFN1 activation no
    longer gathered. Built here, not by a strategy: the emulator runs what a plan states."""
    hidden, steps = plan.spec.hidden, []
    for step in plan.block_steps:
        if isinstance(step, CommStep) and step.tensor == "ffn_act":
            continue
        if isinstance(step, CommStep) and step.tensor == "ffn_down":
            step = CommStep("all_reduce", "ffn_down", hidden)
        elif isinstance(step, ComputeStep) and step.op.name == "ffn_down":
            step = replace(step, local_out=hidden)
        steps.append(step)
    devices = []
    for device in plan.devices:
        up = device.layer_shards["ffn_up.weight"]  # the FFN1 columns this rank computes
        rows = Shard(0, up.start, up.stop, "hbm")
        devices.append(replace(device, layer_shards={**device.layer_shards,
                                                     "ffn_down.weight": rows}))
    return replace(plan, block_steps=steps, devices=devices)


def test_a_plan_with_all_reduce_runs_without_emulator_changes(tmp_path) -> None:
    """LLaMA (no FFN biases, so the partial sums need no bias bookkeeping) on 2 ranks."""
    config = write_config(tmp_path, LLAMA)
    staged = make_plan(config, "2xu280", "dfx")
    plan = replace(staged, stages=[replace(staged.stages[0],
                                           program=row_split_ffn(staged.program))])
    report = emulate_plan(plan, EmulationJob(parse_tokens(TOKENS), seed=SEED))
    layers = LLAMA["num_hidden_layers"]
    assert report["collectives"] == {"all_gather": 2 * layers * NEW,  # attention only
                                     "all_reduce": layers * NEW}
    expected, scale = hf_greedy(hf_model(LLAMA, SEED), report["prompt"])
    assert report["generated"] == expected
    assert report["max_abs_logit_diff"] <= FP32_REL_TOL * scale


def idle_for(steps: int) -> Callable[[], bool]:
    """An idle() that says yes `steps` times (a fork server that was that slow), then no."""
    answers = iter([True] * steps)
    return lambda: next(answers, False)


def _reference_case(gpt2_config, gpt2_reference, tmp_path) -> tuple:
    """The 2-rank DFX program of the test model, a job reading its saved weights, the
    prompt's ids and transformers' greedy tokens after it: what report_head is checked on."""
    from archipelago.strategies.tensor_parallel.emulate.rank import prompt_ids

    plan = make_plan(gpt2_config, "2xu280", "dfx").program
    gpt2_reference.save_pretrained(tmp_path / "weights")
    job = EmulationJob(parse_tokens(TOKENS), seed=SEED, weights_dir=str(tmp_path / "weights"))
    prompt = prompt_ids(plan.spec, PROMPT, SEED).tolist()
    expected, _ = hf_greedy(gpt2_reference, prompt)
    return plan, job, prompt, expected


@pytest.mark.parametrize("steps", [0, 3, NEW])
def test_tokens_that_part_from_transformers_report_generates_own(gpt2_config, gpt2_reference,
                                                                  tmp_path, steps) -> None:
    """Where the emulated tokens part from transformers' greedy path, the report names
    generate()'s tokens and measures the logits along the emulated path (the check runs
    generate() only then; along an agreeing path one forward pass stands for it), whether
    the reference decoded ahead while a core was idle (all of it, or stopped after 3 steps
    when the ranks started) or not."""
    from archipelago.strategies.tensor_parallel.emulate.rank import (
        prepare_reference,
        report_head,
    )

    plan, job, prompt, expected = _reference_case(gpt2_config, gpt2_reference, tmp_path)
    parted = [*expected[:3], (expected[3] + 1) % GPT2["vocab_size"], *expected[4:]]
    with torch.inference_mode():  # transformers' logits along the parted path, by hand
        along = gpt2_reference(torch.tensor([prompt + parted[:-1]])).logits[0, PROMPT - 1:]
    logits = along.clone()
    logits[5, 7] += 0.25
    rank = {"tokens": parted, "vocab_slice": [0, GPT2["vocab_size"]], "logits": logits,
            "bytes_by_memory": {"hbm": 1}, "integer_checksum": 0}
    report = report_head(plan, job, [rank, rank], [rank],
                         prepare_reference(plan, job, idle_for(steps)))
    assert report["reference"] == expected and report["generated"] == parted
    assert report["tokens_match"] is False and report["agrees"] is False
    assert report["max_abs_logit_diff"] == pytest.approx(0.25, abs=1e-5)


def test_decoding_ahead_checks_an_agreeing_path_as_the_one_pass_does(
        gpt2_config, gpt2_reference, tmp_path) -> None:
    """Where the reference decoded ahead (a fork server was starting), an agreeing path is
    checked with its logits: generate()'s tokens, the same verdict as the one pass along the
    path, the same logits to float rounding, and a wrong logit found as surely."""
    from archipelago.strategies.tensor_parallel.emulate.rank import (
        prepare_reference,
        report_head,
    )

    plan, job, prompt, expected = _reference_case(gpt2_config, gpt2_reference, tmp_path)
    with torch.inference_mode():
        along = gpt2_reference(torch.tensor([prompt + expected[:-1]])).logits[0, PROMPT - 1:]
    logits = along.clone()
    logits[2, 5] -= 0.5
    rank = {"tokens": expected, "vocab_slice": [0, GPT2["vocab_size"]], "logits": logits,
            "bytes_by_memory": {"hbm": 1}, "integer_checksum": 0}
    ahead = prepare_reference(plan, job, idle_for(NEW))
    assert ahead.greedy is not None and ahead.greedy[0] == expected
    rounding = FP32_REL_TOL * float(along.abs().max())  # decode steps vs one pass
    assert float((ahead.greedy[1] - along).abs().max()) <= rounding
    assert prepare_reference(plan, job, idle_for(NEW - 1)).greedy is None
    reports = [report_head(plan, job, [rank, rank], [rank],
                           prepare_reference(plan, job, idle_for(steps)))
               for steps in (0, NEW)]
    for report in reports:
        assert report["reference"] == expected and report["tokens_match"] is True
        assert report["max_abs_logit_diff"] == pytest.approx(0.5, abs=rounding)


def test_local_checkpoint_with_bare_base_model_names(tmp_path) -> None:
    """A user's checkpoint (here saved the way hub GPT-2 files are: the base model's names,
    without 'transformer.') is read instead of seeded weights."""
    model = hf_model(GPT2, seed=11)
    model.transformer.save_pretrained(tmp_path / "ckpt")
    ckpt = str(tmp_path / "ckpt")
    report = emulate(ckpt, "2xu280", "dfx", {"tokens": TOKENS, "checkpoint": ckpt}, seed=SEED)
    assert report["generated"] == hf_greedy(model, report["prompt"])[0]
    assert report["tokens_match"] and report["weights"] == ckpt


def archi(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "archipelago", *args], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, **(env or {})})


def test_torchrun_environment_makes_this_process_one_rank(gpt2_config, tmp_path) -> None:
    """Under torchrun every process runs `archi emulate` with RANK, WORLD_SIZE, MASTER_ADDR
    and MASTER_PORT set: here two such processes, started by hand, form the run."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    common = {"WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
              "ARCHIPELAGO_CACHE_DIR": str(tmp_path / "cache")}  # the seeded weights go here
    procs = [archi("emulate", gpt2_config, "--cluster", "2xu280", "--tokens", "4:3", "--json",
                   env={**common, "RANK": str(r), "LOCAL_RANK": str(r)}) for r in range(2)]
    try:  # a hang guard only: two processes importing torch on a loaded 2-core machine
        (out0, err0), (out1, err1) = (p.communicate(timeout=600) for p in procs)
    finally:
        for p in procs:
            p.kill()
    assert procs[0].returncode == procs[1].returncode == 0, err0 + err1
    assert out1 == ""  # rank 0 reports for the run
    report = json.loads(out0)
    for key in ("tokens_match", "generated", "reference", "max_abs_logit_diff",
                "bytes_per_rank", "ranks", "bytes_per_link"):
        assert key in report
    assert report["tokens_match"] and report["ranks"] == 2 and len(report["generated"]) == 3
    # both ranks of this machine share one entry of the cache: one wrote, the other reused it
    entries = [p.name for p in (tmp_path / "cache").iterdir()
               if p.is_dir() and p.name != FOLDER]  # beside the config file's read
    assert len(entries) == 1 and entries[0].startswith("seeded-"), entries


def test_ranks_skip_the_launching_scripts_main_module(gpt2_config, tmp_path) -> None:
    """A script that emulates runs its module once: multiprocessing would have every rank
    re-run it as __mp_main__ (its imports, a benchmark's transformers, paid per rank)."""
    runs = tmp_path / "module-runs"
    script = tmp_path / "script.py"
    script.write_text(f"open({str(runs)!r}, 'a').write(__name__ + '\\n')\n"
                      "if __name__ == '__main__':\n"
                      "    from archipelago.api import emulate\n"
                      f"    report = emulate({gpt2_config!r}, '2xu280', 'dfx', "
                      "{'tokens': '4:2'}, seed=0)\n"
                      "    assert report['tokens_match'], report\n")
    subprocess.run([sys.executable, str(script)], check=True, timeout=300)
    assert runs.read_text().split() == ["__main__"]


def test_import_archipelago_stays_free_of_torch() -> None:
    code = ("import sys, archipelago, archipelago.api, archipelago.cli, archipelago.emulate; "
            "assert not {'torch', 'transformers'} & set(sys.modules), 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_llama_with_replicated_kv_heads_on_four_ranks(tmp_path) -> None:
    """4 ranks over 2 key/value heads: each rank holds its one query head and a copy of
    the key/value head that head reads (each copy on 2 ranks), as vLLM does."""
    config = write_config(tmp_path, LLAMA)
    report = emulate(config, "4xu280", "lora-f", {"tokens": TOKENS}, seed=SEED)
    expected, scale = hf_greedy(hf_model(LLAMA, SEED), report["prompt"])
    assert report["generated"] == expected and report["tokens_match"]
    assert report["max_abs_logit_diff"] <= FP32_REL_TOL * scale
    plan = make_plan(config, "4xu280", "lora-f").program
    k = next(t for t in all_weights(plan.spec) if t.role == "k.weight")
    assert [(d.shard_for(k).start, d.shard_for(k).stop) for d in plan.devices] == \
        [(0, 8), (0, 8), (8, 16), (8, 16)]  # head_dim 32 / 4 heads = 8 columns per head
