"""The quantizers of `archi emulate --precision w8a8 | w4a16`, on matrices small enough to
quantize by hand, and the property a split relies on: a rank's slice quantizes exactly as
the same part of the whole matrix (column slices always; input-row slices given the whole
column's maximum for W8A8, on group boundaries for W4A16)."""

import pytest
import torch

from archipelago.models.zoo import resolve_model
from archipelago.strategies.tensor_parallel.emulate.quant_formats import (
    INT32_FAN_IN,
    W4A16,
    W8A8,
    pack4,
    quantize_matrix,
    unpack4,
    w4_dequantize,
    w4_grid,
)
from archipelago.strategies.tensor_parallel.emulate.quant_reference import quantize_reference
from tests.conftest import TINY_GPT2
from tests.test_emulate import hf_model, write_config

# (in 3, out 2): column 0's largest magnitude is 1.27, so its scale is 0.01 and its codes
# 127, -64, 30; column 1's is 0.5 (scale 0.5 / 127).
W = torch.tensor([[1.27, 0.5], [-0.64, 0.1], [0.301, -0.2]])
# token 0's largest magnitude is 1.0 (scale 1/127): codes 51 (50.8), -127, 25 (25.4);
# token 1 is token 0 times 10, so it has the same codes at 10x the scale.
X = torch.tensor([[0.4, -1.0, 0.2], [4.0, -10.0, 2.0]])


def _whole(precision: str, w: torch.Tensor) -> object:
    return quantize_matrix(precision, w, False, 0, lambda t: t)


def test_w8a8_weights_per_output_channel_by_hand() -> None:
    m = _whole(W8A8, W)
    assert m.codes.dtype == torch.int8 and m.codes[:, 0].tolist() == [127, -64, 30]
    assert m.codes[:, 1].tolist() == [127, 25, -51]  # 0.1 * 254 = 25.4, -0.2 * 254 = -50.8
    assert m.scales.tolist() == pytest.approx([0.01, 0.5 / 127], rel=1e-6)
    assert m.nbytes == 6 + 2 * 4  # one byte per weight, an FP32 scale per column


def test_w8a8_per_token_activations_and_exact_int32_sums() -> None:
    m = _whole(W8A8, W)
    y, acc = m(X, None)
    assert acc.dtype == torch.int32
    # 51 * 127 + (-127) * (-64) + 25 * 30 and 51 * 127 + (-127) * 25 + 25 * (-51)
    assert acc.tolist() == [[15355, 2027]] * 2
    scales = torch.tensor([[1 / 127], [10 / 127]])
    assert torch.allclose(y, acc * scales * m.scales, rtol=1e-6)
    # within INT8 rounding (half a step, 1/254 of each operand's range) of the float product
    assert ((y - X @ W).abs() <= 0.01 * (X.abs() @ W.abs())).all()


def test_w8a8_row_split_needs_the_whole_rows_maxima() -> None:
    """Input rows 0 and 1..2 on two ranks: with each column's and each token's maximum
    over both (what the all-reduce supplies) the partial sums add up to the whole's
    integers; with each rank's own maxima they do not."""
    whole = _whole(W8A8, W)
    _, acc = whole(X, None)
    parts = [(slice(0, 1), ), (slice(1, 3), )]
    col_max, row_max = W.abs().amax(dim=0), X.abs().amax(dim=1, keepdim=True)
    total = sum(quantize_matrix(W8A8, W[rows], True, 0, lambda t: col_max)(
        X[:, rows], lambda t: row_max)[1] for (rows,) in parts)
    assert torch.equal(total, acc)
    local = sum(quantize_matrix(W8A8, W[rows], True, 0, lambda t: t)(X[:, rows], None)[1]
                for (rows,) in parts)
    assert not torch.equal(local, acc)


def test_int32_accumulator_bound() -> None:
    assert INT32_FAN_IN * 127 ** 2 < 2 ** 31 <= (INT32_FAN_IN + 1) * 127 ** 2


def test_w4_grid_by_hand() -> None:
    """Groups of 4 rows. Column 0 spans [-1, 2]: scale fp16(3/15) = 0.199951171875, zero
    round(1 / s) = 5. Column 1 is all positive: the range widens to [0, 4], scale
    fp16(4/15) = 0.2666015625, zero 0, so 4.0 stays representable (15 s)."""
    w = torch.tensor([[-1.0, 1.0], [0.0, 2.0], [0.5, 3.0], [2.0, 4.0]])
    codes, scales, zeros = w4_grid(w, group=4)
    assert scales.dtype == torch.float16
    assert scales.tolist() == [[0.199951171875, 0.2666015625]] and zeros.tolist() == [[5, 0]]
    assert codes.T.tolist() == [[0, 5, 8, 15], [4, 8, 11, 15]]
    s0, s1 = 0.199951171875, 0.2666015625
    expected = torch.tensor([[-5 * s0, 4 * s1], [0.0, 8 * s1], [3 * s0, 11 * s1],
                             [10 * s0, 15 * s1]])
    assert torch.equal(w4_dequantize(codes, scales, zeros), expected)  # exact in FP32


