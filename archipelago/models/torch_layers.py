"""What each torch operator (a `Call`, torch_calls.py) becomes in the layer DAG.

The fusion rule is the ONNX importer's (models/onnx_import.py's docstring): a point-wise
operator (an activation: ReLU, ReLU6/Hardtanh, Sigmoid, SiLU, HardSigmoid, HardSwish,
GELU, Tanh, LRN; or arithmetic with a constant) that alone consumes the output of
a Conv, Linear, MatMul, Add or element-wise layer fuses into that layer, and a BatchNorm fuses
into a Conv it alone consumes while no non-linearity has been fused into the Conv yet
(its affine map folds into the Conv's weights); both are recorded in the layer's `fused`.
Otherwise the operator is its own `Elementwise` layer. Value-preserving reshapes (view,
flatten, permute, transpose, dropout, ...) pass through: the next layer reads the values
flattened, in the order the DAG stores them. Batch size 1 is assumed.
"""

from dataclasses import dataclass
from typing import Any

from archipelago.errors import ConfigError
from archipelago.models.dag import FC, Add, Conv, Elementwise, MatMul
from archipelago.models.elementwise_ops import OPS_PER_ELEMENT, TORCH_TO_ONNX
from archipelago.models.torch_calls import PASS, Call


def onnx_op(op: str) -> str:
    """The ONNX name of a torch import operator, which Elementwise layers carry."""
    return TORCH_TO_ONNX[op]


def op_work(op: str) -> int:
    """Operations per output element of a torch import operator (elementwise_ops.py)."""
    return OPS_PER_ELEMENT[onnx_op(op)]


@dataclass(frozen=True)
class Data:
    """Values computed by DAG layers; several layers: their concatenation."""

    layers: tuple[str, ...]


@dataclass(frozen=True)
class Input:
    shape: tuple[int, ...]


@dataclass(frozen=True)
class Other:
    """A value that is no data: a parameter or buffer (`numel` elements), a constant, a
    size, or a module's tuple output (`first` its data element)."""

    kind: str
    numel: int = 0
    first: Data | None = None
    what: str = ""


def full_shape(node) -> tuple[int, ...]:
    meta = node.meta.get("tensor_meta")
    if meta is None:
        return ()
    if not hasattr(meta, "shape"):  # a module returning a tuple: its first output
        meta = meta[0]
    return tuple(meta.shape)


def data_shape(node) -> tuple[int, ...]:
    """A value's shape without its batch axis (a leading 1; torch's unbatched inputs, such
    as an LSTM's (T, E), have none)."""
    shape = full_shape(node)
    return shape[1:] if len(shape) > 1 and shape[0] == 1 else shape


def numel(shape: tuple[int, ...]) -> int:
    total = 1
    for dim in shape:
        total *= dim
    return total


def pair(value: Any) -> tuple[int, int]:
    if isinstance(value, list | tuple):
        return (int(value[0]), int(value[-1]))
    return (int(value), int(value))


