"""The GPU kernel mechanisms by hand (a small GEMV held to its SMs' bytes in flight, a
wave-quantized grid, a prefill product's tiles, an eager step with generate's loop), the
precision rules and their refusals, issue 33's calibration points and the physical floor."""

import math
import subprocess
import sys

import numpy as np
import pytest

from archipelago.api import plan_and_estimate
from archipelago.errors import ArchipelagoError
from archipelago.hardware.catalog import get_device
from archipelago.models.graph_ops import decode
from archipelago.strategies.gpu.estimate import step_s
from archipelago.strategies.gpu.formats import FORMATS, format_on
from archipelago.strategies.gpu.kernel_time import GPUCore, busy_sms, gemm_s, stream_Bps
from archipelago.strategies.gpu.plan import GPUConfig
from archipelago.strategies.gpu.roofline import op_cost, op_s
from archipelago.strategies.gpu.steps import Step
from benchmarks.fit_gpu import POINTS

H100 = GPUCore(sms=132, tensor_ops_per_s=989.4e12, cuda_core_flops=66.9e12,
               memory_Bps=3.35e12, memory_efficiency=0.84)


def _small_gemv():
    """A 256 x 256 FP16 matrix at batch 1 (a q of a 4-head, 64-dim toy decoder)."""
    from archipelago.models.graph import build_graph
    from archipelago.models.zoo import zoo_model
    spec = zoo_model("gpt2-345m").model_copy(update={"hidden": 256, "heads": 4, "ffn": 1024})
    graph = build_graph(spec)
    return spec, next(op for op in graph.block if op.name == "q")


def test_a_small_gemv_streams_at_its_blocks_bytes_in_flight() -> None:
    spec, q = _small_gemv()
    cost = op_cost(q, spec, decode(10), 1, 1)
    moved = 256 * 256 * 2 + (256 + 256) * 2  # weights, the rows in and out
    assert cost.bytes == moved
    # 2 tiles of 128 columns; cuBLAS's split-K cuts K=256 into 2 slices of 128: 4 blocks on
    # 4 SMs, each with 32 KiB in flight against 600 ns: 4 x 54.6 GB/s = 218 GB/s, far under
    # the 2.81 TB/s the whole GPU streams at
    by_hand = moved / (4 * 32768 / 600e-9)
    assert op_s(cost, decode(10), 1, 1, FORMATS["fp16"], H100) == pytest.approx(by_hand)
    assert by_hand == pytest.approx(605e-9, rel=0.01)


def test_a_grid_smaller_than_the_gpu_or_one_block_over_runs_in_waves() -> None:
    assert busy_sms(64, 132) == 64  # one partial wave: 68 SMs idle
    assert busy_sms(133, 132) == 66.5  # two waves, the second of one block
    assert busy_sms(264, 132) == 132
    # Little's law: 64 SMs x 32 KiB / 600 ns = 3.50 TB/s, over the GPU's 0.84 x 3.35
    assert stream_Bps(64, H100) == pytest.approx(0.84 * 3.35e12)
    assert stream_Bps(16, H100) == pytest.approx(16 * 32768 / 600e-9)  # 874 GB/s


def test_long_context_attention_at_batch_1_is_held_to_its_heads_unless_split() -> None:
    from archipelago.models.graph import build_graph
    from archipelago.models.zoo import zoo_model
    graph = build_graph(zoo_model("llama2-7b"))
    scores = next(op for op in graph.block if op.kind == "attn_score")
    phase = decode(4096)
    cost = op_cost(scores, graph.spec, phase, 1, 1)
    moved = 4096 * 4096 * 2 + 4096 * 2  # 4,096 cached keys of 32 x 128, the query
    assert cost.bytes == moved
    fp16 = FORMATS["fp16"]
    # one block per head: 32 SMs x 32 KiB / 600 ns = 1.75 TB/s
    assert op_s(cost, phase, 1, 1, fp16, H100) == pytest.approx(moved / (32 * 32768 / 600e-9))
    # Flash-Decoding splits the keys 5 ways (132 / 32 SMs): 160 blocks, 80 SMs busy on
    # average over two waves, more than enough to stream at the GPU's 0.84 x 3.35 TB/s
    assert op_s(cost, phase, 1, 1, fp16, H100, split_kv=True) == pytest.approx(
        moved / (0.84 * 3.35e12))


