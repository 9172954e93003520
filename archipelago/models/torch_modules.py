"""The torch operators that hold weights or a window (convolutions, linear layers, LSTMs
and GRUs, pooling, attention) as DAG layers, and the table of every operator's handler.
"""

from typing import Any

from archipelago.models.dag import FC, LSTM, Elementwise, MatMul, Pool
from archipelago.models.elementwise_ops import OPS_PER_ELEMENT, lrn_ops
from archipelago.models.layer_forms import conv_layer
from archipelago.models.torch_calls import PASS, Call
from archipelago.models.torch_layers import (
    Builder,
    Data,
    Input,
    Other,
    batch_norm,
    binary,
    borders,
    data_shape,
    full_shape,
    matmul,
    normalization,
    numel,
    onnx_op,
    op_work,
    pair,
    pointwise,
    window,
)
from archipelago.models.torch_tensors import (
    embedding,
    expand,
    lookup,
    parameter_concat,
    part,
    roll,
    sdpa,
    selection,
    split,
)


def conv(b: Builder, call: Call) -> None:
    src, a = b.operand(call), call.attrs
    b.relayout(src)
    if pair(a["dilation"]) != (1, 1):
        b.fail(call, f"dilation {a['dilation']}: dilated convolutions are not supported")
    if a.get("padding_mode", "zeros") != "zeros":
        b.fail(call, f"padding_mode '{a['padding_mode']}': only zero padding")
    out_ch, per_group, *kernel = a["weight"]
    kernel, stride = (kernel[0], kernel[1]), pair(a["stride"])
    out = full_shape(call.out)[-3:]
    kind, fields = conv_layer(
        {"out_ch": out_ch, "in_ch": per_group * a["groups"], "groups": a["groups"],
         "out_rows": out[1], "out_cols": out[2], "relu": False,
         **window(kernel, stride, borders(b, call, src, kernel, stride, a["padding"]))},
        full_shape(src)[-2:])
    name = b.add(call, kind(name=b.unique(call.base), deps=b.deps(src), **fields), src)
    b.params[name] = a["path"]


def pool(b: Builder, call: Call) -> None:
    src, a = b.operand(call), call.attrs
    b.relayout(src)
    if pair(a["dilation"]) != (1, 1):
        b.fail(call, f"dilation {a['dilation']}: dilated pooling is not supported")
    kernel, stride = pair(a["kernel"]), pair(a["stride"])
    out = full_shape(call.out)[-3:]
    b.add(call, Pool(name=b.unique(call.base), deps=b.deps(src), channels=out[0],
                     kind="max" if call.op == "max_pool" else "avg", out_rows=out[1],
                     out_cols=out[2],
                     **window(kernel, stride, borders(b, call, src, kernel, stride,
                                                      a["padding"]))), src)


