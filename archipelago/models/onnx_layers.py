"""Layer formation: which ONNX operators become a DAG layer of their own and which are
merged into another (the rule docs/models.md writes out).

Own layers: Conv (grouped, depthwise, non-square, asymmetric pads), Gemm/MatMul with a
constant operand (FC, `rows` tokens), MatMul of two computed operands (MatMul), pooling of
every kind, LSTM/GRU (`onnx_recurrent`), Add/Sum of same-shape values (Add), and Elementwise
for the rest: a BatchNormalization not right after a conv, an activation after a layer it
cannot fuse into, Softmax, LRN, LayerNormalization, a product or quotient of two computed
values (squeeze-and-excitation), a Gather/Slice/Split selecting part of a value, reductions,
a Gather of a constant table's rows by the model's data (an embedding lookup), and a roll
(two Slices of one value joined by a Concat, `onnx_moves`; a roll of a roll joins it).

Fused into the layer before them, when that layer alone reads its output (recorded in the
layer's `fused`): a BatchNormalization into the Conv or FC right before it; an activation
(Relu, Clip, Sigmoid, SiLU as x*sigmoid(x), HardSigmoid, HardSwish, Gelu, Tanh, LeakyRelu,
elementary functions) or an operation with a constant (a bias Add, a scale Mul or Div; not
one broadcasting to more elements) into a Conv, FC, MatMul, Add or Elementwise layer.

Absorbed, run by the layer that reads their output: Flatten, Reshape, Transpose, Squeeze,
Unsqueeze, Identity, Dropout, Cast, a Concat of computed values (a layer with several
dependencies concatenates them), a zero Pad (added to the next Conv or pool's pads), and
a Gather or GatherND by constant indices picking every element once (a permutation).
"""

from typing import Any

from archipelago.models.dag import FC, Add, Conv, Elementwise, MatMul, Pool
from archipelago.models.layer_forms import conv_layer
from archipelago.models.onnx_elementwise import (
    constant_elements,
    elementwise,
    fuse_or_own,
    joined,
    product,
)
from archipelago.models.onnx_graph import Builder, batchless
from archipelago.models.onnx_moves import moved
from archipelago.models.onnx_patterns import ELEMENTWISE, find_pattern
from archipelago.models.onnx_recurrent import recurrent

PASS_OPS = {"Flatten", "Reshape", "Squeeze", "Unsqueeze", "Transpose", "Identity", "Dropout",
            "Cast", "CastLike"}
ACTIVATIONS = {"Relu", "Clip", "LeakyRelu", "PRelu", "Elu", "Selu", "Celu", "Sigmoid",
               "HardSigmoid", "HardSwish", "Gelu", "Tanh", "Softplus", "Softsign", "Mish",
               "Erf", "Exp", "Log", "Sqrt", "Neg", "Abs", "Reciprocal", "Floor", "Ceil",
               "Not"}
ARITHMETIC = {"Add", "Sub", "Mul", "Div", "Sum", "Max", "Min", "Mean", "Pow", "Equal", "And",
              "Or", "Where"}
OWN_OPS = {"Softmax", "LogSoftmax", "LRN", "LayerNormalization", "InstanceNormalization",
           "GroupNormalization", "ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin",
           "ReduceL2", "ReduceSumSquare", "Expand", "Tile", "CumSum"}
SELECTIONS = {"Gather", "Slice", "Split", "GatherElements", "GatherND"}
POOLS = {"MaxPool": "max", "AveragePool": "avg", "GlobalAveragePool": "avg",
         "GlobalMaxPool": "max"}
# A BatchNormalization folds into the weights of a Conv or FC only.
BN_INTO = (Conv, FC)


