"""DFX engine cycles and resources on hand-computed cases (seeds/001 §V)."""

import numpy as np
import pytest

from archipelago.engines import dfx
from archipelago.engines.base import PhaseArrays
from archipelago.engines.dfx import DFXConfig, DFXEngine
from archipelago.models.graph import Op
from archipelago.models.zoo import resolve_model
from archipelago.plan import ComputeStep

ENGINE = DFXEngine()
ONE = PhaseArrays(1, np.array([100]))


def test_tile_stream_matches_hbm() -> None:
    """32 channels x 512 bits of FP16 per cycle is exactly one 64 x 16 tile (§V-B)."""
    assert DFXConfig().hbm_values_per_cycle == 64 * 16
    assert DFXConfig().mfu_latency == 6 + 6 * 11 + 11


def test_linear_cycles_by_hand() -> None:
    op = Op("q", "linear", 1024, 1024, ("x",), weight="q")
    tiles = (1024 // 64) * (256 // 16)
    expected = tiles / dfx.DFX_STREAM_EFFICIENCY + 83
    assert ENGINE.cycles(ComputeStep(op, 256), ONE)[0] == pytest.approx(expected)
    three = PhaseArrays(3, np.array([100]))  # matrix-matrix = a sequence of matrix-vector
    assert ENGINE.cycles(ComputeStep(op, 256), three)[0] == pytest.approx(3 * (expected - 83) + 83)


def test_attention_grows_with_context() -> None:
    op = Op("attn_score", "attn_score", 64, 64, ("q", "k"), heads=16)
    contexts = PhaseArrays(1, np.array([16, 32, 1024]))
    cycles = ENGINE.cycles(ComputeStep(op, 64, 4), contexts)
    per_tile = 4 / dfx.DFX_STREAM_EFFICIENCY  # 4 heads, one tile per 16 keys
    assert np.diff(cycles) == pytest.approx([per_tile, per_tile * 62])


def test_mfu_dsp_count_from_the_paper() -> None:
    """§V-C: 3 x (d x l) = 3072 DSPs for the MFU."""
    units = ENGINE.resources(resolve_model("gpt2-345m"))
    assert units["mfu"].dsp == 3 * 64 * 16 == 3072
    assert units["vfu"].dsp == 64 * 5


def test_other_tile_shapes_change_latency_not_throughput() -> None:
    """(d, l) = (32, 32) streams the same values per cycle with a shallower tree."""
    small = DFXConfig(d=32, l=32)
    assert small.hbm_values_per_cycle == 1024 and small.mfu_latency == 6 + 5 * 11 + 11
