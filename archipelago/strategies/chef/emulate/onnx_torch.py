"""ONNX operators written in torch: the emulator's interpreter of an imported file's nodes.

It shares no code with onnxruntime, which the emulation compares it with, so an agreement
means the split run computes what the file says, not what one runtime does. Every operator
follows the ONNX operator specification (onnx.ai/onnx/operators) for the opsets a node can
come from: where an input moved to an attribute or back (Clip, Split, Squeeze, Unsqueeze,
ReduceMean, Slice, Pad) the model's opset decides. An operator not written here is refused
in one line naming the node. torch and onnx are imported here only.
"""

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from onnx import NodeProto, helper, numpy_helper

from archipelago.emulate.errors import EmulationError

Tensor = torch.Tensor
Inputs = list[Tensor | None]
Attrs = dict[str, Any]
Op = Callable[[Inputs, Attrs, int], Tensor | Sequence[Tensor]]


def attributes(node: NodeProto) -> Attrs:
    """A node's attributes as Python values (tensors as numpy arrays)."""
    out: Attrs = {}
    for attr in node.attribute:
        value = helper.get_attribute_value(attr)
        if hasattr(value, "dims") and hasattr(value, "data_type"):
            value = numpy_helper.to_array(value)
        out[attr.name] = value.decode() if isinstance(value, bytes) else value
    return out


def operator(node: NodeProto) -> Op:
    """The torch implementation of `node`'s operator, or a one-line refusal naming it."""
    op = OPS.get(node.op_type) if node.domain in ("", "ai.onnx") else None
    if op is None:
        raise EmulationError(f"node '{node.name}': operator {node.domain or 'ai.onnx'}."
                             f"{node.op_type} has no torch implementation in the emulator")
    return op


def run_node(node: NodeProto, values: Mapping[str, Tensor], opset: int) -> dict[str, Tensor]:
    """The values `node` writes, by name, from the values it reads (`values`)."""
    op = operator(node)
    args: Inputs = [values[name] if name else None for name in node.input]
    attrs = attributes(node)
    attrs["_outputs"] = len(node.output)  # how many parts a Split without sizes makes
    result = op(args, attrs, opset)
    outs = [result] if isinstance(result, Tensor) else list(result)
    return {name: t for name, t in zip(node.output, outs, strict=False) if name}


def run_nodes(nodes: Iterable[NodeProto], values: dict[str, Tensor], opset: int) -> None:
    """Run `nodes` in order, adding what each writes to `values`."""
    for node in nodes:
        values.update(run_node(node, values, opset))


# ---- helpers ---------------------------------------------------------------------------

def _ints(t: Tensor | None) -> list[int]:
    return [] if t is None else [int(v) for v in t.reshape(-1).tolist()]


def _axis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


def _same_pads(sizes: Sequence[int], kernel: Sequence[int], strides: Sequence[int],
               dilations: Sequence[int], upper: bool) -> list[int]:
    """auto_pad SAME_UPPER / SAME_LOWER: the output is ceil(in / stride); the odd pad goes
    at the end (UPPER) or the beginning (LOWER)."""
    begins, ends = [], []
    for size, k, s, d in zip(sizes, kernel, strides, dilations, strict=True):
        total = max(0, (math.ceil(size / s) - 1) * s + (k - 1) * d + 1 - size)
        small, big = total // 2, total - total // 2
        begins.append(small if upper else big)
        ends.append(big if upper else small)
    return begins + ends


def _window(x: Tensor, attrs: Attrs, kernel: Sequence[int]) -> tuple[list[int], ...]:
    """(strides, dilations, pads as [begins..., ends...]) of a Conv or pooling node."""
    n = len(kernel)
    strides = list(attrs.get("strides", [1] * n))
    dilations = list(attrs.get("dilations", [1] * n))
    auto = attrs.get("auto_pad", "NOTSET")
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        pads = _same_pads(x.shape[2:], kernel, strides, dilations, auto == "SAME_UPPER")
    elif auto == "VALID":
        pads = [0] * 2 * n
    else:
        pads = list(attrs.get("pads", [0] * 2 * n))
    return strides, dilations, pads


def _torch_pad(pads: Sequence[int]) -> list[int]:
    """ONNX pads [x1_begin, x2_begin, ..., x1_end, x2_end] in F.pad's order (last axis
    first)."""
    n = len(pads) // 2
    out: list[int] = []
    for axis in reversed(range(n)):
        out += [pads[axis], pads[axis + n]]
    return out