def visit(b: Builder, index: int, node: Any) -> None:
    """Place one node that reads computed data in a layer (or leave it to a reader)."""
    if index in b.skip:
        return
    data = b.data_inputs(node)
    op = node.op_type
    if op in ELEMENTWISE and len(data) == 1 and _pattern(b, index, node, data[0]):
        return
    if op == "IsNaN" and _nan_guard(b, index, node, data):
        return
    if op == "Expand" and len(data) == 1 and b.shape(data[0]) == b.shape(node.output[0]):
        b.pass_through(index, node, data)  # to the shape it has: nothing repeated
        return
    if op in PASS_OPS:
        if op == "Reshape":
            _check_reshape(b, node, data[0])
        b.pass_through(index, node, data[:1])
    elif op == "Concat":
        _concat(b, index, node, data)
    elif op == "Pad":
        _pad(b, index, node, data)
    elif op == "Conv":
        _conv(b, index, node, data)
    elif op in POOLS:
        _pool(b, index, node, data)
    elif op in ("Gemm", "MatMul"):
        _matmul(b, index, node, data)
    elif op in ("LSTM", "GRU"):
        recurrent(b, index, node, data)
    elif op == "BatchNormalization":
        _batchnorm(b, index, node, data)
    elif op in ACTIVATIONS:
        _activation(b, index, node, data)
    elif op in ARITHMETIC:
        _arithmetic(b, index, node, data)
    elif op in SELECTIONS:
        _selection(b, index, node, data)
    elif op in ("ReduceMean", "ReduceMax") and _spatial_reduction(b, node):
        _global_pool(b, index, node)
    elif op in OWN_OPS or op == "LRN":
        elementwise(b, index, node, op, data if len(data) == 1 else
                     [joined(b, node, d) for d in data],
                     params=constant_elements(b, node))
    else:
        if op in ("Shape", "Size"):  # folded wherever its input's shape is known
            b.shape(node.input[0])  # so it is not: that shape is the one-line error
        raise b.fail(node, f"operator {op} is not supported")


# -- shared ---------------------------------------------------------------------------

def _check_reshape(b: Builder, node: Any, data: str) -> None:
    """A Reshape of data to a constant target its elements do not fill, refused here: onnx's
    strict inference passes it, and it would fail only inside an emulation's rank."""
    from archipelago.models.onnx_fold import reshaped

    if len(node.input) < 2 or node.input[1] not in b.constants:
        return
    target = [int(d) for d in b.constants[node.input[1]].reshape(-1)]
    try:
        reshaped(b.shape(data), target, bool(b.attr(node, "allowzero", 0)))
    except ValueError as err:
        raise b.fail(node, str(err)) from None


# -- operators ------------------------------------------------------------------------

def _concat(b: Builder, index: int, node: Any, data: list[str]) -> None:
    params = constant_elements(b, node)
    if not params:
        b.pass_through(index, node, data)
    else:  # a learned token or map joined to computed ones (ViT's class token)
        elementwise(b, index, node, "Concat", data, params=params)


def _pad(b: Builder, index: int, node: Any, data: list[str]) -> None:
    mode = b.attr(node, "mode", "constant")
    pads = b.optional_const(node, 1) if len(node.input) > 1 else b.attr(node, "pads", None)
    value = b.optional_const(node, 2) if len(node.input) > 2 else b.attr(node, "value", 0.0)
    shape = b.shape(data[0])
    pads = [int(p) for p in pads] if pads is not None else []
    axes = b.optional_const(node, 3) if len(node.input) > 3 else None
    if axes is not None or len(shape) != 4 or len(pads) != 8 or any(pads[:2] + pads[4:6]) \
            or mode != "constant" or (value is not None and float(value) != 0.0):
        raise b.fail(node, f"Pad {pads} ({mode}, value {value}) is imported only as zero "
                     "padding of a feature map's rows and columns before a Conv or pool")
    b.pass_through(index, node, data[:1], (pads[2], pads[3], pads[6], pads[7]))


