"""Physical floors (issue 32 point 4): hand-computed floors per kind, the pipeline's refusal
of an estimate below one, and every kind's declaring its floors. The sweep of every
strategy over models and clusters is tests/test_floors_sweep.py."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from archipelago import api
from archipelago.cli import app
from archipelago.estimate.floors import BelowFloor, DeviceLoad, PhaseFloor, Read, check_floors
from archipelago.hardware.catalog import get_device
from archipelago.models.phase_reads import read_share
from archipelago.models.weights import WeightTensor
from archipelago.models.zoo import resolve_model
from archipelago.strategies.registry import kinds

# GPT-2 345M (zoo.yaml): tied head, learned positions, 24 layers of 12 h^2 + 13 h
# parameters (Q, K, V, output and the 4h-wide MLP's matrices; their biases and two
# LayerNorms), a final LayerNorm of 2 h.
H, LAYERS, VOCAB = 1024, 24, 50257
PROMPT = 64


def _mixtral(folder: Path, hidden: int, ffn: int, heads: int, layers: int, vocab: int,
             experts: int, per_token: int, positions: int) -> Path:
    """A Mixtral-shaped config.json (two key/value heads) written in `folder`."""
    path = folder / "config.json"
    path.write_text(json.dumps({
        "model_type": "mixtral", "hidden_size": hidden, "intermediate_size": ffn,
        "num_attention_heads": heads, "num_key_value_heads": 2, "num_hidden_layers": layers,
        "vocab_size": vocab, "num_local_experts": experts, "num_experts_per_tok": per_token,
        "max_position_embeddings": positions}))
    return path


def _phase_floors(strategy: str, cluster: str, tokens: str = "64:64",
                  batch: str = "1") -> dict[str, PhaseFloor]:
    result = api.plan_and_estimate("gpt2-345m", cluster, strategy,
                                   {"tokens": tokens, "batch": batch})
    hook = api.get_strategy(strategy).plan_kind.hook("floors")
    return {f.phase: f for f in hook(result.plan, result.workload, result.estimate)}


def test_a_read_held_in_two_memories_may_come_from_both_at_once() -> None:
    """10 GB only in HBM (10 GB/s), 4 GB only in DDR (2 GB/s), 6 GB in either: DDR alone
    needs 2 s, HBM alone 1 s, both together 20 GB / 12 GB/s; the floor is the largest."""
    load = DeviceLoad("board", (Read(10e9, ("hbm",)), Read(4e9, ("ddr",)),
                                Read(6e9, ("hbm", "ddr"))), {"hbm": 10e9, "ddr": 2e9})
    assert load.memory_floor()[0] == pytest.approx(2.0)
    lighter = DeviceLoad("board", (Read(10e9, ("hbm",)), Read(1e9, ("ddr",)),
                                   Read(6e9, ("hbm", "ddr"))), {"hbm": 10e9, "ddr": 2e9})
    assert lighter.memory_floor()[0] == pytest.approx(17 / 12)
    assert "ddr+hbm" in lighter.memory_floor()[1]


def test_compute_floor_and_the_slowest_device() -> None:
    fast = DeviceLoad("a", (Read(1e9, ("hbm",)),), {"hbm": 1e12}, 4e12, 1e15)  # 1 ms, 4 ms
    slow = DeviceLoad("b", (Read(3e9, ("hbm",)),), {"hbm": 1e12})  # 3 ms, no peak
    floor = PhaseFloor("prefill", 0.0035, (fast, slow))
    assert floor.floor()[0] == pytest.approx(4e-3)
    with pytest.raises(BelowFloor, match=r"prefill estimated at 3\.5 ms, below its "
                                         r"physical floor of 4 ms \(a does 4 TFLOP"):
        check_floors([floor], "plan")
    check_floors([PhaseFloor("prefill", 0.004, (fast, slow))], "plan")


def test_gpu_floor_by_hand() -> None:
    """One A100: every weight but the position table (the tied head reads the token
    table) and, decoding, the prompt's keys and values, at the datasheet's HBM bandwidth;
    prefill's matrix FLOPs at the FP16 peak are below that."""
    a100 = get_device("a100")
    bandwidth = a100.memories["hbm"].bandwidth_Bps
    weights = 2 * (LAYERS * (12 * H * H + 13 * H) + 2 * H + VOCAB * H)
    floors = _phase_floors("gpu-graph", "1xa100")
    assert floors["prefill"].floor()[0] == pytest.approx(weights / bandwidth)
    flops = 2 * PROMPT * LAYERS * 12 * H * H + 2 * H * VOCAB
    assert flops / a100.peak_fp16_flops < weights / bandwidth
    assert floors["prefill"].loads[0].flops == pytest.approx(flops)
    cache = 2 * LAYERS * H * PROMPT * 2  # keys and values, FP16
    assert floors["the first decode step"].floor()[0] == pytest.approx(
        (weights + cache) / bandwidth)
    halves = _phase_floors("gpu-graph", "2xa100")  # Megatron: half of each per GPU
    assert halves["prefill"].floor()[0] == pytest.approx(weights / 2 / bandwidth)