class Builder:
    """The DAG so far: layers, the value each graph node holds, and where each layer's
    output currently ends (the node of the last operator fused into it)."""

    def __init__(self, source: str, calls: dict[Any, Call], live: set) -> None:
        self.source, self.calls, self.live = source, calls, live
        self.layers: dict[str, Any] = {}
        self.inputs: dict[str, tuple[int, ...]] = {}
        self.params: dict[str, str] = {}
        self.value: dict[Any, Data | Input | Other] = {}
        self.tail: dict[str, Any] = {}
        self.nonlinear: set[str] = set()

    def fail(self, call: Call, why: str, what: str = "") -> None:
        raise ConfigError(self.source, call.out.name, f"{what or call.what}: {why}")

    def unique(self, base: str) -> str:
        """`base`, or `base_1`, `base_2`, ... for a module called at several places."""
        name, count = base, 0
        while name in self.layers:
            count += 1
            name = f"{base}_{count}"
        return name

    def data(self, call: Call) -> list:
        """The inputs of `call` that carry data (model inputs or layer outputs)."""
        return [n for n in call.inputs if isinstance(self.value.get(n), Data | Input)]

    def operand(self, call: Call) -> Any:
        data = self.data(call)
        if len(data) != 1:
            self.fail(call, f"reads {len(data)} data values, expected one")
        return data[0]

    def deps(self, node) -> tuple[str, ...]:
        value = self.value[node]
        return value.layers if isinstance(value, Data) else ()

    def single(self, call: Call, node) -> str:
        """The one layer whose output `node` holds, for an operator that cannot read a
        concatenation or a model input next to layer outputs."""
        value = self.value[node]
        if not isinstance(value, Data) or len(value.layers) != 1:
            self.fail(call, "an operand is a model input or a concatenation, which this "
                      "operator cannot read next to another layer's output")
        return value.layers[0]

    def relayout(self, src) -> None:
        """A feature map an element-wise layer computed in another layout (ConvNeXt's
        channels-first LayerNorm on channels-last values, permuted back): the layer's
        shape recorded as the conv or pool reading it sees it (onnx_layers' rule)."""
        value = self.value[src]
        if not isinstance(value, Data) or len(value.layers) != 1:
            return
        layer, shape = self.layers[value.layers[0]], data_shape(src)
        if isinstance(layer, Elementwise) and layer.shape != shape and \
                numel(layer.shape) == numel(shape):
            self.layers[layer.name] = layer.model_copy(update={"shape": shape})

    def add(self, call: Call, layer, src=None) -> str:
        """Register `layer`, computed by `call` from `src` (its model input if no deps)."""
        if not layer.deps and src is not None:
            self.inputs[layer.name] = self.value[src].shape
        self.layers[layer.name] = layer
        self.value[call.out] = Data((layer.name,))
        self.tail[layer.name] = call.out
        return layer.name

    def sole_consumer(self, layer: str) -> Any:
        """The one operator reading `layer`'s output through any reshapes, else None."""
        seen: list = []
        frontier = [self.tail[layer]]
        while frontier:
            node = frontier.pop()
            for user in node.users:
                if user not in self.live:
                    continue
                call = self.calls.get(user)
                if call is not None and call.op in {PASS, "getitem"} and call.out is user:
                    frontier.append(user)
                else:  # an operator inside a decomposed module call stands for the call
                    seen.append(call.attrs["call"] if call and call.op == "inner" else user)
        return seen[0] if len(set(seen)) == 1 else None

    def fusable(self, call: Call, src, kinds: tuple) -> str | None:
        value = self.value[src]
        if not isinstance(value, Data) or len(value.layers) != 1:
            return None
        name = value.layers[0]
        if not isinstance(self.layers[name], kinds) or self.sole_consumer(name) is not call.out:
            return None
        return name

    def fuse(self, call: Call, name: str, ops: int, nonlinear: bool, params: int = 0) -> None:
        """Merge `call` into layer `name`; an element-wise layer also takes its work per
        element and the `params` stored elements it reads (a position embedding added)."""
        layer = self.layers[name]
        update: dict[str, Any] = {"fused": (*layer.fused, call.base)}
        if isinstance(layer, Elementwise):
            update["ops_per_element"] = layer.ops_per_element + ops
            update["params"] = layer.params + params
        elif call.op == "relu" and name not in self.nonlinear:
            update["relu"] = True
        self.layers[name] = layer.model_copy(update=update)
        if nonlinear:
            self.nonlinear.add(name)
        self.value[call.out] = Data((name,))
        self.tail[name] = call.out


def pointwise(b: Builder, call: Call, ops: int | None = None) -> None:
    """An activation or arithmetic with a constant: fused, or its own element-wise layer."""
    src = b.operand(call)
    ops = ops or op_work(call.op)
    target = b.fusable(call, src, (Conv, FC, MatMul, Add, Elementwise))
    params = sum(b.value[n].numel for n in call.inputs
                 if isinstance(b.value.get(n), Other) and b.value[n].kind == "param")
    if target is not None and numel(full_shape(call.out)) <= b.layers[target].out_elements:
        b.fuse(call, target, ops, nonlinear=True, params=params)  # (a broadcast: its own)
        return
    b.add(call, Elementwise(name=b.unique(call.base), deps=b.deps(src), op=onnx_op(call.op),
                            shape=data_shape(call.out), ops_per_element=ops, params=params),
          src)