def _window(b: Builder, node: Any, x: str, out: tuple[int, ...], kernel: tuple[int, int],
            strides: tuple[int, int]) -> dict[str, Any]:
    """Kernel, strides and (top, left, bottom, right) pads as _Window's fields: explicit
    pads or auto_pad's, a Pad before the node, and the bottom/right rows a ceil_mode
    output reads past the input (the inferred output shape says how many)."""
    size = b.shape(x)[2:]
    auto = b.attr(node, "auto_pad", "NOTSET")
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        pads = [0, 0, 0, 0]
        for axis in (0, 1):
            total = max((out[axis] - 1) * strides[axis] + kernel[axis] - size[axis], 0)
            low = total // 2 if auto == "SAME_UPPER" else total - total // 2
            pads[axis], pads[axis + 2] = low, total - low
    else:
        pads = [int(p) for p in b.attr(node, "pads", [0, 0, 0, 0])]
    pads = [p + q for p, q in zip(pads, b.src[x].pads, strict=True)]
    for axis in (0, 1):  # ceil_mode: the last window starts inside, reads past the end
        short = (out[axis] - 1) * strides[axis] + kernel[axis] - size[axis] - pads[axis] \
            - pads[axis + 2]
        pads[axis + 2] += max(short, 0)
    fields: dict[str, Any] = {"out_rows": out[0], "out_cols": out[1], "kernel": kernel[0],
                              "stride": strides[0]}
    if kernel[1] != kernel[0]:
        fields["kernel_cols"] = kernel[1]
    if strides[1] != strides[0]:
        fields["stride_cols"] = strides[1]
    if len(set(pads)) == 1:
        fields["padding"] = pads[0]
    else:
        fields["pads"] = tuple(pads)
    return fields


def _pair(b: Builder, node: Any, name: str, default: int) -> tuple[int, int]:
    value = b.attr(node, name, [default, default])
    values = list(value) if isinstance(value, list | tuple) else [value, value]
    if len(values) != 2:
        raise b.fail(node, f"{name} {values}: a 2-D window takes two")
    return int(values[0]), int(values[1])


def _conv(b: Builder, index: int, node: Any, data: list[str]) -> None:
    x = node.input[0]
    if x not in b.src:
        raise b.fail(node, "input 0 must be the model's data")
    dilations = _pair(b, node, "dilations", 1)
    if dilations != (1, 1):
        raise b.fail(node, f"dilations {list(dilations)}: dilated convolutions are not "
                     "supported")
    weight = b.const(node, 1, 4)
    b.optional_const(node, 2)
    kernel = (int(weight.shape[2]), int(weight.shape[3]))
    declared = b.attr(node, "kernel_shape", list(kernel))
    if list(declared) != list(kernel):
        raise b.fail(node, f"kernel_shape {list(declared)} disagrees with its weight's "
                     f"{list(kernel)}")
    b.shape_of_rank(node, x, 4, "(N, C, H, W)")
    _relayout(b, x)
    out = b.shape_of_rank(node, node.output[0], 4, "(N, C, H, W)")[1:]
    groups = int(b.attr(node, "group", 1))
    fields = _window(b, node, x, out[1:], kernel, _pair(b, node, "strides", 1))
    kind, fields = conv_layer({**fields, "out_ch": out[0],
                               "in_ch": int(weight.shape[1]) * groups, "groups": groups,
                               "relu": False}, b.shape(x)[2:])
    b.add_layer(index, node, kind, fields, [x])


def _relayout(b: Builder, x: str) -> None:
    """A feature map an element-wise layer computed in another layout (ConvNeXt's
    channels-first LayerNorm runs on channels-last values, permuted back for the next
    conv): the layer's shape is recorded as the conv or pool reads it, (C, H, W); the
    elements and the work are the same."""
    src = b.src[x]
    if len(src.layers) != 1 or not src.nodes:
        return
    draft = b.drafts[src.layers[0]]
    shape = batchless(b.shape(x))
    if draft.kind is Elementwise and draft.fields["shape"] != shape and \
            product(draft.fields["shape"]) == product(shape):
        draft.fields["shape"] = shape


