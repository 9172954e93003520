"""LORA's systolic engine (seeds/002 §IV-V): decode vector mode, attention and Softmax on
hand-computed cases, and the one fitted constant against its calibration point."""

import numpy as np
import pytest

from archipelago.api import make_plan
from archipelago.estimate.workload import Generation
from archipelago.hardware.catalog import get_device
from archipelago.models.graph_ops import Op, Phase
from archipelago.models.zoo import resolve_model
from archipelago.strategies.tensor_parallel.engines import systolic
from archipelago.strategies.tensor_parallel.engines.systolic import SystolicEngine
from archipelago.strategies.tensor_parallel.engines.systolic_config import SystolicConfig
from archipelago.strategies.tensor_parallel.estimate import estimate as estimate_plan
from archipelago.strategies.tensor_parallel.plan import ComputeStep
from benchmarks import calibrate_lora

SPEC = resolve_model("gpt2-345m")
DECODE = Phase(1, np.array([100]))


def engine(**overrides) -> SystolicEngine:
    return SystolicEngine(SystolicConfig(**overrides), get_device("u280"), SPEC, 1)


def test_a_narrow_slice_takes_its_tiles_across_rows_of_tiles() -> None:
    """A 256 x 32 slice on a 16 x 16 array (T_m = T_v = 16): 16 rows of 2 tiles, 32 tiles,
    so 2 iterations of 16 tiles (8 KB each) rather than 16 half-empty ones; each loads in
    8192 / HBM rate < 2 x 16 cycles: L_axi + 32 + 32 (Eq. 8). Bytes: 32 whole FP16 tiles."""
    eng = engine(d_sa=16, t_m=16, t_v=16)
    step = ComputeStep(Op("q", "linear", 256, 128, ("x",), weight="q"), 32)
    l_axi = 16 * 16 * 16 * 2 / eng.hbm_bytes_per_cycle
    assert l_axi < 32
    assert eng.cycles(step, DECODE)[0] == pytest.approx(l_axi + 32 + 32)
    assert eng.streamed_bytes(step, DECODE)[0] == 32 * 16 * 16 * 2


def test_attention_score_at_context_100_by_hand() -> None:
    """16 heads of 64 at context 100 on 32 x 32: every head's K^T is 2 x 4 tiles, 128 in all,
    4 iterations of 32 tiles (64 KB) read from 864 URAMs at 9 B each per cycle (L_axi = 8.4
    cycles under L_cal = 64). SmulV has the same tiles transposed. The real work is
    16 x 64 x 100 MACs, 200 cycles at the vector mode's D_sa^2 / 2 MACs per cycle; tile
    padding (100 -> 128 keys) and the first load make the rest."""
    eng = engine()
    l_axi = 32 * 32 * 32 * 2 / (864 * 9)
    for kind in ("attn_score", "attn_context"):
        step = ComputeStep(Op(kind, kind, 64, 64, ("a", "b"), heads=16), 64, 16)
        assert eng.cycles(step, DECODE)[0] == pytest.approx(l_axi + 3 * 64 + 64)
        assert eng.streamed_bytes(step, DECODE)[0] == 128 * 32 * 32 * 2
    assert 16 * 64 * 100 / (32 * 32 / 2) == 200


def test_softmax_rows_of_every_head_pipeline_through_the_vfu() -> None:
    """16 heads at context 100 on 64 accumulators: 3 sweeps of 2 lane-groups per row, 96
    in all, then the chain once: two 6-level trees of 11-cycle adders, an add, exp (4),
    reciprocal (6) and multiply (6): 159 cycles."""
    step = ComputeStep(Op("softmax", "softmax", 64, 64, ("s",), heads=16), 64, 16)
    assert engine(n_acc=64).cycles(step, DECODE)[0] == 16 * 3 * 2 + 2 * 66 + 11 + 4 + 6 + 6


def test_attention_core_is_a_few_percent_of_a_decode_step() -> None:
    """At contexts up to 128 QK^T, Softmax and SV of gpt2-345m add a few percent to the
    decoder block's weight streaming (the issue's "only a few percent"): 2 x 16 x 64 x 128 x 2
    B of K and V per layer is 2% of its 12.6M FP16 weights."""
    plan = make_plan("gpt2-345m", "1xu280", "lora-f").program
    phase = Phase(1, np.array([128]))
    seconds = {s.op.name: plan.engine.seconds(s, phase)[0] for s in plan.block_steps
               if isinstance(s, ComputeStep)}
    core = seconds["attn_score"] + seconds["softmax"] + seconds["attn_context"]
    assert 0.02 < core / sum(seconds.values()) < 0.06


