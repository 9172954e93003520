"""I-BERT's integer-only modules (Kim et al., 2021; seeds/000 §2.4, §7.1) as the kernels
compute them: Quant (requantization by a fixed-point multiplier and shift), integer GELU
(a second-order erf polynomial), integer Softmax (exponent by shift and polynomial) and
integer LayerNorm (integer variance, square root and division).

Bit-exactness with transformers' IBertModel needs one more thing: that reference carries
its integers in float32 tensors, and where those tensors are not exact integers (a value
dequantized and divided back, a float32 GEMM of such values feeding GELU or Softmax), the
float32 rounding leaks into the integer results. Each function below therefore keeps the
reference's float32 operation sequence on integer-valued tensors; the kernels exchange
exact integers.
"""

import math
from dataclasses import dataclass

import numpy as np
import torch

# I-BERT's constants (Kim et al., 2021, Alg. 2-4): erf polynomial a(x + b)^2 + c with
# a = -0.2888, b = -1.769, and the 1.4142 (sqrt 2) input scale; exp polynomial
# 0.35815147 x^2 + 0.96963238 x + 1 on [-ln 2, 0]; the overflow shifts 14 (GELU) and 30
# (Softmax); 32-bit accumulation for Softmax and LayerNorm normalizers.
ERF_A, ERF_B, ERF_C = -0.2888, -1.769, 1.0 / -0.2888
SQRT2 = 1.4142
GELU_SHIFT = 14
LN2_NEG = -0.6931
EXP_A, EXP_B, EXP_C = 0.35815147, 0.96963238 / 0.35815147, 1.0 / 0.35815147
EXP_SHIFT = 30
MAX_BITS = 32
MULTIPLIER_BITS = 31  # the fixed-point multiplier is a 31-bit mantissa and a shift


def symmetric_scale(low: torch.Tensor, high: torch.Tensor, bits: int) -> torch.Tensor:
    """Scale of symmetric `bits`-bit quantization of [low, high] (per channel if 1-D)."""
    largest = torch.maximum(low.abs(), high.abs())
    return torch.clamp(largest, min=1e-8) / (2 ** (bits - 1) - 1)


def quantize(values: torch.Tensor, scale: torch.Tensor, bits: int) -> torch.Tensor:
    """round(values / scale) into [-(2^(b-1) - 1), 2^(b-1) - 2], scale per output row."""
    n = 2 ** (bits - 1) - 1
    inverse = 1.0 / (scale.view(-1, 1) if values.dim() == 2 else scale.view(-1))
    return torch.clamp(torch.round(inverse * values + 0.0), -n, n - 1)


@dataclass(frozen=True)
class Requant:
    """A fixed-point multiplier: x * in_scale / out_scale ~ x * m / 2^e (per channel)."""

    m: torch.Tensor  # float64 integers below 2^31 (+1 after rounding)
    e: torch.Tensor  # float64 shift

    @staticmethod
    def between(in_scale: torch.Tensor, out_scale: torch.Tensor) -> "Requant":
        ratio = (in_scale.double() / out_scale.float().double()).view(-1).numpy()
        mantissa, exponent = np.frexp(ratio)
        m = np.floor(mantissa * 2.0**MULTIPLIER_BITS + 0.5)  # round half up, exact here
        return Requant(torch.from_numpy(m).view(1, 1, -1),
                       torch.from_numpy(MULTIPLIER_BITS - exponent.astype(np.float64))
                       .view(1, 1, -1))

    def apply(self, z_int: torch.Tensor) -> torch.Tensor:
        return torch.round(z_int.double() * self.m / 2.0**self.e)


def requantize(value: torch.Tensor, scale: torch.Tensor, out_scale: torch.Tensor,
               bits: int, residual: tuple[torch.Tensor, torch.Tensor] | None = None,
               ) -> torch.Tensor:
    """Quant: the `bits`-bit integers of a dequantized `value` (at `scale`) re-expressed at
    `out_scale`, plus a dequantized residual (value, scale) when given."""
    n = 2 ** (bits - 1) - 1
    z = torch.round(value / scale.view(1, 1, -1))
    out = Requant.between(scale, out_scale).apply(z)
    if residual is not None:
        r_value, r_scale = residual
        wx = torch.round(r_value / r_scale.view(1, 1, -1))
        out = out + Requant.between(r_scale, out_scale).apply(wx)
    return torch.clamp(out.float(), -n - 1, n)