def test_a_prefill_product_runs_whole_tiles_in_waves() -> None:
    per_sm = 0.7 * 989.4e12 / 132
    # 128 x 4096 x 4096: 32 tiles of 128 x 128, split-K 4 (132 // 32) fills 128 SMs in one
    # wave, each a quarter of a tile's 2 x 128 x 128 x 4096 operations
    assert gemm_s(128, 4096, 4096, H100) == pytest.approx(2 * 128 * 128 * 4096 / 4 / per_sm)
    # 128 x 17,024 x 128: 133 tiles, K too short to split: two waves for one block more
    assert gemm_s(128, 133 * 128, 128, H100) == pytest.approx(2 * 2 * 128 * 128 * 128
                                                               / per_sm)
    # 20 rows take a 32-row tile: a 4096 x 4096 product pads 20 to 32
    assert gemm_s(20, 4096, 4096, H100) == pytest.approx(2 * 32 * 128 * 4096 / 4 / per_sm)


def test_an_eager_step_waits_for_its_issue_and_generate_adds_its_loop() -> None:
    # host 10 us per launch, floor 1 us per kernel; kernels of 2, 30 and 2 us launching
    # 1, 2 and 1 kernels: issued at 10, 30, 40; ends max(10, 0) + 3 = 13, max(30, 13) + 32
    # = 62, max(40, 62) + 3 = 65 us
    config = GPUConfig(host_op_s=10e-6, kernel_floor_s=1e-6)
    step = Step(np.array([[2e-6], [30e-6], [2e-6]]), np.array([1, 2, 1]),
                {"k": np.arange(3)})
    end, _ = step_s(config, step, captured=False)
    assert end[0] == pytest.approx(65e-6)
    # captured: one launch, then back to back: 10 + 3 + 32 + 3
    assert step_s(config, step, captured=True)[0][0] == pytest.approx(48e-6)
    base = {"token_s": 0.0, "call_s": 0.0}
    plain = plan_and_estimate("gpt2-345m", "1xh100", "gpu-eager", {"tokens": "8:8"},
                              base).estimate
    loop = plan_and_estimate("gpt2-345m", "1xh100", "gpu-eager", {"tokens": "8:8"},
                             {"token_s": 1e-3, "call_s": 5e-3}).estimate
    assert loop.decode_s_per_token - plain.decode_s_per_token == pytest.approx(1e-3)
    assert loop.prefill_s - plain.prefill_s == pytest.approx(6e-3)


@pytest.mark.parametrize("point", POINTS, ids=lambda p: f"{p[0]}-{p[2]}")
def test_the_calibration_points_are_within_5_percent(point) -> None:
    model, tokens, strategy, prefill, step, rate = point
    est = plan_and_estimate(model, "1xh100", strategy, {"tokens": tokens}).estimate
    assert est.prefill_s == pytest.approx(prefill, rel=0.05)
    assert est.decode_s_per_token == pytest.approx(step, rel=0.05)
    assert est.tokens_per_s == pytest.approx(rate, rel=0.05)


@pytest.mark.parametrize("batch", [1, 8, 64])
@pytest.mark.parametrize("case", [("gpt2-345m", "1xh100", "fp16"),
                                  ("llama2-7b", "2xa100", "int8"),
                                  ("llama2-7b", "1xh200", "fp8"),
                                  ("gpt2-1.5b", "1xl4", "int4")])
def test_a_token_never_beats_its_bytes_at_the_peak_bandwidth(case, batch) -> None:
    model, cluster, precision = case
    for strategy in ("gpu-graph", "gpu-eager"):
        result = plan_and_estimate(model, cluster, strategy, {
            "tokens": "256:256", "batch": str(batch), "precision": precision})
        est, plan = result.estimate, result.plan
        floor = est.decode_bytes_per_token / (plan.ranks * plan.memory_Bps)
        assert est.decode_s_per_token > floor


def test_formats_read_their_bytes_at_their_tensor_rates() -> None:
    h100, a100, l4, v100 = (get_device(k) for k in ("h100", "a100", "l4", "v100"))
    assert format_on(h100, "fp8")[1] == 1978.9e12 and format_on(l4, "fp8")[1] == 242.5e12
    assert format_on(a100, "int8")[1] == 624e12
    assert format_on(a100, "int4")[1] == 312e12  # weight-only: FP16 products
    # the former spellings are synonyms of the shared vocabulary's names
    assert format_on(a100, "int4")[0] == FORMATS["w4a16"]
    assert format_on(a100, "int8")[0] == FORMATS["w8a8"]
    assert FORMATS["w4a16"].weight_bytes == 0.5 + 2 / 128  # an FP16 scale per 128 weights
    held = {p: plan_and_estimate("llama2-7b", "1xh100", "gpu-graph", {
        "tokens": "128:128", "batch": "8", "precision": p}).estimate.memory_bytes
        for p in ("fp16", "fp8", "int4")}
    assert held["fp8"] == pytest.approx(held["fp16"] / 2)  # weights and KV cache in one byte
    kv = held["fp16"] - 6_738_415_616 * 2  # int4 keeps the KV cache in FP16
    assert held["int4"] == pytest.approx(6_738_415_616 * (0.5 + 2 / 128) + kv)
    step = {p: plan_and_estimate("llama2-7b", "1xh100", "gpu-graph", {
        "tokens": "128:128", "precision": p}).estimate.decode_s_per_token
        for p in ("fp16", "fp8")}
    assert 1.3 < step["fp16"] / step["fp8"] < 2  # half the bytes, the same kernel floors
    with pytest.raises(ArchipelagoError, match=r"no FP8 tensor cores; it serves fp16, "
                                               r"fp16-kv8, bf16, bf16-kv8, w8a8, w4a16, "
                                               r"w4a16-kv8, w4a8$"):
        format_on(a100, "fp8")
    with pytest.raises(ArchipelagoError, match="no BF16 tensor cores"):
        format_on(v100, "bf16")
    with pytest.raises(ArchipelagoError, match=r"valid choices are fp16, fp16-kv8, bf16, "
                                               r"bf16-kv8, fp8, w8a8, w4a16, w4a16-kv8, "
                                               r"w4a8, int8, int4$"):
        plan_and_estimate("llama2-7b", "1xh100", "gpu-graph", {"precision": "fp6"})