def test_tensor_parallel_floor_by_hand() -> None:
    """DFX on one U280 (seeds/001 §IV-B): the matrices in HBM (460 GB/s), biases and norms
    in DDR (38 GB/s), the tied head in both (the DDR table, the HBM copy): the three
    together at 498 GB/s bind."""
    hbm = LAYERS * 12 * H * H * 2
    ddr = (LAYERS * 13 * H + 2 * H) * 2
    head = VOCAB * H * 2
    floors = _phase_floors("dfx", "1xu280")
    assert floors["prefill"].floor()[0] == pytest.approx((hbm + ddr + head) / 498e9)
    assert hbm / 460e9 < (hbm + ddr + head) / 498e9
    cache = 2 * LAYERS * H * PROMPT * 2
    assert floors["the first decode step"].floor()[0] == pytest.approx(
        (hbm + ddr + head + cache) / 498e9)


def test_experts_read_by_the_distinct_experts_the_tokens_route_to(tmp_path: Path) -> None:
    """Top-2 of 4 experts: one token reads 2 of 4, three tokens 4 (1 - (1/2)^3) = 3.5 of
    4 in expectation (every expert misses a token with probability 1/2)."""
    path = _mixtral(tmp_path, hidden=64, ffn=128, heads=4, layers=1, vocab=97,
                    experts=4, per_token=2, positions=128)
    spec = resolve_model(str(path))
    stack = WeightTensor("experts_up.weight", (4, 64, 128), 0)
    assert read_share(spec, stack, 1) == pytest.approx(2 / 4)
    assert read_share(spec, stack, 3) == pytest.approx(3.5 / 4)
    table = WeightTensor("embed_tokens.weight", (97, 64))
    assert read_share(spec, table, 3) == 0.0  # untied: only looked-up rows


def test_an_estimate_below_its_floor_is_refused_in_one_line(monkeypatch, tmp_path: Path
                                                            ) -> None:
    """The GPU rows' old MoE bytes (a token's k experts, whatever the tokens) put a long
    prompt's prefill below the weights it must read: the CLI refuses it, exit 2."""
    from archipelago.models.graph import Op

    path = _mixtral(tmp_path, hidden=1024, ffn=4096, heads=8, layers=4, vocab=1000,
                    experts=64, per_token=1, positions=512)
    args = ["plan", str(path), "--strategy", "gpu-graph", "--cluster", "1xh100",
            "--tokens", "256:4"]
    assert CliRunner().invoke(app, args).exit_code == 0
    monkeypatch.setattr(Op, "read_scale", lambda op, tokens, skew=0.0: 1.0)
    out = CliRunner().invoke(app, args)
    assert out.exit_code == 2
    line = out.output.strip()
    assert "\n" not in line and line.startswith("error: ")
    assert "prefill estimated at" in line and "below its physical floor" in line


@pytest.mark.parametrize("strategy, cluster", [("gpu-graph", "1xh100"), ("lora-q", "2xu280")])
def test_a_skewed_router_moves_the_floor_with_the_estimate(strategy: str, cluster: str,
                                                           tmp_path: Path) -> None:
    """An engine config's `expert_skew` makes a step read fewer distinct experts; the
    floor assumes the same routing, so the skewed estimate is printed, not refused, and
    its floor is the lower one."""
    path = _mixtral(tmp_path, hidden=512, ffn=1024, heads=8, layers=2, vocab=1000,
                    experts=16, per_token=2, positions=512)
    hook = api.get_strategy(strategy).plan_kind.hook("floors")
    floor = {}
    for skew in (0.0, 4.0):
        result = api.plan_and_estimate(str(path), cluster, strategy,
                                       {"tokens": "8:8", "batch": "8"}, {"expert_skew": skew})
        floor[skew] = {f.phase: f.floor()[0] for f in hook(result.plan, result.workload,
                                                        result.estimate)}
    assert all(floor[4.0][phase] < floor[0.0][phase] for phase in floor[0.0])


@pytest.mark.parametrize("precision", ["fp8", "int8", "int4"])
def test_gpu_floors_read_the_plan_s_number_format(precision: str) -> None:
    """An FP8, INT8 or weight-only INT4 plan reads fewer bytes than FP16 and runs its
    products at its format's tensor rate: its floor is lower, and the estimate (faster
    than FP16's) is printed, not refused against an FP16 floor."""
    floors = {}
    for p in ("fp16", precision):
        result = api.plan_and_estimate("llama2-7b", "1xh100", "gpu-graph",
                                       {"tokens": "128:8", "precision": p})
        hook = api.get_strategy("gpu-graph").plan_kind.hook("floors")
        floors[p] = {f.phase: f.floor()[0]
                     for f in hook(result.plan, result.workload, result.estimate)}
    assert all(floors[precision][k] < floors["fp16"][k] for k in floors["fp16"])


def test_every_builtin_kind_declares_its_floors() -> None:
    assert [k.name for k in kinds().values() if k.floors is None] == []