def int_gelu(x: torch.Tensor, scale: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """GELU(x) = x * (1 + erf(x / sqrt 2)) / 2 with the erf polynomial on integers."""
    x_int = x / scale
    erf_scale = scale / SQRT2
    b_int = torch.floor(ERF_B / erf_scale)
    c_int = torch.floor(ERF_C / erf_scale**2)
    clipped = torch.min(torch.abs(x_int), -b_int)
    erf_int = torch.sign(x_int) * ((clipped + b_int) ** 2 + c_int)
    erf_scale = erf_scale**2 * ERF_A
    erf_int = torch.floor(erf_int / 2**GELU_SHIFT)
    erf_scale = erf_scale * 2**GELU_SHIFT
    one = 1.0 // erf_scale
    out_scale = scale * erf_scale / 2
    return x_int * (erf_int + one) * out_scale, out_scale


def int_softmax(scores: torch.Tensor, scale: torch.Tensor, exp_low: torch.Tensor,
                exp_high: torch.Tensor, out_bits: int = 8) -> torch.Tensor:
    """Row softmax of `scores` (dequantized at `scale`) as integers of scale 2^-out_bits;
    the exponents are requantized to 16 bits over their calibrated range [low, high]."""
    x_int = scores / scale
    x_int = x_int - x_int.max(dim=-1, keepdim=True).values
    ln2_int = torch.floor(LN2_NEG / scale)
    x_int = torch.max(x_int, EXP_SHIFT * ln2_int)
    q = torch.floor(x_int / ln2_int)
    r = x_int - ln2_int * q
    b_int = torch.floor(EXP_B / scale)
    c_int = torch.floor(EXP_C / scale**2)
    poly = (r + b_int) * r + c_int
    poly_scale = EXP_A * scale**2
    exp_int = torch.clamp(torch.floor(poly * 2 ** (EXP_SHIFT - q)), min=0)
    exp_scale = poly_scale / 2**EXP_SHIFT
    scale16 = symmetric_scale(exp_low, exp_high, 16)
    exp16 = requantize(exp_int, exp_scale, scale16, 16) * scale16.view(-1)
    exp_int = exp16 / scale16
    factor = torch.floor(2**MAX_BITS / exp_int.sum(dim=-1, keepdim=True))
    return torch.floor(exp_int * factor / 2 ** (MAX_BITS - out_bits))


def int_layernorm(x: torch.Tensor, scale: torch.Tensor, weight: torch.Tensor,
                  bias: torch.Tensor, shift: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """LayerNorm over the last axis with an integer mean, variance (pre-shifted by the
    calibrated `shift` against overflow), square root and 2^31 / std normalizer."""
    dim_sqrt = torch.sqrt(torch.tensor(x.shape[2], dtype=torch.float))
    x_int = x / scale
    mean = torch.round(x_int.mean(axis=2, keepdim=True))
    y = x_int - mean
    var = torch.sum(torch.floor(y / 2**shift) ** 2, axis=2, keepdim=True)
    std = torch.floor(torch.sqrt(var)) * 2**shift
    factor = torch.floor(2**31 / std)
    y = torch.floor(y * factor / 2)
    out_scale = dim_sqrt / 2**30
    y = y + torch.floor(bias / weight / out_scale)
    out_scale = out_scale * weight
    return y * out_scale, out_scale


def attention_scores(q: torch.Tensor, k: torch.Tensor, head_dim: int) -> torch.Tensor:
    """Q K^T / sqrt(d) of one head's dequantized [M, d] operands, computed as the
    reference computes every head (one [1, 1, M, d] batch of its batched product)."""
    product = torch.matmul(q.view(1, 1, *q.shape), k.view(1, 1, *k.shape).transpose(-1, -2))
    return product / math.sqrt(head_dim)


def attention_context(p: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """P V of one head, [M, M] by [M, d], batched as in the reference."""
    return torch.matmul(p.view(1, 1, *p.shape), v.view(1, 1, *v.shape))[0, 0]
