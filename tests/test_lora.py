"""LORA: sync scheme, systolic engine cycles and resources by hand, overlap formulas."""

import json

import numpy as np
import pytest

from archipelago.api import make_plan, plan_and_estimate
from archipelago.hardware.catalog import get_device
from archipelago.models.graph_ops import Op, Phase
from archipelago.models.zoo import resolve_model
from archipelago.strategies.tensor_parallel.engines import systolic
from archipelago.strategies.tensor_parallel.engines.overlap import (
    collective_seconds,
    exposed_seconds,
)
from archipelago.strategies.tensor_parallel.engines.systolic import SystolicEngine
from archipelago.strategies.tensor_parallel.engines.systolic_config import SystolicConfig
from archipelago.strategies.tensor_parallel.plan import CommStep, ComputeStep
from tests.cli_here import archi_here

SPEC = resolve_model("gpt2-345m")


def test_four_all_gathers_and_two_all_reduces_per_block() -> None:
    plan = make_plan("gpt2-345m", "4xu280", "lora-f").program
    comm = [(c.kind, c.tensor, c.overlap) for c in plan.comm_steps()]
    assert comm == [
        ("all_reduce", "attn_norm", "row_groups"), ("all_gather", "attn_norm", "matmul_blocks"),
        ("all_gather", "attn_context", "matmul_blocks"),
        ("all_reduce", "ffn_norm", "row_groups"), ("all_gather", "ffn_norm", "matmul_blocks"),
        ("all_gather", "ffn_act", "matmul_blocks")]
    residual = next(s for s in plan.block_steps
                    if isinstance(s, ComputeStep) and s.op.name == "attn_residual")
    assert residual.local_out == 1024 // 4  # the residual stream stays column-split
    assert plan.devices[1].layer_shards["attn_norm.weight"].axis == 0  # LayerNorm split too


def test_lora_q_moves_int8_activations_and_weights() -> None:
    plan = make_plan("gpt2-345m", "2xu280", "lora-q").program
    gathers = [c for c in plan.comm_steps() if c.kind == "all_gather"]
    assert {c.value_bytes for c in gathers} == {1.0} and plan.bytes_per_param == 1.0
    assert plan.engine.config.clock_hz == 250e6


def engine(**overrides) -> SystolicEngine:
    return SystolicEngine(SystolicConfig(**overrides), get_device("u280"), SPEC, 1)


def test_mpu_and_vfu_dsp_by_hand() -> None:
    small = dict(d_sa=4, t_m=4, t_v=4, n_acc=8)
    fp16 = engine(**small).resources(SPEC)
    # FP16 PE: multiplier (1 DSP) + adder (2 DSPs); Eq. 7: (exp 2 + square 1) x 8 +
    # add 2 x (3 x 8 - 1); scaling module: 2 x (mul 1 + add 2) x 8.
    assert fp16["mpu"].dsp == 16 * 3
    assert fp16["vfu"].dsp == 3 * 8 + 2 * 23 + 2 * 3 * 8
    assert engine(**small, precision="w8a8").resources(SPEC)["mpu"].dsp == 16 // 2


def test_eq5_weight_buffer_by_hand() -> None:
    """T_m = 32, P_w = D_sa = 32, FP16: 1 x ceil(1024 / 32768) x 32 x 2 = 64 BRAM18."""
    base = engine().resources(SPEC)["buffers"].bram
    wider = engine(d_sa=64, t_m=64, t_v=64).resources(SPEC)["buffers"].bram
    # D_sa = T_m = 64: 1 x ceil(4096 / 65536) x 64 x 2 = 128 BRAM18, i.e. 32 more BRAM36.
    assert wider - base == 32


def test_vector_matrix_cycles_by_hand() -> None:
    """K = N = 1024 on 32 x 32: 1024 tiles, 32 iterations of T_v = 32 tiles; each loads
    64 KB (L_axi) while the previous one computes for 2 x 32 cycles (L_cal), Eq. 8. A
    pseudo-channel gives min(512 bits x 200 MHz, HBM_EFFICIENCY x 460 / 32 GB/s)."""
    eng = engine()
    per_channel = min(64 * 200e6, systolic.HBM_EFFICIENCY * 460e9 / 32)
    assert eng.hbm_bytes_per_cycle == pytest.approx(32 * per_channel / 200e6)
    op = Op("q", "linear", 1024, 1024, ("x",), weight="q")
    cycles = eng.cycles(ComputeStep(op, 1024), Phase(1, np.array([10])))
    l_axi = 32 * 32 * 32 * 2 / eng.hbm_bytes_per_cycle
    assert l_axi < 64 and cycles[0] == pytest.approx(l_axi + 31 * 64 + 64)


