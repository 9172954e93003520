"""The HBM/DDR layout of a DFX core (seeds/001 §V-B): d x l tiles in zigzag order, striped
over the channels, checked against index-filled matrices."""

import itertools

import numpy as np
import pytest

from archipelago.strategies.tensor_parallel.dfx_program.layout import (
    VALUE_BYTES,
    Tiling,
    memory_map,
)
from archipelago.strategies.tensor_parallel.engines.dfx import DFXConfig
from tests.rings import make_ring

# d = 4, l = 2: d x d blocks of two tiles; two channels of 8-byte beats carry one tile.
SMALL = Tiling(d=4, l=2, channels=2, channel_bytes=8)


def test_zigzag_of_a_2_by_3_tile_matrix_drawn_by_hand() -> None:
    """8 x 6 values = 2 x 3 tiles. Fig. 9: across a d x d block (tiles 0, 1 of a row), down
    to the next tile row, then the next block column (tile column 2, alone):

        +---+---+---+
        | 0 | 1 | 4 |
        +---+---+---+
        | 2 | 3 | 5 |
        +---+---+---+
    """
    assert SMALL.zigzag(8, 6) == [(0, 0), (0, 1), (1, 0), (1, 1), (0, 2), (1, 2)]


def _lay_out(tiling: Tiling, matrix: np.ndarray) -> np.ndarray:
    """Write `matrix` into per-channel byte arrays through `offset` and `channel_of`."""
    rows, cols = matrix.shape
    tiles = np.prod(tiling.grid(rows, cols))
    per_channel = tiles * tiling.tile_bytes // tiling.channels
    hbm = np.full((tiling.channels, per_channel // VALUE_BYTES), -1, dtype=np.int64)
    for (r, c), value in np.ndenumerate(matrix):
        channel, offset = tiling.channel_of(tiling.offset(rows, cols, r, c))
        hbm[channel, offset // VALUE_BYTES] = value
    return hbm


@pytest.mark.parametrize(("tiling", "shape"), [(SMALL, (8, 6)), (SMALL, (7, 5)),
                                               (Tiling(64, 16, 32, 64), (128, 80))])
def test_tiles_stream_back_in_zigzag_order(tiling: Tiling, shape: tuple[int, int]) -> None:
    """Fill a matrix with its indices, lay it out, read the stream beat by beat (one beat of
    every channel per tile here) and compare each tile with the matrix slice the zigzag
    names; partial tiles are padded."""
    rows, cols = shape
    matrix = np.arange(rows * cols).reshape(shape)
    hbm = _lay_out(tiling, matrix)
    beat = tiling.channel_bytes // VALUE_BYTES
    for index, (tr, tc) in enumerate(tiling.zigzag(rows, cols)):
        stream = np.concatenate([hbm[ch, index * beat:(index + 1) * beat]
                                 for ch in range(tiling.channels)])
        tile = stream.reshape(tiling.l, tiling.d).T  # lane-major: a lane's column runs
        want = np.full((tiling.d, tiling.l), -1)
        part = matrix[tr * tiling.d:(tr + 1) * tiling.d, tc * tiling.l:(tc + 1) * tiling.l]
        want[:part.shape[0], :part.shape[1]] = part
        assert (tile == want).all(), (index, tr, tc)


def test_every_channel_carries_part_of_every_tile() -> None:
    t = Tiling(64, 16, 32, 64)
    channels = {t.channel_of(t.offset(64, 16, r, c))[0] for r in range(64) for c in range(16)}
    assert channels == set(range(32))  # one 2 KiB tile = one beat of all 32 channels (§V-B)


def test_striping_and_tiling_invert() -> None:
    t = Tiling(64, 16, 32, 64)
    for address in (0, 63, 64, 2047, 2048, 123_456_789):
        assert t.striped(*t.channel_of(address)) == address
    for r, c in ((0, 0), (63, 15), (64, 16), (1023, 255), (100, 200)):
        assert t.element(1024, 256, t.offset(1024, 256, r, c)) == (r, c)


def test_a_partial_tile_pads_and_its_padding_maps_to_nothing() -> None:
    # element (3, 0) of the first tile is row 3, beyond a 3-row matrix
    assert SMALL.element(3, 2, 3 * VALUE_BYTES) is None


def test_memory_map_of_gpt2_345m_core_1_of_4() -> None:
    plan = make_ring("gpt2-345m", "4xu280", "dfx", None)
    m = memory_map(plan, 1, DFXConfig())
    q = m.regions["q.weight"]
    assert (q.memory, q.rows, q.cols, q.tiled) == ("hbm", 1024, 256, True)  # heads 4..7
    order = [r.name for r in m.regions.values() if r.memory == "hbm" and r.per_layer]
    assert order[:2] == ["v.weight", "k.weight"]  # Value first (§V-B)
    assert m.regions["v_cache.h0"].rows == 1024 and m.regions["k_cache.h0"].cols == 1024
    assert m.regions["embed_tokens.weight"].memory == "ddr"  # WTE rows from DDR (§IV-B)
    assert m.regions["lm_head"].tiled and m.regions["lm_head"].cols == 50257
    for name, layer, row, col in (("q.weight", 3, 5, 7), ("v_cache.h2", 23, 100, 7),
                                  ("ffn_down.weight", 11, 4095, 255)):
        assert m.locate("hbm", m.address(name, row, col, layer)) == (name, layer, row, col)
    assert m.locate("ddr", m.address("q.bias", 0, 9, 2)) == ("q.bias", 2, 0, 9)
    assert m.address("q.weight", 0, 0, 1) - m.address("q.weight", 0, 0) == m.strides["hbm"]


def test_layers_do_not_overlap() -> None:
    plan = make_ring("gpt2-345m", "1xu280", "dfx", None)
    m = memory_map(plan, 0, DFXConfig())
    spans = sorted((m.region_address(r.name, layer), r.size(m.tiling), r.name)
                   for r in m.regions.values() if r.memory == "hbm"
                   for layer in range(m.layers if r.per_layer else 1))
    for (a, size, name), (b, _, other) in itertools.pairwise(spans):
        assert a + size <= b, (name, other)
    assert spans[-1][0] + spans[-1][1] <= m.used["hbm"] <= 8 << 30


def test_kv_rows_written_per_token_read_back_as_k_transposed_and_v() -> None:
    """Store token t's key and value rows (values 100 t + i) with `token_offsets`, then
    read the caches back through `element`: K^T's column t and V's row t hold them; the
    key's values form one contiguous run (no transpose), the value's are strided (the
    transpose unit's work, §V-B)."""
    t = SMALL
    width, context = 4, 6
    k_cache: dict[int, int] = {}
    v_cache: dict[int, int] = {}
    for token in range(context):
        row = [100 * token + i for i in range(width)]
        k_cache.update(zip(t.token_offsets(width, context, token, False), row, strict=True))
        v_cache.update(zip(t.token_offsets(width, context, token, True), row, strict=True))
    k = np.zeros((width, context), dtype=int)
    v = np.zeros((context, width), dtype=int)
    for offset, value in k_cache.items():
        k[t.element(width, context, offset)] = value
    for offset, value in v_cache.items():
        v[t.element(context, width, offset)] = value
    keys = np.array([[100 * tok + i for i in range(width)] for tok in range(context)])
    assert (k == keys.T).all() and (v == keys).all()
    run = t.token_offsets(width, context, 3, False)
    assert np.diff(run).tolist() == [VALUE_BYTES] * (width - 1)
    assert np.diff(t.token_offsets(width, context, 3, True)).min() > VALUE_BYTES


def test_a_context_read_covers_the_tokens_so_far() -> None:
    """K^T of 4 x 6 at d = 4, l = 2: tokens 0..2 live in tile columns 0 and 1."""
    assert SMALL.covering_tiles(4, 6, 4, 3) == [0, 1]
    assert SMALL.covering_tiles(6, 4, 5, 4) == [0, 1, 2, 3]  # V: both tile rows
