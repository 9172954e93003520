"""ONNX's shape and data-movement operators in torch (see onnx_torch.py): concatenation,
splits, reshapes, gathers, slices, pads, casts, shapes and constants."""

import math
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from archipelago.emulate.errors import EmulationError
from archipelago.strategies.chef.emulate.onnx_common import (
    Attrs,
    Inputs,
    Op,
    Tensor,
    ints,
    optional_axes,
    positive_axis,
    torch_pad,
)


def _concat(a: Inputs, attrs: Attrs, opset: int) -> Tensor:
    return torch.cat([t for t in a if t is not None], dim=attrs["axis"])


def _split(a: Inputs, attrs: Attrs, opset: int) -> list[Tensor]:
    x, axis = a[0], attrs.get("axis", 0)
    sizes = (attrs.get("split") if opset < 13
             else (ints(a[1]) if len(a) > 1 and a[1] is not None else None))
    if not sizes:
        parts = attrs.get("num_outputs") or attrs["_outputs"]
        chunk = math.ceil(x.shape[axis] / parts)  # opset 18: the last part may be smaller
        return list(torch.split(x, chunk, dim=axis))
    return list(torch.split(x, list(sizes), dim=axis))


def _flatten(a: Inputs, attrs: Attrs, opset: int) -> Tensor:
    x = a[0]
    axis = positive_axis(attrs.get("axis", 1), x.dim())
    return x.reshape(math.prod(x.shape[:axis]), math.prod(x.shape[axis:]))


def _reshape(a: Inputs, attrs: Attrs, opset: int) -> Tensor:
    x, shape = a[0], ints(a[1])
    if not attrs.get("allowzero", 0):  # 0 copies the input's dimension
        shape = [x.shape[i] if s == 0 else s for i, s in enumerate(shape)]
    return x.reshape(shape)


def _transpose(a: Inputs, attrs: Attrs, opset: int) -> Tensor:
    perm = attrs.get("perm", list(reversed(range(a[0].dim()))))
    return a[0].permute(*perm)


def _squeeze(a: Inputs, attrs: Attrs, opset: int) -> Tensor:
    x, axes = a[0], optional_axes(a, attrs, opset, 13)
    if axes is None:
        return x.squeeze()
    keep = {positive_axis(i, x.dim()) for i in axes}
    return x.reshape([d for i, d in enumerate(x.shape) if i not in keep])


def _unsqueeze(a: Inputs, attrs: Attrs, opset: int) -> Tensor:
    x, axes = a[0], optional_axes(a, attrs, opset, 13)
    rank = x.dim() + len(axes)
    for axis in sorted(positive_axis(i, rank) for i in axes):
        x = x.unsqueeze(axis)
    return x


def _gather(a: Inputs, attrs: Attrs, opset: int) -> Tensor:
    data, index = a[0], a[1].long()
    axis = positive_axis(attrs.get("axis", 0), data.dim())
    index = torch.where(index < 0, index + data.shape[axis], index)
    picked = data.index_select(axis, index.reshape(-1))
    return picked.reshape([*data.shape[:axis], *index.shape, *data.shape[axis + 1:]])


def _gather_elements(a: Inputs, attrs: Attrs, opset: int) -> Tensor:
    """out[i][j] = data[index[i][j]][j] (axis 0); negative indices count from the end."""
    data, index = a[0], a[1].long()
    axis = positive_axis(attrs.get("axis", 0), data.dim())
    return torch.gather(data, axis, torch.where(index < 0, index + data.shape[axis], index))


def _gather_nd(a: Inputs, attrs: Attrs, opset: int) -> Tensor:
    """out[i..] = data[index[i..]] (batch_dims 0): each index row addresses the leading
    axes; negative indices count from the end."""
    if attrs.get("batch_dims", 0):
        raise EmulationError(f"GatherND batch_dims {attrs['batch_dims']}: only 0 is emulated")
    data, index = a[0], a[1].long()
    sizes = torch.tensor(data.shape[:index.shape[-1]])
    index = torch.where(index < 0, index + sizes, index)
    return data[tuple(index[..., i] for i in range(index.shape[-1]))]


def _cumsum(a: Inputs, attrs: Attrs, opset: int) -> Tensor:
    """A running sum along the axis; `exclusive` leaves each element out, `reverse` runs
    from the end."""
    x, axis = a[0], positive_axis(int(a[1].reshape(-1)[0]), a[0].dim())
    x = x.flip(axis) if attrs.get("reverse", 0) else x
    out = torch.cumsum(x, axis, dtype=x.dtype)
    out = out - x if attrs.get("exclusive", 0) else out
    return out.flip(axis) if attrs.get("reverse", 0) else out