def _floors_of(model: str, cluster: str, strategy: str, workload: dict[str, str]
               ) -> list[PhaseFloor]:
    result = api.plan_and_estimate(model, cluster, strategy, workload)
    hook = api.get_strategy(strategy).plan_kind.hook("floors")
    return hook(result.plan, result.workload, result.estimate)


def test_dataflow_floor_by_hand() -> None:
    """BERT-base on 72 Sidewinders (seeds/000 §8): the FPGAs hold its 12 x (4 x 768^2 +
    2 x 768 x 3072) int8 matrix weights between them, each FPGA's read on chip at no more
    than (984 BRAM + 128 URAM) x 144 bits + 522,720 LUT + 1,045,440 FF bits per cycle of
    the 200 MHz kernel clock."""
    floors = _floors_of("bert-base", "72xsidewinder", "galapagos", {"seq_len": "128"})
    loads = floors[0].loads
    assert sum(load.reads[0].bytes for load in loads) == 12 * (4 * 768**2 + 2 * 768 * 3072)
    bandwidth = ((984 + 128) * 144 + 522720 + 1045440) * 200e6 / 8
    heaviest = max(load.reads[0].bytes for load in loads)
    assert [f.floor()[0] for f in floors] == pytest.approx([heaviest / bandwidth] * 2)


@pytest.mark.parametrize(("weights", "bandwidth"), [
    ("pcie", 15.754e9),  # the D5005's PCIe Gen3 x16 (catalog)
    ("ddr4", 76.8e9),  # its four DDR4-2400 banks (catalog)
    ("persistent", 11721 * 144 * 200e6 / 8),  # its M20Ks, over-counted, at 200 MHz
])
def test_host_program_floor_by_hand(weights: str, bandwidth: float) -> None:
    """A 1024 x 1024 int8 matvec on one Stratix 10 card: its 1 MiB of weights (not the
    MRFs' padding) from where the layout keeps them."""
    floors = _floors_of("matvec", "1xs10-2800", "persistent",
                        {"hidden": "1024", "weights": weights})
    assert floors[0].floor()[0] == pytest.approx(1024 * 1024 / bandwidth)


def test_scheduled_dag_floor_by_hand() -> None:
    """CNN-LSTM on HACC's U280 and U250 (seeds/004 §VII-B): every FP32 weight of the DAG
    read by the FPGA its layer runs on, from its DRAM (the U250's 77 GB/s DDR4, the U280's
    460 GB/s HBM and 38 GB/s DDR) or from outside (16 GB/s PCIe, twice the 3 GB/s link)."""
    result = api.plan_and_estimate("cnn-lstm", "hacc", "chef", {})
    loads = api.get_strategy("chef").plan_kind.hook("floors")(
        result.plan, result.workload, result.estimate)[0].loads
    weights = sum(layer.weight_elements for layer in result.plan.dag.layers) * 4
    assert sum(load.reads[0].bytes for load in loads) == weights
    outside = 16e9 + 2 * 3e9
    expected = {"u280": 498e9 + outside, "u250": 77e9 + outside}
    for load in loads:
        board = next(key for key in expected if key in load.device)
        assert sum(load.bandwidths.values()) == pytest.approx(expected[board])


def test_design_search_held_to_the_floors() -> None:
    """A design search costs many designs without whole estimates: each is held to the
    floors of every phase as `archi plan` holds it, and refused alone (DFX on one U280,
    the floors of test_tensor_parallel_floor_by_hand)."""
    import numpy as np

    from archipelago.strategies.tensor_parallel.floors import (
        Timing,
        design_refusals,
        phase_bounds,
    )

    result = api.plan_and_estimate("gpt2-345m", "1xu280", "dfx", {"tokens": "64:64"})
    est = result.estimate
    weights = (LAYERS * 12 * H * H + (LAYERS * 13 * H + 2 * H) + VOCAB * H) * 2
    first_step = (weights + 2 * LAYERS * H * PROMPT * 2) / 498e9
    timing = Timing(prefill_s=est.prefill_s, decode_s_last=est.decode_s_last,
                    decode_s_per_token=est.decode_s_per_token,
                    decode_s_first=np.array([est.decode_s_first, first_step * 0.999]))
    bounds = phase_bounds(result.plan, result.workload)
    ok, refused = design_refusals(bounds, timing, 2, "search")
    assert ok is None
    assert refused is not None and refused.startswith(
        "search: the first decode step estimated at")
    assert f"floor of {first_step * 1e3:,.4g} ms" in refused


def test_on_chip_bandwidth_by_hand() -> None:
    """Block RAMs and UltraRAMs at two 72-bit ports, LUTs and flip-flops at a bit, per
    cycle of the fabric's clock; AI Engines at 512 bits per cycle of their 1 GHz."""
    from archipelago.hardware.device import Resources
    from archipelago.hardware.on_chip import on_chip_Bps

    fabric = Resources(bram=10, uram=2, lut=800, ff=1600)
    assert on_chip_Bps(fabric, 300e6) == pytest.approx((12 * 144 + 2400) * 300e6 / 8)
    assert on_chip_Bps(Resources(aie=400), 300e6) == pytest.approx(400 * 64 * 1e9)
