"""W8A8 building blocks against hand-computed cases and float references."""

import torch

from archipelago.strategies.tensor_parallel.emulate.w8a8 import (
    int8_matmul,
    quantize,
    scale_for,
    smoothing_factors,
    w8a8_linear,
)


def test_quantize_by_hand() -> None:
    scale = scale_for(31.75)  # 31.75 / 127 = 0.25, exact in binary so ties are real ties
    assert scale == 0.25
    x = torch.tensor([0.0, 0.125, 0.375, -31.75, 50.0, 0.3125])
    # 0.5 -> 0 and 1.5 -> 2 (half to even), 1.25 -> 1; beyond +-127 saturates.
    assert quantize(x, scale).tolist() == [0, 0, 2, -127, 127, 1]


def test_int8_matmul_is_exact_where_floats_are_not() -> None:
    gen = torch.Generator().manual_seed(0)
    x = torch.randint(-127, 128, (3, 4096), generator=gen, dtype=torch.int8)
    w = torch.randint(-127, 128, (4096, 5), generator=gen, dtype=torch.int8)
    exact = x.long() @ w.long()
    assert torch.equal(int8_matmul(x, w).long(), exact)
    assert not torch.equal((x.half() @ w.half()).long(), exact)  # fp16 would round


def test_smoothing_leaves_the_float_function_unchanged() -> None:
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(8, 16, generator=gen, dtype=torch.float64) * torch.linspace(0.1, 30, 16)
    w = torch.randn(16, 4, generator=gen, dtype=torch.float64)
    s = smoothing_factors(x.abs().amax(0), [w])
    assert torch.allclose((x / s) @ (w * s[:, None]), x @ w)
    # and the outlier channel's range shrinks: the point of migrating it into the weights
    assert (x / s).abs().amax() < x.abs().amax()


def test_w8a8_linear_matches_float_within_quantization_error() -> None:
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(4, 64, generator=gen)
    w = torch.randn(64, 8, generator=gen) * 0.1
    w_scale, x_scale = scale_for(w.abs().max()), scale_for(x.abs().max())
    y, acc = w8a8_linear(x, quantize(w, w_scale), w_scale, x_scale, None)
    # Each product carries at most half a step of error in each factor.
    bound = 64 * (0.5 * x_scale * w.abs().max() + 0.5 * w_scale * x.abs().max()
                  + 0.25 * x_scale * w_scale)
    assert (y - x @ w).abs().max() <= bound
    assert acc.dtype == torch.int32