def _slice(a: Inputs, attrs: Attrs, opset: int) -> Tensor:
    x = a[0]
    if opset < 10:  # starts, ends and axes were attributes until opset 10
        starts, ends = list(attrs["starts"]), list(attrs["ends"])
        axes = list(attrs.get("axes", range(len(starts))))
        steps = [1] * len(starts)
    else:
        starts, ends = ints(a[1]), ints(a[2])
        axes = ints(a[3]) if len(a) > 3 and a[3] is not None else list(range(len(starts)))
        steps = ints(a[4]) if len(a) > 4 and a[4] is not None else [1] * len(starts)
    for start, end, axis, step in zip(starts, ends, axes, steps, strict=True):
        axis, size = positive_axis(axis, x.dim()), x.shape[positive_axis(axis, x.dim())]
        start, end = start + size if start < 0 else start, end + size if end < 0 else end
        if step > 0:
            start, end = min(max(start, 0), size), min(max(end, 0), size)
        else:
            start, end = min(max(start, 0), size - 1), min(max(end, -1), size - 1)
        x = x.index_select(axis, torch.arange(start, end, step, dtype=torch.long))
    return x


_PAD_MODES = {"constant": "constant", "reflect": "reflect", "edge": "replicate",
              "wrap": "circular"}


def _pad(a: Inputs, attrs: Attrs, opset: int) -> Tensor:
    x = a[0]
    if opset < 11:
        pads, value = list(attrs["pads"]), attrs.get("value", 0.0)
    else:
        pads = ints(a[1])
        value = a[2].item() if len(a) > 2 and a[2] is not None and a[2].numel() else 0.0
        if len(a) > 3 and a[3] is not None:  # opset 18: pads for `axes` only
            axes = [positive_axis(i, x.dim()) for i in ints(a[3])]
            full = [0] * 2 * x.dim()
            for k, axis in enumerate(axes):
                full[axis], full[axis + x.dim()] = pads[k], pads[k + len(axes)]
            pads = full
    mode = _PAD_MODES[attrs.get("mode", "constant")]
    if mode == "constant":
        return F.pad(x, torch_pad(pads), value=value)
    # torch pads the last one to three axes of a batch of channels: fold the leading
    # unpadded axes into one channel axis
    rank = x.dim()
    first = next((i for i in range(rank) if pads[i] or pads[i + rank]), rank)
    first = min(first, max(rank - 1, 0))
    if rank - first > 3:
        raise EmulationError(f"Pad mode {attrs['mode']} on more than the last three axes "
                             "is not emulated")
    inner = torch_pad(pads[first:rank] + pads[rank + first:])
    out = F.pad(x.reshape(1, -1, *x.shape[first:]), inner, mode=mode)
    return out.reshape(*x.shape[:first], *out.shape[2:])


_DTYPES = {1: torch.float32, 2: torch.uint8, 3: torch.int8, 5: torch.int16, 6: torch.int32,
           7: torch.int64, 9: torch.bool, 10: torch.float16, 11: torch.float64,
           16: torch.bfloat16}


def _dtype(code: int) -> torch.dtype:
    if code not in _DTYPES:
        raise EmulationError(f"tensor type {code} is not emulated (valid: "
                             f"{', '.join(str(c) for c in _DTYPES)})")
    return _DTYPES[code]


def _shape(a: Inputs, attrs: Attrs, opset: int) -> Tensor:
    dims = list(a[0].shape)[attrs.get("start", 0):attrs.get("end", None)]
    return torch.tensor(dims, dtype=torch.int64)


def _array(value: Any) -> Tensor:
    return torch.from_numpy(np.array(value))


def _constant(a: Inputs, attrs: Attrs, opset: int) -> Tensor:
    for key, kind in (("value", None), ("value_float", np.float32),
                      ("value_floats", np.float32), ("value_int", np.int64),
                      ("value_ints", np.int64)):
        if key in attrs:
            return _array(np.asarray(attrs[key], dtype=kind))
    raise EmulationError(f"Constant with attributes {sorted(attrs)} is not emulated")


def _constant_of_shape(a: Inputs, attrs: Attrs, opset: int) -> Tensor:
    value = attrs.get("value", np.zeros(1, np.float32))
    return _array(value).reshape(()).expand(ints(a[0])).clone()


def _expand(a: Inputs, attrs: Attrs, opset: int) -> Tensor:
    shape = torch.broadcast_shapes(a[0].shape, tuple(ints(a[1])))
    return a[0].expand(shape).clone()


def _range(a: Inputs, attrs: Attrs, opset: int) -> Tensor:
    start, limit, delta = (t.item() for t in a[:3])
    return torch.arange(start, limit, delta, dtype=a[0].dtype)


def _where(a: Inputs, attrs: Attrs, opset: int) -> Tensor:
    return torch.where(a[0].bool(), a[1], a[2])



SHAPE_OPS: dict[str, Op] = {
    "Concat": _concat, "Split": _split, "Flatten": _flatten, "Reshape": _reshape,
    "Transpose": _transpose, "Squeeze": _squeeze, "Unsqueeze": _unsqueeze,
    "Gather": _gather, "Slice": _slice, "Pad": _pad,
    "Cast": lambda a, attrs, opset: a[0].to(_dtype(attrs["to"])),
    "CastLike": lambda a, attrs, opset: a[0].to(a[1].dtype),
    "Shape": _shape, "Constant": _constant, "ConstantOfShape": _constant_of_shape,
    "Expand": _expand, "Range": _range, "Where": _where,
    "GatherElements": _gather_elements, "GatherND": _gather_nd, "CumSum": _cumsum,
}