def test_w4_codes_pack_two_a_byte() -> None:
    codes = torch.tensor([[1, 15], [2, 0], [3, 7], [4, 8]], dtype=torch.uint8)
    packed = pack4(codes)
    assert packed.tolist() == [[1 | 2 << 4, 15], [3 | 4 << 4, 7 | 8 << 4]]
    assert torch.equal(unpack4(packed), codes)


def test_slices_quantize_as_the_whole() -> None:
    """256 input rows (two groups of 128), 6 output columns, in three column slices and in
    two row slices on the group boundary."""
    w = torch.randn(256, 6, generator=torch.Generator().manual_seed(0))
    for precision in (W8A8, W4A16):
        whole = _whole(precision, w)
        cols = [quantize_matrix(precision, w[:, c:c + 2], False, c, lambda t: t)
                for c in (0, 2, 4)]
        assert torch.equal(torch.cat([m.codes for m in cols], dim=1), whole.codes)
        assert torch.equal(torch.cat([m.scales for m in cols], dim=-1), whole.scales)
    whole = _whole(W4A16, w)
    rows = [quantize_matrix(W4A16, w[r:r + 128], True, 0, lambda t: t) for r in (0, 128)]
    assert torch.equal(torch.cat([m.dequantized() for m in rows]), whole.dequantized())
    assert whole.nbytes == 256 * 6 // 2 + 2 * 6 * 2 + 2 * 6  # packed codes, fp16 scales, zeros
    assert (whole.dequantized() - w).abs().max() < 0.2 * w.abs().max()


@pytest.fixture
def gpt2_128(tmp_path) -> tuple[str, dict]:
    config = {**TINY_GPT2, "n_embd": 128, "initializer_range": 0.5}
    return write_config(tmp_path, config), config


def test_the_reference_runs_w8a8_at_each_block_matrix(gpt2_128) -> None:
    """GPT-2's FFN1 (a Conv1D, (in, out) weight) in the quantized reference against the
    formula written out here in float64: per-column weight scales, per-token input scales,
    integer products, both scales, the bias."""
    path, config = gpt2_128
    model = hf_model(config, 0)
    fc = model.transformer.h[0].mlp.c_fc
    w, b = fc.weight.detach().double(), fc.bias.detach().double()
    quantize_reference(model, resolve_model(path), W8A8)
    x = torch.randn(5, 128, generator=torch.Generator().manual_seed(1))
    s_w = w.float().abs().amax(dim=0).double() / 127
    s_x = x.abs().amax(dim=1, keepdim=True).double() / 127
    ints = torch.round(x.double() / s_x) @ torch.round(w / s_w)
    with torch.inference_mode():
        y = fc(x[None])[0]
    assert torch.allclose(y.double(), ints * s_x * s_w + b, rtol=1e-5, atol=1e-6)
    assert not torch.allclose(y.double(), x.double() @ w + b, rtol=1e-3)  # not the float one


def test_the_reference_holds_w4a16_weights(gpt2_128) -> None:
    """Each group of 128 input rows of each column of every block matrix holds at most 16
    values, on a grid within a step of the FP32 weights; the LM head stays as it was."""
    path, config = gpt2_128
    plain, model = hf_model(config, 0), hf_model(config, 0)
    quantize_reference(model, resolve_model(path), W4A16)
    for name in ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj"):
        before = plain.get_parameter(f"transformer.h.1.{name}.weight").detach()
        after = model.get_parameter(f"transformer.h.1.{name}.weight").detach()
        groups = after.view(-1, 128, after.shape[1])
        assert max(len(g.unique()) for col in groups.unbind(2) for g in col) <= 16
        step = (before.view(-1, 128, before.shape[1]).amax(1).clamp(min=0)
                - before.view(-1, 128, before.shape[1]).amin(1).clamp(max=0)) / 15
        error = (after - before).abs().view(-1, 128, after.shape[1]).amax(1)
        assert (error <= 0.51 * step * (1 + 2 ** -10)).all() and (error > 0).any(), name
    assert torch.equal(model.lm_head.weight, plain.lm_head.weight)