def test_the_pasted_efficiency_reproduces_the_calibration_point() -> None:
    """LORA-F, gpt2-345m, 32:256 on one U280 = 678.4 ms (issue 20) with the published LORA-F
    engine, the strategy's default (what benchmarks/calibrate_lora.py fits on), within the
    0.5% the fit's printout rounds to; the project's searched engine is another design."""
    assert 0.5 <= systolic.HBM_EFFICIENCY <= 1.0
    work = Generation(32, 256)
    plan = make_plan(calibrate_lora.MODEL, calibrate_lora.CLUSTER, calibrate_lora.STRATEGY)
    assert plan.program.engine.config.d_sa == 48
    assert estimate_plan(plan, work).latency_s == pytest.approx(calibrate_lora.TARGET_S,
                                                                rel=0.005)
    assert calibrate_lora.fit() == pytest.approx(systolic.HBM_EFFICIENCY, abs=5e-4)


U280_DSP = 9024  # seeds/002 §VI-A-c
FP16_PE_DSP = 1 + 2  # a multiplier and an adder, seeds/001 §V-C


def _vfu_dsp(n_acc: int) -> int:
    """Eq. 7 (exp 2 + square 1 per lane, add 2 x (3N - 1)) and the Scaling module's
    multiplier and adder per lane: 15N - 2."""
    return 3 * n_acc + 2 * (3 * n_acc - 1) + 2 * 3 * n_acc


def test_the_default_engines_are_the_published_prototypes() -> None:
    """seeds/002 §VI-A-d and Table IV, worked by hand: LORA-F's FP16 array is the largest side
    (a multiple of the 16 FP16 values of a 256-bit stream beat) whose 3-DSP PEs fit 9,024
    DSPs, LORA-Q's int8 array the first multiple of 32 whose decode (D^2 / 2 B per cycle at
    250 MHz) passes HBM's 460 GB/s; the VFU takes the DSPs left, a power of two."""
    lora_f = [d for d in range(16, 129, 16) if FP16_PE_DSP * d * d <= U280_DSP][-1]
    lora_q = next(d for d in range(32, 129, 32) if d * d / 2 * 250e6 > 460e9)
    assert (lora_f, lora_q) == (48, 64)
    left_f, left_q = U280_DSP - 3 * 48 * 48, U280_DSP - 64 * 64 // 2
    assert (left_f, left_q) == (2112, 6976)
    acc_f = max(2 ** k for k in range(12) if _vfu_dsp(2 ** k) <= left_f)
    acc_q = max(2 ** k for k in range(12) if _vfu_dsp(2 ** k) <= left_q)
    assert (acc_f, acc_q) == (128, 256)
    expected = {"lora-f": (200e6, "fp16", 48, 128, 3 * 48 * 48 + _vfu_dsp(128)),
                "lora-q": (250e6, "w8a8", 64, 256, 64 * 64 // 2 + _vfu_dsp(256))}
    for strategy, (clock, precision, side, n_acc, dsp) in expected.items():
        program = make_plan("gpt2-345m", "1xu280", strategy).program
        c = program.engine.config
        assert (c.clock_hz, c.precision, c.d_sa, c.t_m, c.t_v, c.n_acc) == (
            clock, precision, side, side, side, n_acc)
        assert (c.kv_uram, c.hbm_channels, c.hbm_axi_bits) == (864, 32, 512)
        units = program.engine.resources(SPEC)
        assert units["mpu"].dsp + units["vfu"].dsp == dsp <= U280_DSP
        assert units["buffers"].bram <= 2016  # seeds/002 §VI-A-c
    assert expected["lora-f"][4] == 8830 and expected["lora-q"][4] == 5886


def test_the_32x32_bandwidth_example_cannot_reach_the_calibration_point(monkeypatch) -> None:
    """§V-C's 32 x 32 FP16 array at 200 MHz decodes at the 204.8 GB/s it states ("around
    190 GB/s", GiB): gpt2-345m's 24 blocks of 12 x 1024^2 weights and its 50257 x 1024 head,
    FP16, streamed for 255 decode steps take 885 ms by themselves, over 678.4 ms, so no HBM
    efficiency fits it (the engine's array, not HBM, bounds it); the estimate agrees."""
    weights = (24 * 12 * 1024 ** 2 + 50257 * 1024) * 2
    assert 255 * weights / 204.8e9 > 0.88 > calibrate_lora.TARGET_S
    monkeypatch.setattr(systolic, "HBM_EFFICIENCY", 1.0)
    example = {"d_sa": 32, "t_m": 32, "t_v": 32, "n_acc": 64}
    plan = make_plan("gpt2-345m", "1xu280", "lora-f", example)
    assert estimate_plan(plan, Generation(32, 256)).latency_s > 255 * weights / 204.8e9
