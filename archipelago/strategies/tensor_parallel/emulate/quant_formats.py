"""The quantized number formats of `archi emulate --precision` (w8a8, w4a16), as torch code
one rank runs on its slice and the unsplit reference runs on the whole matrix.

W8A8 is SmoothQuant's W8A8 without smoothing (Xiao et al., "SmoothQuant", ICML 2023,
Preliminaries, Fig. 3: per-token activation and per-channel weight quantization, the
finest granularity INT8 GEMM kernels take, with dynamic activation scales as its O1
setting, Table 2): each block matrix holds
symmetric INT8 weights with one scale per output channel; each token's input row to it is
quantized to symmetric INT8 with its own scale when it arrives (dynamic); the INT8 x INT8
products accumulate exactly in INT32, then the two scales take the sum back to FP32.

W4A16 is AWQ's and GPTQ's group-wise weight-only INT4 (Lin et al., "AWQ", MLSys 2024,
experiments: "weight-only grouped quantization", INT4 with group size 128; Frantar et al.,
"GPTQ", ICLR 2023, experiments: "standard uniform per-row asymmetric quantization on the
min-max grid", with groups of 128):
each group of GROUP_SIZE consecutive input rows of one output column holds codes 0..15, one
FP16 scale and one zero point (asymmetric, as AWQ's `zero_point=True` default and GPTQ's
`sym=False` quantizer), packed two codes a byte along the input dimension as GPTQ packs;
weights are dequantized where they are used and the activations stay FP32. Because the
scale is an FP16 value and |code - zero| <= 15, every dequantized weight is exact in FP32.

Only the decoder blocks' matrices are quantized (LORA-Q's set, quantized.QUANTIZED);
embeddings, norms, biases and the LM head stay FP32, as both papers keep them in FP16.
"""

from collections.abc import Callable
from dataclasses import dataclass

import torch

from archipelago.emulate.job import QUANTIZED_PRECISIONS
from archipelago.number_formats import GROUP_SIZE  # the estimate's group: one vocabulary
from archipelago.strategies.tensor_parallel.emulate.quantized import QUANTIZED

W8A8, W4A16 = QUANTIZED_PRECISIONS
INT8_MAX = 127  # symmetric [-127, 127]: zero maps to zero
INT4_MAX = 15  # asymmetric codes 0..15 around a zero point
# INT32 holds K products of |127 x 127| exactly while K * 127^2 < 2^31: the longest
# input row an INT32 accumulator of W8A8 takes without overflow.
INT32_FAN_IN = (2 ** 31 - 1) // INT8_MAX ** 2
_FLOOR = 1e-5  # an all-zero channel, group or token keeps a positive scale (AWQ's clamp)

# (tokens, 1) local absolute maxima -> the same over the whole row (a row-split matrix's
# ranks agree on it in an all-reduce of the maximum); None where the row is whole here.
RowMax = Callable[[torch.Tensor], torch.Tensor] | None


def is_quantized(role: str, ndim: int) -> bool:
    """A block matrix (not its bias, not an expert stack) the formats quantize."""
    module, _, part = role.partition(".")
    return part == "weight" and module in QUANTIZED and ndim == 2


def int8_scales(absmax: torch.Tensor) -> torch.Tensor:
    """Symmetric INT8 scales in FP32: the largest magnitude maps to 127."""
    return (absmax.clamp(min=_FLOOR) / INT8_MAX).float()