# ---- convolution, products, pooling ------------------------------------------------------

def _conv(a: Inputs, attrs: Attrs, opset: int) -> Tensor:
    x, w, b = a[0], a[1], a[2] if len(a) > 2 else None
    kernel = list(attrs.get("kernel_shape", w.shape[2:]))
    strides, dilations, pads = _window(x, attrs, kernel)
    conv = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[len(kernel)]
    return conv(F.pad(x, _torch_pad(pads)), w, b, strides, 0, dilations,
                attrs.get("group", 1))


def _gemm(a: Inputs, attrs: Attrs, opset: int) -> Tensor:
    x = a[0].T if attrs.get("transA", 0) else a[0]
    w = a[1].T if attrs.get("transB", 0) else a[1]
    out = attrs.get("alpha", 1.0) * (x @ w)
    if len(a) > 2 and a[2] is not None:
        out = out + attrs.get("beta", 1.0) * a[2]
    return out


def _pool(kind: str) -> Op:
    def pool(a: Inputs, attrs: Attrs, opset: int) -> Tensor:
        return _window_pool(a[0], attrs, kind)
    return pool


def _window_pool(x: Tensor, attrs: Attrs, kind: str) -> Tensor:
    """MaxPool and AveragePool for any pads, ceil_mode and count_include_pad: the input is
    padded explicitly (with -inf for max) and a window count divides an average, as the
    ONNX reference does, so asymmetric pads need nothing torch's pooling lacks."""
    kernel = list(attrs["kernel_shape"])
    strides, dilations, pads = _window(x, attrs, kernel)
    n = len(kernel)
    extra = []
    for i, size in enumerate(x.shape[2:]):
        span = (kernel[i] - 1) * dilations[i] + 1
        room = size + pads[i] + pads[i + n] - span
        out = (math.ceil if attrs.get("ceil_mode", 0) else math.floor)(room / strides[i]) + 1
        if attrs.get("ceil_mode", 0) and (out - 1) * strides[i] >= size + pads[i]:
            out -= 1  # the last window must start inside the input or its begin pad
        extra.append(max(0, (out - 1) * strides[i] + span - (size + pads[i] + pads[i + n])))
    ends = [p + e for p, e in zip(pads[n:], extra, strict=True)]
    if kind == "max":
        padded = F.pad(x, _torch_pad(pads[:n] + ends), value=-math.inf)
        maxpool = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}[n]
        return maxpool(padded, kernel, strides, 0, dilations)
    if any(d != 1 for d in dilations):
        raise EmulationError("AveragePool with dilations is not emulated")
    avgpool = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}[n]
    volume = math.prod(kernel)
    total = avgpool(F.pad(x, _torch_pad(pads[:n] + ends)), kernel, strides) * volume
    ones = torch.ones((1, 1, *x.shape[2:]), dtype=x.dtype)
    if attrs.get("count_include_pad", 0):  # the pads count, the ceil overhang does not
        ones = F.pad(ones, _torch_pad(pads), value=1.0)
        mask = F.pad(ones, _torch_pad([0] * n + extra))
    else:
        mask = F.pad(ones, _torch_pad(pads[:n] + ends))
    return total / (avgpool(mask, kernel, strides) * volume)


def _global(reduce: Callable[..., Tensor]) -> Op:
    def pool(a: Inputs, attrs: Attrs, opset: int) -> Tensor:
        return reduce(a[0], dim=tuple(range(2, a[0].dim())), keepdim=True)
    return pool


# ---- element-wise and normalization --------------------------------------------------

def _binary(fn: Callable[[Tensor, Tensor], Tensor]) -> Op:
    return lambda a, attrs, opset: fn(a[0], a[1])


def _unary(fn: Callable[[Tensor], Tensor]) -> Op:
    return lambda a, attrs, opset: fn(a[0])


def _div(x: Tensor, y: Tensor) -> Tensor:
    if x.is_floating_point():
        return x / y
    return torch.div(x, y, rounding_mode="trunc")  # integer Div truncates (shape arithmetic)


def _clip(a: Inputs, attrs: Attrs, opset: int) -> Tensor:
    if opset < 11:  # min and max were attributes until opset 11
        low, high = attrs.get("min"), attrs.get("max")
    else:
        low = a[1].item() if len(a) > 1 and a[1] is not None else None
        high = a[2].item() if len(a) > 2 and a[2] is not None else None
    return torch.clamp(a[0], low, high)


