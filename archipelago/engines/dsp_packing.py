"""Two int8 products from one DSP48E2 multiply (seeds/002 §V-A; the packing of Xilinx
WP486 that LORA follows).

The 27-bit pre-adder holds two int8 activations, one shifted 18 bits up; the 18-bit port
holds the shared int8 weight. The 45-bit product then carries a*w in its low 18 bits (as
a signed field) and b*w above them, with a borrow from the low field when it is negative.
Products of int8 values fit in 16 bits, so up to `MAX_ACCUMULATIONS` of them can be summed
in the DSP's P register before the low field would overflow its 18 bits.
"""

import numpy as np

# What the packing buys: products one DSP48E2 computes per multiply when they share an
# operand. The resource models of the LORA-Q array and the Galapagos Linears use it.
PRODUCTS_PER_DSP = 2
SHIFT = 18  # bit offset of the upper operand inside the pre-adder word
PREADDER_BITS, MULT_B_BITS, PRODUCT_BITS = 27, 18, 45  # DSP48E2 widths (UG579)
# The low field is an 18-bit signed integer: |sum| <= k * 2^14 must stay < 2^17.
MAX_ACCUMULATIONS = 7


def _fits(values: np.ndarray, bits: int) -> bool:
    return bool(np.all((values >= -(1 << (bits - 1))) & (values < (1 << (bits - 1)))))


def pack_preadder(low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """The pre-adder word (high << 18) + low of two signed int8 activations."""
    low, high = np.asarray(low, np.int64), np.asarray(high, np.int64)
    assert _fits(low, 8) and _fits(high, 8), "activations must be int8"
    word = (high << SHIFT) + low
    assert _fits(word, PREADDER_BITS)
    return word


def dsp_multiply(word: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """The DSP's 45-bit signed product of the pre-adder word and an int8 weight."""
    weight = np.asarray(weight, np.int64)
    assert _fits(weight, 8), "weights must be int8"
    product = word * weight
    assert _fits(product, PRODUCT_BITS)
    return product


def unpack_product(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) from a packed product or a sum of at most MAX_ACCUMULATIONS of them:
    sign-extend the low 18 bits, then remove them (borrow included) from the high part."""
    p = np.asarray(p, np.int64)
    mask = (1 << SHIFT) - 1
    low = p & mask
    low = np.where(low >= 1 << (SHIFT - 1), low - (1 << SHIFT), low)
    high = (p - low) >> SHIFT
    return low, high


def packed_dot(weights: np.ndarray, x_low: np.ndarray, x_high: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
    """Two int8 dot products sharing one weight vector, computed as the DSP does: packed
    products accumulated in P in chunks small enough for the low field, then unpacked."""
    weights = np.asarray(weights, np.int64)
    low_sum = np.zeros(weights.shape[:-1], np.int64)
    high_sum = np.zeros_like(low_sum)
    for start in range(0, weights.shape[-1], MAX_ACCUMULATIONS):
        chunk = slice(start, start + MAX_ACCUMULATIONS)
        p = dsp_multiply(pack_preadder(x_low[..., chunk], x_high[..., chunk]),
                         weights[..., chunk]).sum(axis=-1)
        low, high = unpack_product(p)
        low_sum += low
        high_sum += high
    return low_sum, high_sum