def test_decode_and_prefill_demands_match_section_v_c() -> None:
    """§V-C, 32 x 32 array at 200 MHz: prefill needs "approximately 11 GB/s", decode "around
    190 GB/s" (GiB: 2 KB per 32-cycle tile pair is 11.9 GiB/s; 64 KB per 2 x 32-cycle
    iteration 190.7 GiB/s, 381 were it T_m cycles). Measured on the engine: bytes a
    1024 x 1024 layer streams over its cycles, both short of the 32-row prefill's DDR and
    the decode's HBM rates, so the array sets the pace."""
    eng, gib = engine(), 2 ** 30
    op = Op("ffn_up", "linear", 1024, 1024, ("x",), weight="ffn_up")
    step = ComputeStep(op, 1024)
    rates = {}
    for rows in (1, 32):
        phase = Phase(rows, np.array([rows]))
        seconds = eng.seconds(step, phase)[0]
        rates[rows] = eng.streamed_bytes(step, phase)[0] / seconds / gib
    assert rates[32] == pytest.approx(11.9, rel=0.02)
    assert rates[1] == pytest.approx(190.7, rel=0.03)


def test_w8a8_halves_the_bytes_of_an_hbm_bound_decode() -> None:
    """A 64 x 64 array at 250 MHz: an iteration of 64 int8 tiles (256 KB) loads in
    L_axi = 262144 / (32 x min(16, 0.69 x 14.375) GB/s / 250 MHz) > 2 x 64 cycles, so the
    FFN-up matmul (1024 x 4096: 16 iterations) runs at HBM speed; FP16 moves twice the
    bytes in twice the time: W8A8 is nearly 2x faster (the last compute is not halved)."""
    q = engine(precision="w8a8", clock_hz=250e6, d_sa=64, t_m=64, t_v=64)
    rate = 32 * min(16e9, systolic.HBM_EFFICIENCY * 14.375e9) / 250e6
    assert q.hbm_bytes_per_cycle == pytest.approx(rate)
    op = Op("ffn_up", "linear", 1024, 4096, ("x",), weight="ffn_up")
    phase = Phase(1, np.array([10]))
    l_axi = 64 * 64 * 64 / rate
    int8 = q.cycles(ComputeStep(op, 4096), phase)[0]
    assert l_axi > 128 and int8 == pytest.approx(l_axi + 15 * l_axi + 128)
    f = engine(clock_hz=250e6, d_sa=64, t_m=64, t_v=64)
    fp16 = f.cycles(ComputeStep(op, 4096), phase)[0]
    assert fp16 == pytest.approx(2 * l_axi * 16 + 128)
    assert f.streamed_bytes(ComputeStep(op, 4096), phase)[0] == 2 * q.streamed_bytes(
        ComputeStep(op, 4096), phase)[0] == 2 * 1024 * 4096
    assert 1.9 < fp16 / int8 < 2


def test_layernorm_statistics_of_one_row_take_about_121_cycles() -> None:
    """§VI-C, GPT-2 1.5B on four boards: "computing the mean and variance for a single row
    takes about 121 cycles". 384 local columns on 64 accumulators: 6 sweeps, the square, a
    6-level tree of 11-cycle adders, then two multiplies and a subtract: 101 cycles."""
    op = Op("attn_norm", "norm", 1536, 1536, ("x",), weight="attn_norm")
    stats = engine().cycles(ComputeStep(op, 384, stage="stats"), Phase(1, np.array([1])))
    assert stats[0] == 6 + 6 + 6 * 11 + 2 * 6 + 11
    assert stats[0] == pytest.approx(121, rel=0.2)


def test_lora_q_default_is_the_hbm_bound_array() -> None:
    """§V-D: the INT8 MPU is bounded by HBM bandwidth, so the default grows the array until
    its decode demand (D_sa^2 / 2 bytes per cycle) passes the 460 GB/s of HBM."""
    plan = make_plan("gpt2-345m", "1xu280", "lora-q").program
    c = plan.engine.config
    hbm = get_device("u280").memory("hbm").bandwidth_Bps
    assert c.d_sa ** 2 / 2 * c.clock_hz > hbm > 48 ** 2 / 2 * c.clock_hz


def test_kv_cache_spill_to_hbm_slows_attention() -> None:
    """64 x 64 FP16 array, 16 heads of 64, context 648: 16 x 11 = 176 K tiles, 3
    iterations of 58.7 tiles (481 KB). 864 URAMs hold 324 tokens (864 x 36 KB over 24
    layers x 2 x 1024 x 2 B), so half the rows come from HBM: L_axi = 481 KB x 0.5 / HBM
    rate > 128 cycles. With 2000 URAMs all rows stream at 2000 x 9 B per cycle."""
    op = Op("attn_score", "attn_score", 64, 64, ("q", "k"), heads=16)
    step, phase = ComputeStep(op, 64, 16), Phase(1, np.array([648]))
    spilling = engine(d_sa=64, t_m=64, t_v=64)
    assert spilling.kv_tokens_onchip == 324
    per_iteration = 176 / 3 * 64 * 64 * 2
    l_axi = per_iteration * 0.5 / spilling.hbm_bytes_per_cycle
    assert l_axi > 128
    assert spilling.cycles(step, phase)[0] == pytest.approx(l_axi + 2 * l_axi + 128)
    onchip = engine(d_sa=64, t_m=64, t_v=64, kv_uram=2000)
    l_uram = per_iteration / (2000 * 9)
    assert onchip.cycles(step, phase)[0] == pytest.approx(l_uram + 2 * 128 + 128)


