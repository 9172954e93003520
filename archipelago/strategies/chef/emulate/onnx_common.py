"""What the ONNX operator modules share: the operator signature, integer and axis
arguments, and ONNX's pads in torch's order."""

from collections.abc import Callable, Sequence
from typing import Any

import torch

Tensor = torch.Tensor
Inputs = list[Tensor | None]
Attrs = dict[str, Any]
Op = Callable[[Inputs, Attrs, int], Tensor | Sequence[Tensor]]


def ints(t: Tensor | None) -> list[int]:
    return [] if t is None else [int(v) for v in t.reshape(-1).tolist()]


def positive_axis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


def torch_pad(pads: Sequence[int]) -> list[int]:
    """ONNX pads [x1_begin, x2_begin, ..., x1_end, x2_end] in F.pad's order (last axis
    first)."""
    n = len(pads) // 2
    out: list[int] = []
    for axis in reversed(range(n)):
        out += [pads[axis], pads[axis + n]]
    return out


def optional_axes(a: Inputs, attrs: Attrs, opset: int, moved_at: int) -> list[int] | None:
    """`axes`: an attribute before opset `moved_at`, the second input from it on."""
    if opset < moved_at:
        return list(attrs["axes"]) if "axes" in attrs else None
    return ints(a[1]) if len(a) > 1 and a[1] is not None else None
