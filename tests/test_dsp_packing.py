"""Two int8 products per DSP48E2 word, bit-exact against numpy integer arithmetic."""

import numpy as np
import pytest

from archipelago.engines.dsp_packing import (
    MAX_ACCUMULATIONS,
    PRODUCTS_PER_DSP,
    dsp_multiply,
    pack_preadder,
    packed_dot,
    unpack_product,
)

INT8 = np.arange(-128, 128, dtype=np.int64)


def test_every_int8_triple_unpacks_exactly() -> None:
    """All 2^24 (weight, low, high) combinations: both products recovered bit-exactly."""
    w, a, b = np.meshgrid(INT8, INT8, INT8, indexing="ij", sparse=True)
    low, high = unpack_product(dsp_multiply(pack_preadder(a, b), w))
    assert len((low, high)) == PRODUCTS_PER_DSP  # the factor the resource models use
    assert low.shape == (256, 256, 256)
    assert np.array_equal(low, np.broadcast_to(a * w, low.shape))
    assert np.array_equal(high, np.broadcast_to(b * w, high.shape))


def test_accumulating_extremes_in_p_stays_exact() -> None:
    """The worst case for the low field: MAX_ACCUMULATIONS products of -128 x -128, and a
    negative low field that borrows from the high one."""
    most = np.full(MAX_ACCUMULATIONS, -128, np.int64)
    low, high = unpack_product(dsp_multiply(pack_preadder(most, most), most).sum())
    assert low == high == MAX_ACCUMULATIONS * 128 * 128
    low, high = unpack_product(dsp_multiply(pack_preadder(-most - 1, most), most).sum())
    assert (low, high) == (MAX_ACCUMULATIONS * 127 * -128, MAX_ACCUMULATIONS * 128 * 128)


def test_one_more_accumulation_would_overflow_the_low_field() -> None:
    ones = np.full(MAX_ACCUMULATIONS + 1, -128, np.int64)
    low, _ = unpack_product(dsp_multiply(pack_preadder(ones, ones), ones).sum())
    assert low != (MAX_ACCUMULATIONS + 1) * 128 * 128


def test_packed_dot_matches_numpy_matmul() -> None:
    rng = np.random.default_rng(0)
    weights = rng.integers(-128, 128, size=(16, 1000))
    x_low, x_high = rng.integers(-128, 128, size=(2, 1000))
    low, high = packed_dot(weights, x_low, x_high)
    assert np.array_equal(low, weights @ x_low) and np.array_equal(high, weights @ x_high)


def test_out_of_range_operands_are_refused() -> None:
    with pytest.raises(AssertionError, match="int8"):
        pack_preadder(np.array([128]), np.array([0]))