def batch_norm(b: Builder, call: Call) -> None:
    src = b.operand(call)
    target = b.fusable(call, src, (Conv,))
    if target is not None and target not in b.nonlinear:
        b.fuse(call, target, 0, nonlinear=False)
        return
    b.add(call, Elementwise(name=b.unique(call.base), deps=b.deps(src), op=onnx_op("batch_norm"),
                            shape=data_shape(call.out), ops_per_element=op_work("batch_norm"),
                            params=call.attrs["params"]), src)


def normalization(b: Builder, call: Call) -> None:
    """LayerNorm and Softmax (a reduction over a row, never fused: onnx_layers' rule): its
    own element-wise layer, with LayerNorm's scale and shift vectors."""
    src = b.operand(call)
    b.add(call, Elementwise(name=b.unique(call.base), deps=b.deps(src), op=onnx_op(call.op),
                            shape=data_shape(call.out), ops_per_element=op_work(call.op),
                            params=call.attrs.get("params", 0)), src)


def binary(b: Builder, call: Call) -> None:
    """x + y of two layer outputs is an Add (a residual join); other products of two
    computed values (x * gate, differences, quotients) are element-wise layers; with one
    computed operand the operator is point-wise (a bias, a scale)."""
    data = b.data(call)
    if not data:
        b.value[call.out] = Other("const")
    elif len(data) == 1:
        pointwise(b, call)
    else:
        deps = tuple(b.single(call, n) for n in data)
        shape = data_shape(call.out)
        same = {b.layers[d].out_elements for d in deps} == {numel(shape)}
        layer = (Add(name=b.unique(call.base), deps=deps, shape=shape, relu=False)
                 if call.op == "add" and same else
                 Elementwise(name=b.unique(call.base), deps=deps, op=onnx_op(call.op),
                             shape=shape, ops_per_element=op_work(call.op)))
        b.add(call, layer)


def matmul(b: Builder, call: Call) -> None:
    """A product of two computed values (attention's Q K^T, weights times V)."""
    data = b.data(call)
    if len(data) != 2:
        b.fail(call, "a product with a parameter; write it as an nn.Linear")
    left, out = full_shape(data[0]), full_shape(call.out)
    if len(left) < 2 or len(out) < 2:
        b.fail(call, "a product of vectors; only matrix products are supported")
    deps = tuple(b.single(call, n) for n in data)
    b.add(call, MatMul(name=b.unique(call.base), deps=deps, batch=numel(out[:-2]),
                       rows=out[-2], inner=left[-1], cols=out[-1]))


def window(kernel: tuple[int, int], stride: tuple[int, int],
           pads: tuple[int, int, int, int]) -> dict[str, Any]:
    """A window layer's kernel, stride and padding fields: the square forms when they
    suffice, the column and per-border overrides when they do not."""
    fields: dict[str, Any] = {"kernel": kernel[0], "stride": stride[0]}
    if kernel[1] != kernel[0]:
        fields["kernel_cols"] = kernel[1]
    if stride[1] != stride[0]:
        fields["stride_cols"] = stride[1]
    if len(set(pads)) == 1:
        fields["padding"] = pads[0]
    else:
        fields["pads"] = pads
    return fields


def borders(b: Builder, call: Call, src, kernel, stride, padding) -> tuple[int, ...]:
    """(top, left, bottom, right) padding giving the output torch computed: 'same' and
    ceil_mode add padding at the bottom and right, as torch itself pads."""
    if padding == "valid":
        padding = 0
    top, left = (0, 0) if padding == "same" else pair(padding)
    rows_in, cols_in = full_shape(src)[-2:]
    rows, cols = full_shape(call.out)[-2:]
    bottom = max((rows - 1) * stride[0] + kernel[0] - rows_in - top, 0)
    right = max((cols - 1) * stride[1] + kernel[1] - cols_in - left, 0)
    if padding == "same":
        top, left, bottom, right = bottom // 2, right // 2, bottom - bottom // 2, \
            right - right // 2
    return (top, left, max(bottom, top), max(right, left))