def _hard_sigmoid(x: Tensor, alpha: float, beta: float) -> Tensor:
    return torch.clamp(alpha * x + beta, 0.0, 1.0)


def _softmax(fn: Callable[..., Tensor]) -> Op:
    def softmax(a: Inputs, attrs: Attrs, opset: int) -> Tensor:
        x = a[0]
        if opset >= 13:  # one axis since opset 13 (default -1)
            return fn(x, dim=attrs.get("axis", -1))
        axis = _axis(attrs.get("axis", 1), x.dim())  # before: coerced to 2-D at `axis`
        flat = x.reshape(math.prod(x.shape[:axis]), -1)
        return fn(flat, dim=1).reshape(x.shape)
    return softmax


def _batch_norm(a: Inputs, attrs: Attrs, opset: int) -> Tensor:
    x, scale, bias, mean, var = a[:5]
    shape = (1, -1) + (1,) * (x.dim() - 2)
    inv = torch.rsqrt(var + attrs.get("epsilon", 1e-5))
    return (x - mean.reshape(shape)) * (scale * inv).reshape(shape) + bias.reshape(shape)


def _layer_norm(a: Inputs, attrs: Attrs, opset: int) -> list[Tensor]:
    x, scale = a[0], a[1]
    bias = a[2] if len(a) > 2 else None
    axis = _axis(attrs.get("axis", -1), x.dim())
    dims = tuple(range(axis, x.dim()))
    mean = x.mean(dim=dims, keepdim=True)
    inv = torch.rsqrt(((x - mean) ** 2).mean(dim=dims, keepdim=True)
                      + attrs.get("epsilon", 1e-5))
    y = (x - mean) * inv * scale
    return [y if bias is None else y + bias, mean, inv]


def _lrn(a: Inputs, attrs: Attrs, opset: int) -> Tensor:
    """Across channels: the window [c - floor((size-1)/2), c + ceil((size-1)/2)] (torch's
    local_response_norm centres an even window the other way)."""
    x, size = a[0], attrs["size"]
    before, after = (size - 1) // 2, size - 1 - (size - 1) // 2
    square = F.pad(x * x, (0, 0) * (x.dim() - 2) + (before, after))
    total = sum(square[:, i:i + x.shape[1]] for i in range(size))
    scale = attrs.get("bias", 1.0) + attrs.get("alpha", 1e-4) / size * total
    return x / scale ** attrs.get("beta", 0.75)


def _axes(a: Inputs, attrs: Attrs, opset: int, moved_at: int) -> list[int] | None:
    """`axes`: an attribute before opset `moved_at`, the second input from it on."""
    if opset < moved_at:
        return list(attrs["axes"]) if "axes" in attrs else None
    return _ints(a[1]) if len(a) > 1 and a[1] is not None else None


def _reduce(fn: Callable[..., Tensor], moved_at: int) -> Op:
    def reduce(a: Inputs, attrs: Attrs, opset: int) -> Tensor:
        x, axes = a[0], _axes(a, attrs, opset, moved_at)
        if not axes:
            if attrs.get("noop_with_empty_axes", 0):
                return x
            axes = list(range(x.dim()))
        return fn(x, dim=tuple(axes), keepdim=bool(attrs.get("keepdims", 1)))
    return reduce


def _variadic(a: Inputs, attrs: Attrs, opset: int) -> Tensor:
    total = a[0]
    for t in a[1:]:
        total = total + t
    return total


# ---- shapes and data movement ------------------------------------------------------------

def _concat(a: Inputs, attrs: Attrs, opset: int) -> Tensor:
    return torch.cat([t for t in a if t is not None], dim=attrs["axis"])


def _split(a: Inputs, attrs: Attrs, opset: int) -> list[Tensor]:
    x, axis = a[0], attrs.get("axis", 0)
    sizes = (attrs.get("split") if opset < 13
             else (_ints(a[1]) if len(a) > 1 and a[1] is not None else None))
    if not sizes:
        parts = attrs.get("num_outputs") or attrs["_outputs"]
        chunk = math.ceil(x.shape[axis] / parts)  # opset 18: the last part may be smaller
        return list(torch.split(x, chunk, dim=axis))
    return list(torch.split(x, list(sizes), dim=axis))