def adaptive_pool(b: Builder, call: Call) -> None:
    """Adaptive average pooling to a size that divides the map: an average pool whose
    window is the quotient; to the map's own size, nothing."""
    src = b.operand(call)
    (rows_in, cols_in), out = full_shape(src)[-2:], full_shape(call.out)[-3:]
    if rows_in % out[1] or cols_in % out[2]:
        b.fail(call, f"adaptive pooling of {rows_in}x{cols_in} to {out[1]}x{out[2]}: only "
               "to a size dividing the map")
    if (rows_in, cols_in) == out[1:]:
        b.value[call.out] = b.value[src]
        return
    kernel = (rows_in // out[1], cols_in // out[2])
    b.add(call, Pool(name=b.unique(call.base), deps=b.deps(src), kind="avg",
                     channels=out[0], out_rows=out[1], out_cols=out[2],
                     **window(kernel, kernel, (0, 0, 0, 0))), src)


def mean(b: Builder, call: Call) -> None:
    """`x.mean((2, 3))`, global average pooling as EfficientNet's code writes it; a mean
    over other axes (timm's Swin averaging its channels-last map's tokens) is the
    element-wise ReduceMean the ONNX importer writes for it."""
    src = b.operand(call)
    shape, dims = full_shape(src), call.attrs["dims"]
    dims = {d % len(shape) for d in (dims if isinstance(dims, list | tuple) else [dims])}
    if len(shape) != 4 or dims != {2, 3}:
        b.add(call, Elementwise(name=b.unique(call.base), deps=b.deps(src), op="ReduceMean",
                                shape=data_shape(call.out),
                                ops_per_element=OPS_PER_ELEMENT["ReduceMean"]), src)
        return
    b.add(call, Pool(name=b.unique(call.base), deps=b.deps(src), kind="avg",
                     channels=shape[1], out_rows=1, out_cols=1,
                     **window(shape[2:], shape[2:], (0, 0, 0, 0))), src)


def linear(b: Builder, call: Call) -> None:
    """A Linear on (..., in) applies its weights to every row: `rows` of the FC layer."""
    src = b.operand(call)
    out_features, in_features = call.attrs["weight"]
    name = b.add(call, FC(name=b.unique(call.base), deps=b.deps(src),
                          out_features=out_features, in_features=in_features,
                          rows=numel(full_shape(src)) // in_features), src)
    b.params[name] = call.attrs["path"]


def recurrent(b: Builder, call: Call) -> None:
    """nn.LSTM / nn.GRU: one DAG layer per stacked layer (`name`, `name_l1`, ...), each
    reading the previous one's (directions x hidden)-wide steps; zero initial state."""
    a, src = call.attrs, call.inputs[0]
    if a["proj_size"]:
        b.fail(call, f"proj_size {a['proj_size']}: projected LSTMs are not supported")
    if any(isinstance(b.value.get(n), Data | Input) for n in call.inputs[1:]):
        b.fail(call, "an initial state computed by the model; only the zero state")
    shape = full_shape(src)
    steps = shape[0] if len(shape) == 2 else shape[1 if a["batch_first"] else 0]
    if numel(shape) != steps * a["input_size"]:
        b.fail(call, f"input {list(shape)} holds a batch of several sequences; batch 1 only")
    directions, deps, names = 2 if a["bidirectional"] else 1, b.deps(src), []
    for index in range(a["layers"]):
        embed = a["input_size"] if index == 0 else directions * a["hidden"]
        layer = LSTM(name=b.unique(call.base if index == 0 else f"{call.base}_l{index}"),
                     deps=deps, embed=embed, hidden=a["hidden"], cells=steps,
                     cell=call.op, directions=directions)
        names.append(b.add(call, layer, src))
        deps = (layer.name,)
    b.params[names[0]] = a["path"]
    b.value[call.out] = Other("tuple", first=Data((names[-1],)), what=call.what)


def attention(b: Builder, call: Call) -> None:
    """nn.MultiheadAttention (packed projections, no masks) as its computation: Q, K and
    V projections, per-head scores Q K^T, their scaled softmax, the weighted sum of V and
    the output projection."""
    a = call.attrs
    data = [n for n in call.inputs if isinstance(b.value.get(n), Data | Input)]
    if len(data) != len(call.inputs) or not 0 < len(data) <= 3 or not a["packed"] \
            or a["outputs"] != 1:
        b.fail(call, "only self- or cross-attention with one embedding size, no masks and "
               "its attention weights unused")
    data = [data[0], data[-1], data[-1]] if len(data) < 3 else data  # self, key is value
    embed, heads = a["embed"], a["heads"]
    rows = [numel(full_shape(n)) // embed for n in data]
    names = []
    for suffix, node, tokens in zip("qkv", data, rows, strict=True):
        names.append(b.add(call, FC(name=b.unique(f"{call.base}_{suffix}"),
                                    deps=b.deps(node), out_features=embed,
                                    in_features=embed, rows=tokens), node))
    (q, k, v), (target, source), width = names, rows[:2], embed // heads
    scores = b.add(call, MatMul(name=b.unique(f"{call.base}_scores"), deps=(q, k),
                                batch=heads, rows=target, inner=width, cols=source))
    weights = b.add(call, Elementwise(name=b.unique(f"{call.base}_softmax"), deps=(scores,),
                                      op=onnx_op("softmax"), shape=(heads, target, source),
                                      ops_per_element=op_work("softmax") + 1))
    context = b.add(call, MatMul(name=b.unique(f"{call.base}_context"), deps=(weights, v),
                                 batch=heads, rows=target, inner=source, cols=width))
    out = b.add(call, FC(name=b.unique(f"{call.base}_out"), deps=(context,),
                         out_features=embed, in_features=embed, rows=target))
    if a["tuple"]:  # torch.fx's module call returns (output, weights)
        b.value[call.out] = Other("tuple", first=Data((out,)), what=call.what)


def getitem(b: Builder, call: Call) -> None:
    value = b.value.get(call.inputs[0])
    if isinstance(value, Other) and value.kind == "split":
        part(b, call)
    elif isinstance(value, Other) and value.kind == "tuple":
        if call.attrs["index"] != 0:
            b.fail(call, f"its output {call.attrs['index']} (an LSTM's final state, attention "
                   "weights) is not supported; read its first output", value.what)
        b.value[call.out] = value.first
    elif isinstance(value, Data | Input):
        b.fail(call, "indexing a computed value (taking one step or a slice) is not supported")
    else:
        b.value[call.out] = Other("const")


def cat(b: Builder, call: Call) -> None:
    """Concatenation on the first axis after the batch joins values as the DAG does (one
    layer reading several: their outputs in turn); other axes interleave them."""
    shape = full_shape(call.out)
    dim = call.attrs["dim"] % len(shape)
    if numel(shape[:dim]) != 1:
        b.fail(call, f"concatenation on axis {call.attrs['dim']} of {list(shape)}; only on "
               "the first axis after the batch (channels, or steps)")
    values = [b.value[n] for n in call.inputs]
    if any(isinstance(v, Input) for v in values) or not any(isinstance(v, Data)
                                                            for v in values):
        b.fail(call, "joins a model input with layer outputs")
    if not all(isinstance(v, Data) for v in values):
        if not all(isinstance(v, Data) or v.kind == "param" for v in values):
            b.fail(call, "joins a constant that is no parameter with layer outputs")
        parameter_concat(b, call, values)
        return
    b.value[call.out] = Data(tuple(name for v in values for name in v.layers))


def passthrough(b: Builder, call: Call) -> None:
    data = b.data(call)
    b.value[call.out] = b.value[data[0]] if data else Other("const")


def lrn(b: Builder, call: Call) -> None:
    if call.attrs.get("outputs", 1) != 1:
        b.fail(call, "a value inside the normalization is read elsewhere")
    pointwise(b, call, lrn_ops(call.attrs["size"]))


def _meta(b: Builder, call: Call) -> None:
    b.value[call.out] = Other("meta")


def _const(b: Builder, call: Call) -> None:
    b.value[call.out] = Other("const")


def _inner(b: Builder, call: Call) -> None:
    """An operator inside a module call imported as a whole (attention, in torch.export)."""


HANDLERS: dict[str, Any] = {
    "conv": conv, "max_pool": pool, "avg_pool": pool, "adaptive_avg_pool": adaptive_pool,
    "mean": mean, "linear": linear, "lstm": recurrent, "gru": recurrent, "mha": attention,
    "batch_norm": batch_norm, "layer_norm": normalization, "lrn": lrn,
    "add": binary, "sub": binary, "mul": binary, "div": binary, "matmul": matmul,
    "cat": cat, "getitem": getitem, PASS: passthrough, "meta": _meta, "const": _const,
    "inner": _inner, "embedding": embedding, "select": selection, "slice": selection,
    "index": selection, "split": split, "sdpa": sdpa, "expand": expand, "gather": lookup,
    "eq": pointwise, "cumsum": normalization, "and": binary, "roll": roll,
    # x != c is Not(Equal(x, c)), as ONNX writes it: one layer of both operations
    "ne": lambda b, call: pointwise(b, call, op_work("eq") + OPS_PER_ELEMENT["Not"]),
    **{op: pointwise for op in ("relu", "clip", "sigmoid", "tanh", "silu", "hardsigmoid",
                                "hardswish", "gelu")},
    "softmax": normalization,  # its own layer, as the ONNX importer's OWN_OPS
}
