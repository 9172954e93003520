"""--batch B on the tensor-parallel kind: B sequences in lockstep on LORA's engine (decode
vectors share each weight tile), in turn on DFX's (no input batching, seeds/001 §V-B), the
KV cache of every sequence counted; an infeasible plan says why first and exits 1."""

import json

import numpy as np
import pytest

from archipelago.api import make_plan, plan_and_estimate
from archipelago.errors import ArchipelagoError
from archipelago.estimate.workload import parse_generation
from archipelago.hardware.catalog import get_device
from archipelago.models.graph import build_graph
from archipelago.models.graph_ops import Phase
from archipelago.models.zoo import resolve_model
from archipelago.strategies.tensor_parallel.engines.systolic import SystolicEngine
from archipelago.strategies.tensor_parallel.engines.systolic_config import SystolicConfig
from archipelago.strategies.tensor_parallel.page_sweeps import batch_sweep
from archipelago.strategies.tensor_parallel.plan import ComputeStep
from tests.cli_here import archi_here


def test_dfx_runs_a_batch_one_sequence_after_another() -> None:
    _, _, one = plan_and_estimate("gpt2-345m", "4xu280", "dfx", {"tokens": "64:64"})
    _, _, four = plan_and_estimate("gpt2-345m", "4xu280", "dfx",
                                   {"tokens": "64:64", "batch": "4"})
    assert four.latency_s == pytest.approx(4 * one.latency_s)
    assert four.prefill_s == pytest.approx(4 * one.prefill_s)
    assert four.decode_s_per_token == pytest.approx(4 * one.decode_s_per_token)
    assert four.tokens_per_s == pytest.approx(one.tokens_per_s)  # 4 x 64 tokens in 4 x time
    assert "one sequence at a time" in four.batch_note and one.batch_note is None
    # Each device caches K and V of its 4 of 16 heads (256 values), 24 layers, 128 tokens,
    # FP16, for 3 more sequences.
    extra = 3 * 2 * 24 * 128 * 256 * 2
    assert [f.hbm_bytes - o.hbm_bytes for f, o in zip(four.devices, one.devices,
                                                     strict=True)] == [extra] * 4


def _engine() -> tuple[SystolicEngine, ComputeStep]:
    spec = resolve_model("gpt2-345m")
    engine = SystolicEngine(SystolicConfig(), get_device("u280"), spec, 1)
    q = next(op for op in build_graph(spec).block if op.name == "q")
    return engine, ComputeStep(q, 1024)


@pytest.mark.parametrize(("vectors", "expected"), [
    # SystolicConfig's field defaults (§V-C's 32 x 32 example, 200 MHz): q is 1024 x 1024
    # FP16, 32 x 32 tiles of 2 KiB, 32 iterations of 32 tiles. HBM gives 32 x min(12.8,
    # 0.6986 x 460 / 32) GB/s = 1606.8 bytes a cycle: L_axi = 65536 / 1606.8. Vector mode:
    # L_cal = B x 2 x 32. Matrix mode from HBM: 1024 tile pairs of 32^3 / 32^2 = 32 cycles,
    # L_buf = 2048 / 1606.8, plus 2 x 32 fill: the sooner of the two.
    (1, 65536 / 1606.78 + 64 * 31 + 64),
    (4, 65536 / 1606.78 + 256 * 31 + 256),
    (32, 2048 / 1606.78 + 32 * 1023 + 32 + 64),
])
def test_lora_decode_vectors_share_each_tile(vectors: int, expected: float) -> None:
    engine, step = _engine()
    batched = ComputeStep(step.op, step.local_out, sequences=vectors)
    cycles = engine.cycles(batched, Phase(1, np.array([64])))[0]
    assert cycles == pytest.approx(expected, rel=1e-4)


def test_lora_batch_reads_weights_once_and_every_kv_cache() -> None:
    engine, step = _engine()
    phase = Phase(1, np.array([64]))
    batched = ComputeStep(step.op, step.local_out, sequences=8)
    assert engine.streamed_bytes(batched, phase)[0] == engine.streamed_bytes(step, phase)[0]
    score = next(op for op in build_graph(resolve_model("gpt2-345m")).block
                 if op.name == "attn_score")
    one, eight = (engine.streamed_bytes(ComputeStep(score, 64, 16, sequences=n), phase)[0]
                  for n in (1, 8))
    assert eight == 8 * one