def _flatten(a: Inputs, attrs: Attrs, opset: int) -> Tensor:
    x = a[0]
    axis = _axis(attrs.get("axis", 1), x.dim())
    return x.reshape(math.prod(x.shape[:axis]), math.prod(x.shape[axis:]))


def _reshape(a: Inputs, attrs: Attrs, opset: int) -> Tensor:
    x, shape = a[0], _ints(a[1])
    if not attrs.get("allowzero", 0):  # 0 copies the input's dimension
        shape = [x.shape[i] if s == 0 else s for i, s in enumerate(shape)]
    return x.reshape(shape)


def _transpose(a: Inputs, attrs: Attrs, opset: int) -> Tensor:
    perm = attrs.get("perm", list(reversed(range(a[0].dim()))))
    return a[0].permute(*perm)


def _squeeze(a: Inputs, attrs: Attrs, opset: int) -> Tensor:
    x, axes = a[0], _axes(a, attrs, opset, 13)
    if axes is None:
        return x.squeeze()
    keep = {_axis(i, x.dim()) for i in axes}
    return x.reshape([d for i, d in enumerate(x.shape) if i not in keep])


def _unsqueeze(a: Inputs, attrs: Attrs, opset: int) -> Tensor:
    x, axes = a[0], _axes(a, attrs, opset, 13)
    rank = x.dim() + len(axes)
    for axis in sorted(_axis(i, rank) for i in axes):
        x = x.unsqueeze(axis)
    return x


def _gather(a: Inputs, attrs: Attrs, opset: int) -> Tensor:
    data, index = a[0], a[1].long()
    axis = _axis(attrs.get("axis", 0), data.dim())
    index = torch.where(index < 0, index + data.shape[axis], index)
    picked = data.index_select(axis, index.reshape(-1))
    return picked.reshape([*data.shape[:axis], *index.shape, *data.shape[axis + 1:]])


def _slice(a: Inputs, attrs: Attrs, opset: int) -> Tensor:
    x = a[0]
    if opset < 10:  # starts, ends and axes were attributes until opset 10
        starts, ends = list(attrs["starts"]), list(attrs["ends"])
        axes = list(attrs.get("axes", range(len(starts))))
        steps = [1] * len(starts)
    else:
        starts, ends = _ints(a[1]), _ints(a[2])
        axes = _ints(a[3]) if len(a) > 3 and a[3] is not None else list(range(len(starts)))
        steps = _ints(a[4]) if len(a) > 4 and a[4] is not None else [1] * len(starts)
    for start, end, axis, step in zip(starts, ends, axes, steps, strict=True):
        axis, size = _axis(axis, x.dim()), x.shape[_axis(axis, x.dim())]
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
        pads = _ints(a[1])
        value = a[2].item() if len(a) > 2 and a[2] is not None and a[2].numel() else 0.0
        if len(a) > 3 and a[3] is not None:  # opset 18: pads for `axes` only
            axes = [_axis(i, x.dim()) for i in _ints(a[3])]
            full = [0] * 2 * x.dim()
            for k, axis in enumerate(axes):
                full[axis], full[axis + x.dim()] = pads[k], pads[k + len(axes)]
            pads = full
    mode = _PAD_MODES[attrs.get("mode", "constant")]
    if mode == "constant":
        return F.pad(x, _torch_pad(pads), value=value)
    # torch pads the last one to three axes of a batch of channels: fold the leading
    # unpadded axes into one channel axis
    rank = x.dim()
    first = next((i for i in range(rank) if pads[i] or pads[i + rank]), rank)
    first = min(first, max(rank - 1, 0))
    if rank - first > 3:
        raise EmulationError(f"Pad mode {attrs['mode']} on more than the last three axes "
                             "is not emulated")
    inner = _torch_pad(pads[first:rank] + pads[rank + first:])
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
    return _array(value).reshape(()).expand(_ints(a[0])).clone()


def _expand(a: Inputs, attrs: Attrs, opset: int) -> Tensor:
    shape = torch.broadcast_shapes(a[0].shape, tuple(_ints(a[1])))
    return a[0].expand(shape).clone()


def _range(a: Inputs, attrs: Attrs, opset: int) -> Tensor:
    start, limit, delta = (t.item() for t in a[:3])
    return torch.arange(start, limit, delta, dtype=a[0].dtype)


