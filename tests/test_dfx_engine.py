"""DFX engine cycles and resources on hand-computed cases (seeds/001 §V)."""

import numpy as np
import pytest

from archipelago.api import plan_and_estimate
from archipelago.hardware.cluster import resolve_cluster
from archipelago.models.graph_ops import Op, Phase
from archipelago.models.zoo import resolve_model
from archipelago.strategies.tensor_parallel.engines import dfx
from archipelago.strategies.tensor_parallel.engines.dfx import DFXConfig, DFXEngine
from archipelago.strategies.tensor_parallel.engines.router import dfx_all_gather_s
from archipelago.strategies.tensor_parallel.estimate import Estimate
from archipelago.strategies.tensor_parallel.plan import ComputeStep

ENGINE = DFXEngine()
ONE = Phase(1, np.array([100]))
EFF = dfx.DFX_TILE_EFFICIENCY


def test_tile_stream_matches_hbm() -> None:
    """32 channels x 512 bits of FP16 per cycle is exactly one 64 x 16 tile (§V-B)."""
    assert DFXConfig().hbm_values_per_cycle == 64 * 16
    assert DFXConfig().mfu_latency == 6 + 6 * 11 + 11
    assert DFXConfig().zigzag_tiles == 4  # a d x d block is 64 / 16 tiles wide


def test_zigzag_accumulation_stalls_on_the_scalar_adder() -> None:
    """A 1024 x 256 Conv1D slice: 16 tile rows, 16 column groups = 4 zigzag blocks of 4
    tiles. The first tile row of a block issues its 4 tiles back to back; each later row
    waits for the lane's 11-cycle FP16 adder: 4 + 15 x 11 = 169 cycles per block."""
    op = Op("q", "linear", 1024, 1024, ("x",), weight="q")
    expected = 4 * (4 + 15 * 11) / EFF + 83
    assert ENGINE.cycles(ComputeStep(op, 256), ONE)[0] == pytest.approx(expected)
    three = Phase(3, np.array([100]))  # matrix-matrix = a sequence of matrix-vector
    assert ENGINE.cycles(ComputeStep(op, 256), three)[0] == pytest.approx(3 * (expected - 83) + 83)


def test_a_single_tile_row_never_waits_for_the_adder() -> None:
    """Query x Key^T with head_dim = d = 64 has one tile row: 100 keys = 7 column groups,
    one block of 4 tiles and one of 3, issued back to back, then ReduMax (log2 16 = 4)."""
    op = Op("attn_score", "attn_score", 64, 64, ("q", "k"), heads=16)
    cycles = ENGINE.cycles(ComputeStep(op, 64, 2), ONE)[0]
    assert cycles == pytest.approx(2 * (7 / EFF + 83 + 4))


def test_lm_head_streams_its_vocabulary_slice_from_hbm() -> None:
    """gpt2-345m on one core: 16 tile rows x 3142 groups = 785 full blocks + one of 2 tiles.
    At HBM speed that is under 1 ms, not the 8 ms of WTE from one DDR channel (§IV-B)."""
    op = Op("lm_head", "lm_head", 1024, 50257, ("x",), weight="embed_tokens")
    blocks = 785 * (4 + 15 * 11) + (2 + 15 * 11)
    cycles = ENGINE.cycles(ComputeStep(op, 50257), ONE)[0]
    assert cycles == pytest.approx(blocks / EFF + 83 + 4)
    assert cycles / 200e6 < 1e-3 < 50257 * 1024 * 2 / 12.8e9


def test_attention_grows_with_context() -> None:
    op = Op("attn_score", "attn_score", 64, 64, ("q", "k"), heads=16)
    contexts = Phase(1, np.array([16, 32, 1024]))
    cycles = ENGINE.cycles(ComputeStep(op, 64, 4), contexts)
    per_tile = 4 / EFF  # 4 heads, one tile per 16 keys
    assert np.diff(cycles) == pytest.approx([per_tile, per_tile * 62])


def test_layernorm_accumulates_chunk_sums_one_add_at_a_time() -> None:
    """accum over 1024 values: 16 d-chunks through the 6-level tree, then 16 dependent
    11-cycle scalar adds (§V-C SFU_V); LayerNorm has two of them."""
    op = Op("n", "norm", 1024, 1024, ("x",), weight="n")
    accum = 16 * 11 + 6 * 11
    elementwise = 5 * 16 + 2 * 11 + 3 * 6
    scalars = 1 + 2 * 6 + 11 + 6
    loads = 2 * (16 + 1)
    cycles = ENGINE.cycles(ComputeStep(op, 1024), ONE)[0]
    assert cycles == 2 * accum + elementwise + scalars + loads


def test_mfu_dsp_count_from_the_paper() -> None:
    """§V-C: 3 x (d x l) = 3072 DSPs for the MFU."""
    units = ENGINE.resources(resolve_model("gpt2-345m"))
    assert units["mfu"].dsp == 3 * 64 * 16 == 3072
    assert units["vfu"].dsp == 64 * 5


def test_other_tile_shapes_change_latency_not_feed() -> None:
    """(d, l) = (32, 32) streams the same values per cycle with a shallower tree."""
    small = DFXConfig(d=32, l=32)
    assert small.hbm_values_per_cycle == 1024 and small.mfu_latency == 6 + 5 * 11 + 11
    assert small.zigzag_tiles == 1


def _estimate(model: str, cluster: str, tokens: str = "64:64") -> Estimate:
    return plan_and_estimate(model, cluster, "dfx", {"tokens": tokens})[2]


def test_both_calibration_points_are_reproduced() -> None:
    """Issue #20: DFX_TILE_EFFICIENCY gives gpt2-345m on one U280 at 64:64 = 93.1 tokens/s,
    DFX_SYNC_OVERHEAD_S the same on four U280s = 207.56 tokens/s
    (`python -m benchmarks.calibrate_dfx`)."""
    assert _estimate("gpt2-345m", "1xu280").tokens_per_s == pytest.approx(93.1, rel=2e-4)
    assert _estimate("gpt2-345m", "4xu280").tokens_per_s == pytest.approx(207.56, rel=2e-4)


def test_compute_waits_for_every_whole_sync() -> None:
    """The scoreboard stalls the next instruction until the router's gather is written back
    (§V-A), so sync time is every sync counted whole: per token pass (64 prompt + 63 decode)
    24 layers x (three 1024-wide gathers + one 4096-wide), and nothing for the LM head, which
    every core runs whole (§IV-B names four syncs per layer and no other)."""
    link = resolve_cluster("4xu280").link(0, 1)
    gather = [dfx_all_gather_s(width // 4, 4, link, 200e6) for width in (1024, 1024, 4096, 1024)]
    expected = 127 * 24 * sum(gather)
    assert _estimate("gpt2-345m", "4xu280").breakdown_s["sync"] == pytest.approx(expected)


def test_layernorm_and_residual_are_replicated_on_every_core() -> None:
    """§VII Scalability: DFX does not split LayerNorm or residuals, so their time does not
    shrink with more boards while the matrix work does."""
    one, four = _estimate("gpt2-345m", "1xu280"), _estimate("gpt2-345m", "4xu280")
    assert four.breakdown_s["layernorm_residual"] == pytest.approx(
        one.breakdown_s["layernorm_residual"])
    assert four.breakdown_s["ffn"] < one.breakdown_s["ffn"] / 3.9