def test_matmul_blocks_overlap_both_regimes() -> None:
    plan = make_plan("gpt2-345m", "4xu280", "lora-f").program
    gather = CommStep("all_gather", "x", 1024, 2.0, "matmul_blocks")
    consumer = ComputeStep(Op("q", "linear", 1024, 256, ("x",), weight="q"), 256)
    step_s = collective_seconds(plan, gather, 1) / 3
    steps = [gather, consumer]
    slow = exposed_seconds(plan, steps, 0, 1, [np.zeros(1), np.array([4 * step_s / 2])])
    assert slow[0] == pytest.approx(3 * (step_s - step_s / 2))
    fast = exposed_seconds(plan, steps, 0, 1, [np.zeros(1), np.array([4 * step_s * 2])])
    assert fast[0] == 0


def test_row_groups_overlap_by_hand() -> None:
    plan = make_plan("gpt2-345m", "4xu280", "lora-f").program
    reduce = CommStep("all_reduce", "n", 2, 4.0, "row_groups", group_rows=16)
    stats = ComputeStep(Op("n", "norm", 1024, 1024, ("x",), weight="n"), 256, stage="stats")
    k = collective_seconds(plan, reduce, 16)
    # 64 rows = 4 groups; group compute k/2 leaves k/2 exposed per later group, plus k.
    out = exposed_seconds(plan, [stats, reduce], 1, 64, [np.array([4 * k / 2]), np.zeros(1)])
    assert out[0] == pytest.approx(k + 3 * k / 2)


def test_early_broadcast_hides_the_gather_under_the_remaining_heads() -> None:
    """§III-B, third method: SmulV's output leaves head by head, so the gather after it
    starts while the last (h - 1) / h of SmulV still runs."""
    plan = make_plan("gpt2-345m", "4xu280", "lora-f").program
    producer = ComputeStep(Op("attn_context", "attn_context", 64, 64, ("s", "v"), heads=16),
                           64, 4)
    late = CommStep("all_gather", "attn_context", 1024, 2.0, "matmul_blocks")
    early = CommStep("all_gather", "attn_context", 1024, 2.0, "matmul_blocks", early=True)
    total = collective_seconds(plan, late, 1)
    compute = [np.array([total / 3]), np.zeros(1)]
    exposed = exposed_seconds(plan, [producer, late], 1, 1, compute)[0]
    assert exposed == pytest.approx(total)  # no consumer to hide behind
    hidden = exposed_seconds(plan, [producer, early], 1, 1, compute)[0]
    assert hidden == pytest.approx(total - total / 3 * 3 / 4)
    gathers = [c for c in plan.comm_steps() if c.kind == "all_gather"]
    assert [c.tensor for c in gathers if c.early] == ["attn_context"]


def test_lora_beats_dfx_on_one_u280_and_q_beats_f() -> None:
    """LORA's premise (seeds/002 §II-C): the systolic core outruns DFX's adder trees."""
    latency = {s: plan_and_estimate("gpt2-345m", "1xu280", s, {"tokens": "32:256"})[2].latency_s
               for s in ("dfx", "lora-f", "lora-q")}
    assert latency["lora-q"] < latency["lora-f"] < latency["dfx"]


def test_plan_json_reports_mpu_and_vfu_dsp() -> None:
    out = archi_here("plan", "gpt2-345m", "--cluster", "1xu280", "--strategy", "lora-q",
                     "--tokens", "32:256", "--json")
    device = json.loads(out.stdout)["devices"][0]
    assert device["units"]["mpu"]["dsp"] == 64 * 64 // 2 and "vfu" in device["units"]
    assert device["dsp"] == device["units"]["mpu"]["dsp"] + device["units"]["vfu"]["dsp"]


def test_bad_engine_parameters_name_the_choices() -> None:
    from archipelago.errors import ArchipelagoError

    with pytest.raises(ArchipelagoError, match="t_m must be a positive multiple of d_sa"):
        make_plan("gpt2-345m", "1xu280", "lora-f", {"d_sa": 32, "t_m": 48})
    with pytest.raises(ArchipelagoError, match="parameters: precision, clock_hz"):
        make_plan("gpt2-345m", "1xu280", "lora-f", {"dsa": 32})