def _where(a: Inputs, attrs: Attrs, opset: int) -> Tensor:
    return torch.where(a[0].bool(), a[1], a[2])


# ---- recurrent layers --------------------------------------------------------------------

def _recurrent_inputs(a: Inputs, attrs: Attrs, gates: int, cell: str) -> tuple:
    """X as (T, N, E), the weights, and per-direction initial states, after refusing the
    options the cells below do not compute."""
    if any(k in attrs for k in ("clip", "activations", "activation_alpha")) or \
            attrs.get("input_forget", 0):
        raise EmulationError(f"{cell} with clip, custom activations or input_forget is not "
                             "emulated")
    if len(a) > 7 and a[7] is not None:
        raise EmulationError("LSTM peephole weights (input P) are not emulated")
    layout = attrs.get("layout", 0)
    x = a[0].transpose(0, 1) if layout else a[0]
    steps = x.shape[0]
    if len(a) > 4 and a[4] is not None and bool((a[4] != steps).any()):
        raise EmulationError(f"{cell} sequence_lens shorter than the {steps} steps is not "
                             "emulated")
    w, r = a[1], a[2]
    hidden = attrs.get("hidden_size", w.shape[1] // gates)
    directions, batch = w.shape[0], x.shape[1]
    b = a[3] if len(a) > 3 and a[3] is not None else torch.zeros(directions,
                                                                  2 * gates * hidden)

    def state(i: int) -> Tensor:
        given = a[i] if len(a) > i and a[i] is not None else None
        if given is None:
            return torch.zeros(directions, batch, hidden)
        return given.transpose(0, 1) if layout else given
    return x, w, r, b, state(5), state(6), layout


def _recurrent_outputs(ys: list[Tensor], finals: list[list[Tensor]],
                       layout: int) -> list[Tensor]:
    """Y (T, D, N, H) and the final states (D, N, H), or their layout-1 forms
    (N, T, D, H) and (N, D, H)."""
    y = torch.stack(ys, 1)
    states = [torch.stack(f, 0) for f in finals]
    if layout:
        return [y.permute(2, 0, 1, 3), *(s.transpose(0, 1) for s in states)]
    return [y, *states]


def _directions(attrs: Attrs, count: int) -> list[bool]:
    """Per direction of the weights: whether it runs backwards over the steps."""
    kind = attrs.get("direction", "forward")
    return [False, True] if kind == "bidirectional" else [kind == "reverse"] * count


def _lstm(a: Inputs, attrs: Attrs, opset: int) -> list[Tensor]:
    """Gates in ONNX's order i, o, f, c; c' = f*c + i*g, h' = o*tanh(c')."""
    x, w, r, b, h0, c0, layout = _recurrent_inputs(a, attrs, 4, "LSTM")
    hidden = w.shape[1] // 4
    ys, hs, cs = [], [], []
    for d, backwards in enumerate(_directions(attrs, w.shape[0])):
        h, c = h0[d], c0[d]
        bias = b[d, :4 * hidden] + b[d, 4 * hidden:]
        out: list[Tensor] = [torch.empty(0)] * x.shape[0]
        steps = range(x.shape[0] - 1, -1, -1) if backwards else range(x.shape[0])
        for t in steps:
            i, o, f, g = (x[t] @ w[d].T + h @ r[d].T + bias).chunk(4, dim=-1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
            out[t] = h
        ys.append(torch.stack(out))
        hs.append(h)
        cs.append(c)
    return _recurrent_outputs(ys, [hs, cs], layout)


def _gru(a: Inputs, attrs: Attrs, opset: int) -> list[Tensor]:
    """Gates in ONNX's order z, r, h; linear_before_reset applies r after the recurrent
    product (as torch.nn.GRU does) instead of before it."""
    x, w, r, b, h0, _, layout = _recurrent_inputs(a, attrs, 3, "GRU")
    before = attrs.get("linear_before_reset", 0)
    ys, hs = [], []
    for d, backwards in enumerate(_directions(attrs, w.shape[0])):
        h = h0[d]
        wz, wr, wh = w[d].chunk(3)
        rz, rr, rh = r[d].chunk(3)
        bwz, bwr, bwh, brz, brr, brh = b[d].chunk(6)
        out: list[Tensor] = [torch.empty(0)] * x.shape[0]
        steps = range(x.shape[0] - 1, -1, -1) if backwards else range(x.shape[0])
        for t in steps:
            z = torch.sigmoid(x[t] @ wz.T + h @ rz.T + bwz + brz)
            reset = torch.sigmoid(x[t] @ wr.T + h @ rr.T + bwr + brr)
            recurrent = reset * (h @ rh.T + brh) if before else (reset * h) @ rh.T + brh
            h = (1 - z) * torch.tanh(x[t] @ wh.T + bwh + recurrent) + z * h
            out[t] = h
        ys.append(torch.stack(out))
        hs.append(h)
    return _recurrent_outputs(ys, [hs], layout)


def _mod(a: Inputs, attrs: Attrs, opset: int) -> Tensor:
    """fmod=1: the remainder takes the dividend's sign (C's fmod); else the divisor's."""
    return (torch.fmod if attrs.get("fmod", 0) else torch.remainder)(a[0], a[1])


def _dropout(a: Inputs, attrs: Attrs, opset: int) -> list[Tensor]:
    return [a[0], torch.ones_like(a[0], dtype=torch.bool)]  # inference: the identity


OPS: dict[str, Op] = {
    "Conv": _conv, "Gemm": _gemm, "MatMul": _binary(torch.matmul),
    "Add": _binary(torch.add), "Sub": _binary(torch.sub), "Mul": _binary(torch.mul),
    "Div": _binary(_div), "Mod": _mod, "Pow": _binary(torch.pow), "Equal": _binary(torch.eq),
    "Less": _binary(torch.lt), "Greater": _binary(torch.gt),
    "Max": lambda a, attrs, opset: torch.stack(torch.broadcast_tensors(*a)).amax(0),
    "Min": lambda a, attrs, opset: torch.stack(torch.broadcast_tensors(*a)).amin(0),
    "Sqrt": _unary(torch.sqrt), "Erf": _unary(torch.erf), "Exp": _unary(torch.exp),
    "Log": _unary(torch.log), "Neg": _unary(torch.neg), "Abs": _unary(torch.abs),
    "Reciprocal": _unary(torch.reciprocal), "Not": _unary(torch.logical_not),
    "Relu": _unary(torch.relu), "Sigmoid": _unary(torch.sigmoid), "Tanh": _unary(torch.tanh),
    "LeakyRelu": lambda a, attrs, opset: F.leaky_relu(a[0], attrs.get("alpha", 0.01)),
    "Clip": _clip,
    "HardSigmoid": lambda a, attrs, opset: _hard_sigmoid(a[0], attrs.get("alpha", 0.2),
                                                         attrs.get("beta", 0.5)),
    "HardSwish": lambda a, attrs, opset: a[0] * _hard_sigmoid(a[0], 1 / 6, 0.5),
    "Gelu": lambda a, attrs, opset: F.gelu(a[0], approximate=attrs.get("approximate",
                                                                       "none")),
    "Softmax": _softmax(torch.softmax), "LogSoftmax": _softmax(torch.log_softmax),
    "BatchNormalization": _batch_norm, "LayerNormalization": _layer_norm, "LRN": _lrn,
    "ReduceMean": _reduce(torch.mean, 18), "ReduceSum": _reduce(torch.sum, 13),
    "ReduceMax": _reduce(torch.amax, 18),
    "MaxPool": _pool("max"), "AveragePool": _pool("avg"),
    "GlobalAveragePool": _global(torch.mean), "GlobalMaxPool": _global(torch.amax),
    "Concat": _concat, "Split": _split, "Flatten": _flatten, "Reshape": _reshape,
    "Transpose": _transpose, "Squeeze": _squeeze, "Unsqueeze": _unsqueeze,
    "Gather": _gather, "Slice": _slice, "Pad": _pad,
    "Identity": _unary(lambda x: x), "Dropout": _dropout,
    "Cast": lambda a, attrs, opset: a[0].to(_dtype(attrs["to"])),
    "CastLike": lambda a, attrs, opset: a[0].to(a[1].dtype),
    "Shape": _shape, "Constant": _constant, "ConstantOfShape": _constant_of_shape,
    "Expand": _expand, "Range": _range, "Where": _where,
    "LSTM": _lstm, "GRU": _gru,
    "Sum": _variadic,
    "Mean": lambda a, attrs, opset: _variadic(a, attrs, opset) / len(a),
}