def _pool(b: Builder, index: int, node: Any, data: list[str]) -> None:
    x = node.input[0]
    if node.op_type.startswith("Global") and len(b.shape(x)) == 3:  # (N, C, L): tokens
        elementwise(b, index, node, "ReduceMean" if "Average" in node.op_type  # averaged,
                     else "ReduceMax", data)  # as AdaptiveAvgPool1d(1) exports (Swin's head)
        return
    _relayout(b, x)
    out = b.shape_of_rank(node, node.output[0], 4, "(N, C, H, W)")[1:]
    size = b.shape_of_rank(node, x, 4, "(N, C, H, W)")[2:]
    if node.op_type.startswith("Global"):
        kernel, strides = (size[0], size[1]), (size[0], size[1])
    else:
        if _pair(b, node, "dilations", 1) != (1, 1):
            raise b.fail(node, "dilated pooling is not supported")
        kernel, strides = _pair(b, node, "kernel_shape", 1), _pair(b, node, "strides", 1)
    fields = _window(b, node, x, out[1:], kernel, strides)
    b.add_layer(index, node, Pool, {**fields, "kind": POOLS[node.op_type],
                                    "channels": out[0]}, [x])


def _spatial_reduction(b: Builder, node: Any) -> bool:
    """A mean or max over the rows and columns of a feature map (how the dynamo exporter
    writes adaptive_avg_pool2d(x, 1), and x.mean((2, 3))): a global pool."""
    shape = b.shape(node.input[0])
    axes = b.optional_const(node, 1) if len(node.input) > 1 else b.attr(node, "axes", None)
    return len(shape) == 4 and axes is not None and sorted(int(a) % 4 for a in axes) == [2, 3]


def _global_pool(b: Builder, index: int, node: Any) -> None:
    x = node.input[0]
    channels, rows, cols = b.shape(x)[1:]
    b.add_layer(index, node, Pool, {"kind": "avg" if node.op_type == "ReduceMean" else "max",
                                    "channels": channels, "out_rows": 1, "out_cols": 1,
                                    "kernel": rows, "stride": rows,
                                    **({"kernel_cols": cols, "stride_cols": cols}
                                       if cols != rows else {})},
                [x])


