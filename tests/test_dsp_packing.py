"""The packing behind PRODUCTS_PER_DSP, carried out bit by bit: two int8 products per
DSP48E2 multiply, exact against numpy integer arithmetic for every int8 triple."""

import numpy as np

from archipelago.engines.dsp_packing import PRODUCTS_PER_DSP

SHIFT = 18  # bit offset of the upper operand inside the pre-adder word
PREADDER_BITS, PRODUCT_BITS = 27, 45  # DSP48E2 widths (UG579)
INT8 = np.arange(-128, 128, dtype=np.int64)


def _fits(values: np.ndarray, bits: int) -> bool:
    return bool(np.all((values >= -(1 << (bits - 1))) & (values < (1 << (bits - 1)))))


def _unpack(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) of a packed product: sign-extend the low 18 bits, then remove them
    (borrow included) from the high part."""
    low = p & ((1 << SHIFT) - 1)
    low = np.where(low >= 1 << (SHIFT - 1), low - (1 << SHIFT), low)
    return low, (p - low) >> SHIFT


def test_every_int8_triple_unpacks_exactly() -> None:
    """All 2^24 (weight, low, high) combinations: the pre-adder word (high << 18) + low fits
    its 27 bits, the product its 45, and both products come back bit-exactly."""
    w, a, b = np.meshgrid(INT8, INT8, INT8, indexing="ij", sparse=True)
    word = (b << SHIFT) + a
    assert _fits(word, PREADDER_BITS)
    product = word * w
    assert _fits(product, PRODUCT_BITS)
    low, high = _unpack(product)
    assert len((low, high)) == PRODUCTS_PER_DSP  # the factor the resource models use
    assert low.shape == (256, 256, 256)
    assert np.array_equal(low, np.broadcast_to(a * w, low.shape))
    assert np.array_equal(high, np.broadcast_to(b * w, high.shape))