def to_int8(x: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """Round to nearest (ties to even, torch.round) and saturate, in float64 so both sides of
    a comparison round the same quotients."""
    return torch.round(x.double() / scales.double()).clamp(-INT8_MAX, INT8_MAX).to(torch.int8)


def w8a8_matmul(x: torch.Tensor, w_q: torch.Tensor, w_scales: torch.Tensor,
                row_max: RowMax = None) -> tuple[torch.Tensor, torch.Tensor]:
    """x (tokens, in) FP32 through INT8 weights (in, out): per-token INT8 activations,
    exact INT32 accumulation, then both scales. Returns the FP32 output and the INT32
    accumulators (a row-split rank's are its partial sums)."""
    absmax = x.abs().amax(dim=-1, keepdim=True)
    x_scales = int8_scales(absmax if row_max is None else row_max(absmax))
    acc = to_int8(x, x_scales).to(torch.int32) @ w_q.to(torch.int32)
    y = acc.double() * (x_scales.double() * w_scales.double()[None, :])
    return y.to(x.dtype), acc


def w4_grid(w: torch.Tensor, group: int = GROUP_SIZE
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """GPTQ's asymmetric min-max grid of w (in, out) by groups of `group` input rows, the
    range widened to hold 0 (so the zero point is a code; AWQ's grid where a group holds
    both signs): codes 0..15 (in, out) uint8, FP16 scales and uint8 zero points
    (in / group, out)."""
    rows, cols = w.shape
    grouped = w.double().view(rows // group, group, cols)
    top, bottom = grouped.amax(dim=1).clamp(min=0), grouped.amin(dim=1).clamp(max=0)
    scales = ((top - bottom).clamp(min=_FLOOR) / INT4_MAX).half()
    s = scales.double()
    zeros = torch.round(-bottom / s).clamp(0, INT4_MAX)
    codes = (torch.round(grouped / s[:, None, :]) + zeros[:, None, :]).clamp(0, INT4_MAX)
    return codes.view(rows, cols).to(torch.uint8), scales, zeros.to(torch.uint8)


def w4_dequantize(codes: torch.Tensor, scales: torch.Tensor, zeros: torch.Tensor
                  ) -> torch.Tensor:
    """(code - zero) x scale per group, exact in FP32; codes (in, out) unpacked."""
    groups, cols = scales.shape
    grouped = codes.view(groups, -1, cols).float() - zeros[:, None, :].float()
    return (grouped * scales[:, None, :].float()).view(codes.shape)


def pack4(codes: torch.Tensor) -> torch.Tensor:
    """Two 4-bit codes a byte: input rows 2i (low nibble) and 2i + 1 (high)."""
    return codes[0::2] | (codes[1::2] << 4)


def unpack4(packed: torch.Tensor) -> torch.Tensor:
    return torch.stack((packed & 0xF, packed >> 4), dim=1).view(-1, packed.shape[-1])


@dataclass(frozen=True)
class QuantizedMatrix:
    """One rank's slice of a block matrix in a quantized format: `codes` (INT8, or packed
    INT4), `scales` (per output channel, or per group and channel), `zeros` (INT4's zero
    points), whether its input rows are split across ranks, and its first output column
    in the whole matrix (for the INT32 digest)."""

    precision: str
    codes: torch.Tensor
    scales: torch.Tensor
    zeros: torch.Tensor | None
    rows_split: bool
    first_column: int

    @property
    def nbytes(self) -> int:
        zeros = 0 if self.zeros is None else self.zeros.nbytes
        return self.codes.nbytes + self.scales.nbytes + zeros

    def __call__(self, x: torch.Tensor, row_max: RowMax) -> tuple[torch.Tensor,
                                                                  torch.Tensor | None]:
        """x @ W for this slice, and the INT32 accumulators where the format has them."""
        if self.zeros is None:
            return w8a8_matmul(x, self.codes, self.scales, row_max)
        return x @ self.dequantized(), None

    def dequantized(self) -> torch.Tensor:
        """W4A16's slice back in FP32 (exactly): what its matmul multiplies by."""
        if self.zeros is None:
            raise ValueError("W8A8 weights are multiplied as integers, not dequantized")
        return w4_dequantize(unpack4(self.codes), self.scales, self.zeros)


def quantize_matrix(precision: str, w: torch.Tensor, rows_split: bool, first_column: int,
                    col_max: Callable[[torch.Tensor], torch.Tensor]) -> QuantizedMatrix:
    """This rank's slice w (in, out) in `precision`. A W8A8 slice of split input rows
    takes each column's maximum over every rank's rows (`col_max`, an all-reduce), so its
    scales are the whole matrix's; a W4A16 slice holds whole groups (rank.check refuses
    others), whose grid is the same computed here or on the whole matrix."""
    if precision == W8A8:
        absmax = w.abs().amax(dim=0)
        scales = int8_scales(col_max(absmax) if rows_split else absmax)
        return QuantizedMatrix(precision, to_int8(w, scales[None, :]), scales, None,
                               rows_split, first_column)
    codes, scales, zeros = w4_grid(w)
    return QuantizedMatrix(precision, pack4(codes), scales, zeros, rows_split, first_column)