def test_a_format_a_gpu_lacks_is_refused_in_one_line() -> None:
    run = subprocess.run([sys.executable, "-m", "archipelago", "plan", "llama2-7b",
                          "--cluster", "1xa100", "--strategy", "gpu-graph",
                          "--precision", "fp8"], capture_output=True, text=True)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert run.stderr.strip().count("\n") == 0 and "no FP8 tensor cores" in run.stderr


def test_an_fp8_model_fits_where_fp16_does_not() -> None:
    spec_bytes = 6_738_415_616
    # 16 sequences of 2,048 tokens: 17.2 GB of FP16 KV cache beside 13.5 GB of weights, over
    # the L4's 24 GiB; in FP8 half of each
    fp16 = plan_and_estimate("llama2-7b", "1xl4", "gpu-graph", {"tokens": "1024:1024",
                                                               "batch": "16"}).estimate
    fp8 = plan_and_estimate("llama2-7b", "1xl4", "gpu-graph", {
        "tokens": "1024:1024", "batch": "16", "precision": "fp8"}).estimate
    assert not fp16.feasible and "in fp16" in fp16.reasons[0]
    assert fp8.feasible and fp8.memory_bytes > spec_bytes  # weights plus 16 caches
    assert math.isclose(fp8.memory_bytes * 2, fp16.memory_bytes)


def test_the_measurement_script_refuses_cleanly_without_cuda() -> None:
    from benchmarks import gpu_decode

    assert gpu_decode.catalog_key("NVIDIA H100 80GB HBM3") == "h100"
    assert gpu_decode.catalog_key("NVIDIA H200") == "h200"
    assert gpu_decode.catalog_key("NVIDIA GeForce RTX 4090") is None
    assert gpu_decode.parse_batches("1,8,64") == [1, 8, 64]
    with pytest.raises(ValueError, match=r"1\.\.64"):
        gpu_decode.parse_batches("1,128")
    # its estimates take a config file as `archi plan` does
    est = gpu_decode.estimated("tests/data/llama-2-13b/config.json", "h100", "16:16", 2)
    assert set(est) == {"eager", "graph"} and est["eager"][1] > est["graph"][1] > 0
    for args in ([], ["--batches", "0"], ["--modes", "jit"]):
        run = subprocess.run([sys.executable, "-m", "benchmarks.gpu_decode", *args],
                             capture_output=True, text=True)
        assert run.returncode == 2 and run.stderr.count("\n") == 1, run.stderr
        assert "Traceback" not in run.stderr


def test_compare_rows_take_the_precision_and_key_it_apart() -> None:
    from archipelago.compare.combos import Combo, estimate_combo
    from archipelago.models.zoo import zoo_model

    spec = zoo_model("llama2-7b")
    h100 = Combo("gpu-graph", "h100", 1, 1, precision="fp8")
    fp8 = estimate_combo(spec, "128:128", h100)
    fp16 = estimate_combo(spec, "128:128", Combo("gpu-graph", "h100", 1, 1))
    assert fp8["status"] == fp16["status"] == "ok"
    assert fp8["decode_s_per_token"] < 0.7 * fp16["decode_s_per_token"]
    a100 = estimate_combo(spec, "128:128", Combo("gpu-graph", "a100", 1, 1, precision="fp8"))
    assert a100["status"] == "refused" and "no FP8 tensor cores" in a100["reason"]
    dfx = estimate_combo(spec, "128:128", Combo("dfx", "u280", 4, 1, precision="fp8"))
    assert dfx["status"] == "refused" and "--precision" in dfx["reason"]
    # one store holds every format: each record's key names its own
    assert h100.key() != Combo("gpu-graph", "h100", 1, 1).key()
