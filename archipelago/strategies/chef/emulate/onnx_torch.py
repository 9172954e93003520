"""ONNX operators written in torch: the emulator's interpreter of an imported file's nodes
(shape operators in onnx_shapes.py, LSTM and GRU in onnx_rnn.py).

It shares no code with onnxruntime, which the emulation compares it with, so an agreement
means the split run computes what the file says, not what one runtime does. Every operator
follows the ONNX operator specification (onnx.ai/onnx/operators) for the opsets a node can
come from: where an input moved to an attribute or back (Clip, Split, Squeeze, Unsqueeze,
ReduceMean, Slice, Pad) the model's opset decides. An operator not written here is refused
in one line naming the node. The onnx package is imported here only.
"""

import math
from collections.abc import Callable, Iterable, Mapping, Sequence

import torch
import torch.nn.functional as F
from onnx import NodeProto, helper, numpy_helper

from archipelago.emulate.errors import EmulationError
from archipelago.strategies.chef.emulate.onnx_common import (
    Attrs,
    Inputs,
    Op,
    Tensor,
    optional_axes,
    positive_axis,
    torch_pad,
)
from archipelago.strategies.chef.emulate.onnx_rnn import RECURRENT_OPS
from archipelago.strategies.chef.emulate.onnx_shapes import SHAPE_OPS


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


# ---- convolution, products, pooling ------------------------------------------------------

def _conv(a: Inputs, attrs: Attrs, opset: int) -> Tensor:
    x, w, b = a[0], a[1], a[2] if len(a) > 2 else None
    kernel = list(attrs.get("kernel_shape", w.shape[2:]))
    strides, dilations, pads = _window(x, attrs, kernel)
    conv = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[len(kernel)]
    return conv(F.pad(x, torch_pad(pads)), w, b, strides, 0, dilations,
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
        padded = F.pad(x, torch_pad(pads[:n] + ends), value=-math.inf)
        maxpool = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}[n]
        return maxpool(padded, kernel, strides, 0, dilations)
    if any(d != 1 for d in dilations):
        raise EmulationError("AveragePool with dilations is not emulated")
    avgpool = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}[n]
    volume = math.prod(kernel)
    total = avgpool(F.pad(x, torch_pad(pads[:n] + ends)), kernel, strides) * volume
    ones = torch.ones((1, 1, *x.shape[2:]), dtype=x.dtype)
    if attrs.get("count_include_pad", 0):  # the pads count, the ceil overhang does not
        ones = F.pad(ones, torch_pad(pads), value=1.0)
        mask = F.pad(ones, torch_pad([0] * n + extra))
    else:
        mask = F.pad(ones, torch_pad(pads[:n] + ends))
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
        axis = positive_axis(attrs.get("axis", 1), x.dim())  # before: coerced to 2-D at `axis`
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
    axis = positive_axis(attrs.get("axis", -1), x.dim())
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


def _reduce(fn: Callable[..., Tensor], moved_at: int) -> Op:
    def reduce(a: Inputs, attrs: Attrs, opset: int) -> Tensor:
        x, axes = a[0], optional_axes(a, attrs, opset, moved_at)
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
    "And": _binary(torch.logical_and), "Or": _binary(torch.logical_or),
    "Max": lambda a, attrs, opset: torch.stack(torch.broadcast_tensors(*a)).amax(0),
    "Min": lambda a, attrs, opset: torch.stack(torch.broadcast_tensors(*a)).amin(0),
    "Sqrt": _unary(torch.sqrt), "Erf": _unary(torch.erf), "Exp": _unary(torch.exp),
    "Log": _unary(torch.log), "Neg": _unary(torch.neg), "Abs": _unary(torch.abs),
    "Reciprocal": _unary(torch.reciprocal), "Not": _unary(torch.logical_not),
    "IsNaN": _unary(torch.isnan),
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
    "Identity": _unary(lambda x: x), "Dropout": _dropout, "Sum": _variadic,
    "Mean": lambda a, attrs, opset: _variadic(a, attrs, opset) / len(a),
    **SHAPE_OPS, **RECURRENT_OPS,
}
