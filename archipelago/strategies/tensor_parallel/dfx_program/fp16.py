"""The arithmetic of a DFX core's units on values (seeds/001 §V-C), for the functional
simulator: every operator is an FP16 operator ("Xilinx Floating-Point Operator IP ... IEEE
754 with 1-bit sign, 5-bit exponent, and 10-bit mantissa", §VII-A), so every single
multiply, add, exp or reciprocal is rounded to FP16 (round to nearest even). An operation
is computed in float32, then rounded to FP16: for +, -, x, / and sqrt a format of p' >=
2p + 2 bits (24 >= 2 x 11 + 2) makes that double rounding innocuous (Figueroa, "When is
double rounding innocuous?", 1995), so the result is the correctly rounded FP16 one a
hardware operator returns.

Accumulation order is the hardware's, since FP16 sums depend on it:
  - MFU (Conv1D, MaskedMM, MM): each lane multiplies d inputs by d weights of its column
    (d multipliers), sums them in an adder tree of depth log2(d) (each level rounded), and
    its scalar adder accumulates the tree outputs of the tile rows one after another (§V-C:
    "passed to the parallel adder tree of depth log2(d) to calculate the partial sum",
    "2 x l DSPs for scalar additions"). The bias enters the lane's scalar adder first
    (Conv1D's "different weights and biases are distributed to each vector lane", §V-D).
  - SFU_V accum: an adder tree over each d-wide chunk of the vector, the chunk sums added
    one after another on one scalar adder, and a divide by the width as a multiply by its
    reciprocal (§V-C: "SFU_V uses a multiplier to divide a constant value").
  - SFU_M GELU: "the lookup table is used with linear approximation", 2048 samples over
    [-8, 8], the identity above and zero below (§V-C: "the slope converges on either side
    at this range"): a segment's sample and slope in FP16, then one multiply and one add.
"""

from collections.abc import Callable
from functools import cache
from math import erf, sqrt, tanh

import numpy as np

F16 = np.float16
# SFU_M's masking value: "the closest representable value to -inf" (§V-C).
MASK_VALUE = float(np.finfo(F16).min)
# SFU_M's GELU table (§V-C): 2048 samples over [-8, 8], one linear segment from each.
GELU_SAMPLES = 2048
GELU_RANGE = 8.0

_GELU: dict[str, Callable[[float], float]] = {
    "gelu_new": lambda x: 0.5 * x * (1 + tanh(sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))),
    "gelu": lambda x: 0.5 * x * (1 + erf(x / sqrt(2))),
}


F32 = np.float32


def rnd(x: np.ndarray | float) -> np.ndarray:
    """Round to FP16 (overflow to +-inf, as the operators do)."""
    with np.errstate(over="ignore"):
        return np.asarray(x).astype(F16)


def _f32(a: np.ndarray | float) -> np.ndarray:
    return np.asarray(a, F32)


def add(a: np.ndarray, b: np.ndarray | float) -> np.ndarray:
    return rnd(_f32(a) + _f32(b))


def sub(a: np.ndarray, b: np.ndarray | float) -> np.ndarray:
    return rnd(_f32(a) - _f32(b))


def mul(a: np.ndarray, b: np.ndarray | float) -> np.ndarray:
    return rnd(_f32(a) * _f32(b))


def exp(a: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return rnd(np.exp(np.asarray(a, np.float64)))


def recip(a: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return rnd(F32(1) / _f32(a))


def recip_sqrt(a: np.ndarray) -> np.ndarray:
    """One operation on SFU_V: in float64, within a few 2**-53 of the exact value, so its
    FP16 rounding is the correct one but at a tie that close (the double rounding argument
    covers sqrt and / each, not their composition)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return rnd(1.0 / np.sqrt(np.asarray(a, np.float64)))


def tree(values: np.ndarray, axis: int) -> np.ndarray:
    """An adder tree along `axis` (a power of two long): adjacent pairs, every level
    rounded."""
    values = np.moveaxis(values, axis, 0)
    while values.shape[0] > 1:
        values = add(values[0::2], values[1::2])
    return values[0]


def _pad_rows(values: np.ndarray, d: int) -> np.ndarray:
    """Zero rows up to a whole number of d-row tiles (a partial tile's padding)."""
    pad = -len(values) % d
    return np.concatenate([values, np.zeros((pad, *values.shape[1:]), F16)]) if pad else values


def matvec(x: np.ndarray, w: np.ndarray, d: int, bias: np.ndarray | None = None
           ) -> np.ndarray:
    """x (rows) times w (rows x cols) on the MFU: per tile row, d products per lane, an
    adder tree, then the lane's scalar adder over the tile rows in order (from the bias)."""
    x, w = _pad_rows(x[:, None], d), _pad_rows(w, d)
    partial = tree(mul(x, w).reshape(-1, d, w.shape[1]), axis=1)  # (tile rows, cols)
    acc = np.zeros(w.shape[1], F16) if bias is None else bias
    for row in partial:
        acc = add(acc, row)
    return acc


def accum(values: np.ndarray, d: int, mean: bool) -> np.ndarray:
    """SFU_V: each d-chunk through the adder tree, the chunk sums on one scalar adder in
    order, divided by the width as a multiply by its FP16 reciprocal (MEAN)."""
    chunks = tree(_pad_rows(values, d).reshape(-1, d), axis=1)
    total = chunks[0]
    for chunk in chunks[1:]:
        total = add(total, chunk)
    return mul(total, rnd(1.0 / len(values))) if mean else total


@cache
def gelu_table(activation: str) -> tuple[np.ndarray, np.ndarray]:
    """FP16 sample and slope of each of the GELU_SAMPLES segments over [-8, 8): the value
    at a segment's left end and the slope of the line to its right end (the right end of
    the last one is x = 8, where GELU is the identity)."""
    if activation not in _GELU:
        raise ValueError(f"no GELU table for activation '{activation}'; valid: "
                         f"{', '.join(_GELU)}")
    f = _GELU[activation]
    step = 2 * GELU_RANGE / GELU_SAMPLES
    x0 = -GELU_RANGE + step * np.arange(GELU_SAMPLES)
    y0 = np.array([f(x) for x in x0])
    y1 = np.append(y0[1:], GELU_RANGE)
    return rnd(y0), rnd((y1 - y0) / step)


def gelu(x: np.ndarray, activation: str) -> np.ndarray:
    """SFU_M's GELU: the segment's index and x's offset into it are x's high and low bits
    (a power-of-two segment width: combinational logic, exact), then sample + slope x
    offset on one multiplier and one adder."""
    sample, slope = gelu_table(activation)
    step = 2 * GELU_RANGE / GELU_SAMPLES
    k = np.clip(np.floor((x.astype(F32) + GELU_RANGE) / step), 0, GELU_SAMPLES - 1)
    k = k.astype(int)
    offset = x.astype(F32) - F32(-GELU_RANGE + step * k)
    y = add(sample[k], mul(slope[k], offset))
    return np.where(x >= GELU_RANGE, x, np.where(x < -GELU_RANGE, F16(0), y)).astype(F16)
