"""W8A8 numerics of LORA-Q (seeds/002 §II-A Fig. 1d, §IV-B-c): SmoothQuant-O3, i.e. per-tensor
static int8 scales for weights and activations fixed by a calibration pass, integer matrix
multiplies with int32 accumulation, FP16 for LayerNorm, Softmax and everything else.

Smoothing migrates activation outliers into the weights before quantizing: per input
channel j, s_j = max|X_j|^alpha / max|W_j|^(1 - alpha); X / s feeds W * s, so the float
function is unchanged, and the 1/s folds into the preceding LayerNorm's gamma and beta.
"""

import torch

INT8_MAX = 127  # symmetric range [-127, 127]: zero maps to zero, no zero point
SMOOTH_ALPHA = 0.5  # SmoothQuant's migration strength for OPT/GPT-style models
_FLOOR = 1e-5  # keeps scales positive for all-zero channels


def smoothing_factors(act_absmax: torch.Tensor, weights: list[torch.Tensor],
                      alpha: float = SMOOTH_ALPHA) -> torch.Tensor:
    """Per-input-channel factors for the matrices (in, out) that read one activation."""
    w_absmax = torch.stack([w.abs().amax(dim=1) for w in weights]).amax(dim=0)
    factors = act_absmax.clamp(min=_FLOOR) ** alpha / w_absmax.clamp(min=_FLOOR) ** (1 - alpha)
    return factors.clamp(min=_FLOOR)


def scale_for(absmax: torch.Tensor | float) -> float:
    """Per-tensor symmetric scale: the largest magnitude maps to 127."""
    return max(float(absmax), _FLOOR) / INT8_MAX


def quantize(x: torch.Tensor, scale: float) -> torch.Tensor:
    """Round to nearest (ties to even, as torch.round) and saturate to int8."""
    return torch.round(x.double() / scale).clamp(-INT8_MAX, INT8_MAX).to(torch.int8)


def int8_matmul(x_q: torch.Tensor, w_q: torch.Tensor) -> torch.Tensor:
    """Exact int32 accumulation of int8 products (what the packed DSPs compute)."""
    return x_q.to(torch.int32) @ w_q.to(torch.int32)


def w8a8_linear(x: torch.Tensor, w_q: torch.Tensor, w_scale: float, x_scale: float,
                bias: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Quantize the activation, multiply in integers, dequantize in fp32, add the bias in
    the activation's dtype. Returns the output and the int32 accumulators (for checks)."""
    acc = int8_matmul(quantize(x, x_scale), w_q)
    y = (acc.double() * (x_scale * w_scale)).to(x.dtype)
    return (y if bias is None else y + bias.to(x.dtype)), acc