def test_lora_batch_raises_throughput_and_counts_every_cache() -> None:
    _, _, one = plan_and_estimate("gpt2-345m", "4xu280", "lora-q", {"tokens": "64:64"})
    _, _, eight = plan_and_estimate("gpt2-345m", "4xu280", "lora-q",
                                    {"tokens": "64:64", "batch": "8"})
    assert eight.batch_note is None
    assert one.decode_s_per_token < eight.decode_s_per_token < 8 * one.decode_s_per_token
    assert eight.tokens_per_s > one.tokens_per_s
    assert eight.tokens_per_s_per_device == pytest.approx(eight.tokens_per_s / 4)
    extra = 7 * 2 * 24 * 128 * 256 * 1  # int8 K and V of 7 more sequences on each device
    assert eight.devices[0].hbm_bytes - one.devices[0].hbm_bytes == extra


def test_batch_sweep_stops_where_the_kv_caches_no_longer_fit() -> None:
    plan, work, _ = plan_and_estimate("llama2-7b", "4xu280", "lora-q", {"tokens": "1024:1024"})
    points = batch_sweep(plan, work)
    batches = [b for b, _ in points]
    assert batches == [2 ** i for i in range(len(batches))] and batches[-1] < 256
    assert all(e.feasible for _, e in points)
    after = plan_and_estimate("llama2-7b", "4xu280", "lora-q",
                              {"tokens": "1024:1024", "batch": str(2 * batches[-1])})
    assert not after.estimate.feasible


@pytest.mark.parametrize("text", ["0", "-1", "x", "2.5", "5000"])
def test_bad_batch_is_one_line(text: str) -> None:
    with pytest.raises(ArchipelagoError, match="--batch"):
        parse_generation("8:8", text)


archi = archi_here  # what `plan` prints: in this process (tests/cli_here.py)


def test_a_plan_that_does_not_fit_says_why_first_and_exits_1() -> None:
    out = archi("plan", "llama2-7b", "--cluster", "1xu280", "--strategy", "dfx")
    assert out.returncode == 1, out.stderr
    first = out.stdout.splitlines()[0]
    assert first.startswith("does not fit: device 0 (u280): HBM needs") and "over)" in first
    assert "if it fitted" in out.stdout
    out = archi("plan", "llama2-7b", "--cluster", "1xu280", "--strategy", "dfx", "--json")
    report = json.loads(out.stdout)
    assert out.returncode == 1 and report["feasible"] is False and report["reasons"]


def test_batch_reaches_the_json_and_the_refusal_is_one_line() -> None:
    out = archi("plan", "gpt2-345m", "--strategy", "lora-q", "--batch", "4", "--json")
    report = json.loads(out.stdout)
    assert out.returncode == 0 and report["batch"] == 4 and report["batch_note"] is None
    assert report["time_to_first_token_s"] == report["prefill_s"]
    out = archi("plan", "gpt2-345m", "--batch", "0")
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "--batch 0" in out.stderr


def test_make_plan_ignores_the_batch() -> None:
    """The batch is a workload: one plan serves every batch size."""
    assert make_plan("gpt2-345m", "2xu280", "lora-f").program.block_steps == make_plan(
        "gpt2-345m", "2xu280", "lora-f", workload={"batch": "16"}).program.block_steps


def test_decode_efficiency_counts_a_steps_bytes_for_the_whole_batch() -> None:
    from archipelago.strategies.tensor_parallel.efficiency import (
        decode_efficiency,
        weight_bytes_per_token,
    )

    for strategy, weight_reads in (("lora-q", 1), ("dfx", 4)):  # DFX rereads per sequence
        plan, work, est = plan_and_estimate("gpt2-345m", "2xu280", strategy,
                                            {"tokens": "32:32", "batch": "4"})
        eff = decode_efficiency(plan, work, est)
        ring = plan.program
        kv = 2 * 24 * 48 * 1024 * ring.bytes_per_param  # mean decode context 32 + 32 / 2
        weights = weight_bytes_per_token(ring.graph, ring.bytes_per_param)
        assert eff.bytes_per_token == weight_reads * weights + 4 * kv