def _matmul(b: Builder, index: int, node: Any, data: list[str]) -> None:
    """A product with a constant operand is an FC layer applied to each row (token) of the
    computed one; two computed operands make a MatMul layer."""
    a, w = node.input[0], node.input[1]
    out = b.shape(node.output[0])
    if node.op_type == "Gemm":
        if b.attr(node, "transA", 0):
            raise b.fail(node, "transA 1: a Gemm reading its data transposed is not "
                         "supported")
        b.optional_const(node, 2)
    if a in b.src and w not in b.src:
        weight = b.const(node, 1, 2)
        transposed = node.op_type == "Gemm" and b.attr(node, "transB", 0)
        out_f, in_f = weight.shape if transposed else weight.shape[::-1]
        rows = product(b.shape(a)) // int(in_f)
        b.add_layer(index, node, FC, {"out_features": int(out_f), "in_features": int(in_f),
                                      "rows": rows}, [a])
    elif w in b.src and a not in b.src and node.op_type == "MatMul":
        weight = b.const(node, 0, 2)  # W @ x: each column of x is a row
        b.add_layer(index, node, FC, {"out_features": int(weight.shape[0]),
                                      "in_features": int(weight.shape[1]),
                                      "rows": product(b.shape(w)) // int(weight.shape[1])},
                    [w])
    else:
        left, right = b.shape(a), b.shape(w)
        transposed = node.op_type == "Gemm" and b.attr(node, "transB", 0)
        rows = left[-2] if len(left) > 1 else 1
        inner = left[-1]
        cols = (right[-2] if transposed else right[-1]) if len(right) > 1 else 1
        batch = max(product(out) // (rows * cols), 1)
        b.add_layer(index, node, MatMul, {"batch": batch, "rows": rows, "inner": inner,
                                          "cols": cols},
                    [joined(b, node, a), joined(b, node, w)])


def _batchnorm(b: Builder, index: int, node: Any, data: list[str]) -> None:
    for i in range(1, 5):
        b.const(node, i)
    draft = b.single(data[0])
    if draft is not None and issubclass(draft.kind, BN_INTO) and \
            all(f in ("Add", "BatchNormalization") for f in draft.fused):
        b.fuse(draft, index, node, "BatchNormalization")
        return
    channels = int(b.constants[node.input[1]].size)
    elementwise(b, index, node, "BatchNormalization", [data[0]],
                 params=2 * channels)


def _activation(b: Builder, index: int, node: Any, data: list[str]) -> None:
    fuse_or_own(b, index, node, node.op_type, [data[0]], params=constant_elements(b, node))


def _pattern(b: Builder, index: int, node: Any, x: str) -> bool:
    """Place the several-node operator (onnx_patterns) node `index` starts, if any."""
    found = find_pattern(b, index, x)
    if found is None:
        return False
    name, nodes = found
    b.skip.update(nodes)
    params = sum(constant_elements(b, b.nodes[i]) for i in nodes)
    if name == "LayerNormalization":
        elementwise(b, index, node, name, [x], extra=nodes[1:],
                     params=params)
    else:
        fuse_or_own(b, index, node, name, [x], nodes[1:], params,
                     readers=sum(x in b.nodes[i].input for i in nodes))
    return True


def _nan_guard(b: Builder, index: int, node: Any, data: list[str]) -> bool:
    """Where(IsNaN(x), c, x) with a constant c (the dynamo exporter's guard after an
    attention softmax): x with its NaNs replaced, fused as one operator "IsNaN" (a test and
    a select per element) into the layer computing x."""
    x, readers = data[0] if data else "", b.reader_nodes.get(node.output[0], [])
    if len(readers) != 1 or b.nodes[readers[0]].op_type != "Where":
        return False
    where = b.nodes[readers[0]]
    if list(where.input) != [node.output[0], where.input[1], x] or \
            where.input[1] not in b.constants:
        return False
    b.skip.add(readers[0])
    fuse_or_own(b, index, node, "IsNaN", [x], (readers[0],), readers=2)
    return True


def _arithmetic(b: Builder, index: int, node: Any, data: list[str]) -> None:
    op = node.op_type
    params = constant_elements(b, node)
    if len(data) == 1:  # with a constant: a bias, a scale, an exponent
        fuse_or_own(b, index, node, op, data, params=params)
        return
    out = batchless(b.shape(node.output[0]))
    operands = [joined(b, node, d) for d in data]
    if op in ("Add", "Sum") and not params and \
            all(batchless(b.shape(d)) == out for d in data):
        b.add_layer(index, node, Add, {"shape": out, "relu": False}, operands)
    else:  # a product of computed values (squeeze-and-excitation), broadcasting
        elementwise(b, index, node, op, operands, params=params)


def _selection(b: Builder, index: int, node: Any, data: list[str]) -> None:
    """Part of a computed value (a token, the last LSTM step, one of q, k, v): a layer
    that copies it out, so the layers reading it receive only that part."""
    if node.input[0] in b.constants and data == [node.input[1]]:
        _lookup(b, index, node, data[0])
        return
    if node.input[0] not in b.src or len(data) != 1:
        raise b.fail(node, f"{node.op_type} indices computed from the model's data are not "
                     "supported")
    source = data[0]
    if moved(b, index, node, source):  # a roll, or a permutation passing through
        return
    outputs = [o for o in node.output if o and b.readers.get(o)]
    for output in outputs:
        elementwise(b, index, node, node.op_type, [source],
                     output=output if len(node.output) > 1 else None)


def _lookup(b: Builder, index: int, node: Any, ids: str) -> None:
    """A constant indexed by the model's data: an embedding lookup (Gather, one row of a
    table per token id; the table its stored elements), or GatherElements (RoBERTa's
    token types picked by the positions it computes from the ids)."""
    table = b.const(node, 0)
    if node.op_type == "Gather" and (b.attr(node, "axis", 0) != 0 or table.ndim != 2):
        raise b.fail(node, f"Gather on axis {b.attr(node, 'axis', 0)} of a {table.ndim}-D "
                     "constant by computed indices; only rows of a 2-D table (an embedding)")
    if node.op_type not in ("Gather", "GatherElements"):
        raise b.fail(node, f"{node.op_type} of a constant by computed indices is not "
                     "supported")
    elementwise(b, index, node, node.op_type, [ids], params=constant_elements(b, node))

