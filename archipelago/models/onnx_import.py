"""Bring your own multi-modal model as an ONNX file: infer shapes with ONNX's own shape
inference and write the graph as a layer DAG (the same DAG `torch_import` builds from a
torch module). The onnx package is imported here only.

Data flows from the graph inputs; nodes that only compute shapes or constants (Shape,
Gather on a shape, Expand of zeros for an LSTM's initial state, ...) carry no data and are
skipped. Conv, Gemm and MatMul with a weight initializer (a bias Add after it folds in),
LSTM (one direction), Max/AveragePool, GlobalAveragePool, Add of two data values, Relu
(folded into the layer before it), Concat on channels, and the value-preserving reshapes
(Flatten, Reshape, Squeeze, Unsqueeze, Transpose, Identity, Dropout) are understood;
anything else is named in a one-line error. Batch size 1 is assumed.

The file is validated first, apart from layer formation (`onnx_check`): versions, cycles,
control flow, attribute types, initializers, onnx's checker and strict shape inference.
"""

import stat
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from archipelago.errors import ConfigError, elide, elide_path
from archipelago.families import Family, register_family
from archipelago.models.dag import FC, LSTM, Add, Conv, ModelDAG, Pool, validate_dag
from archipelago.models.onnx_check import load_checked, node_field, refusal
from archipelago.safe_read import probe

_PASS_OPS = {"Flatten", "Reshape", "Squeeze", "Unsqueeze", "Transpose", "Identity",
             "Dropout"}
_SHAPE_OPS = {"Shape", "Size"}  # outputs describe a tensor, they are not its data


class _Graph:
    """Walks one ONNX graph, mapping every data value to the DAG layers that produce it."""

    def __init__(self, model: Any, weights: dict[str, Any], source: str) -> None:
        self.source = source
        graph = model.graph
        self.weights = weights
        self.shapes: dict[str, tuple[int, ...]] = {}
        for info in (*graph.input, *graph.value_info, *graph.output):
            dims = info.type.tensor_type.shape.dim
            self.shapes[info.name] = tuple(d.dim_value for d in dims)
        self.value: dict[str, list] = {}  # data value -> layer names or ("input", shape)
        self.consumers: dict[str, int] = {}
        for node in graph.node:
            for name in node.input:
                self.consumers[name] = self.consumers.get(name, 0) + 1
        self.layers: dict[str, Any] = {}
        self.inputs: dict[str, tuple[int, ...]] = {}
        for info in graph.input:
            if info.name not in self.weights:
                self.value[info.name] = [("input", self.shape(info.name)[1:])]

    def fail(self, node: Any, why: str) -> None:
        raise refusal(self.source, node_field(node), why)

    def shape(self, name: str) -> tuple[int, ...]:
        if not self.shapes.get(name) or not all(self.shapes[name]):
            raise ConfigError(self.source, elide(name, 80), "shape inference left this "
                              "value's shape unknown; export with static input shapes")
        return self.shapes[name]

    def shape_of_rank(self, node: Any, name: str, rank: int, layout: str) -> tuple[int, ...]:
        """The shape of a value this node reads or writes, which must be `layout`."""
        shape = self.shape(name)
        if len(shape) != rank:
            self.fail(node, f"{name} is {len(shape)}-D {list(shape)}; {node.op_type} is "
                      f"imported on {rank}-D {layout} tensors")
        return shape

    def weight_of_rank(self, node: Any, index: int, rank: int) -> Any:
        weight = self.weight(node, index)
        if weight.ndim != rank:
            self.fail(node, f"weight {node.input[index]} is {weight.ndim}-D "
                      f"{list(weight.shape)}; {node.op_type} takes a {rank}-D one")
        return weight

    def data_inputs(self, node: Any) -> list[str]:
        return [n for n in node.input if n in self.value]

    def deps(self, node: Any, name: str) -> tuple[str, ...]:
        sources = self.value[name]
        names = tuple(s for s in sources if isinstance(s, str))
        if names and len(names) != len(sources):
            self.fail(node, "mixes a model input with layer outputs")
        return names

    def add(self, node: Any, layer: Any, src: str) -> None:
        if layer.name in self.layers:
            self.fail(node, f"a second layer named '{layer.name}'; names must be unique")
        first = self.value[src]
        if not layer.deps and not isinstance(first[0], str):
            self.inputs[layer.name] = first[0][1]
        self.layers[layer.name] = layer
        self.value[node.output[0]] = [layer.name]

    def weight(self, node: Any, index: int) -> Any:
        if len(node.input) <= index or node.input[index] not in self.weights:
            self.fail(node, f"input {index} must be a weight initializer")
        return self.weights[node.input[index]]

    def attr(self, node: Any, name: str, default: Any) -> Any:
        from onnx import helper

        for attribute in node.attribute:
            if attribute.name == name:
                return helper.get_attribute_value(attribute)
        return default

    def square(self, node: Any, name: str, default: int) -> int:
        value = self.attr(node, name, [default, default])
        values = list(value) if isinstance(value, list | tuple) else [value]
        if len(set(values)) != 1:
            self.fail(node, f"non-square {name} {values}")
        return int(values[0])

    def joined(self, node: Any, name: str) -> str:
        """`name` as one layer's output: a Concat read by an element-wise node (which
        sums its inputs, it does not join them) becomes its own layer, a 1x1 stride-1
        max pool reading the joined maps (as `DagBuilder.concat` writes one)."""
        sources = self.value[name]
        if len(sources) == 1:
            return name
        out = self.shape_of_rank(node, name, 4, "(N, C, H, W) feature-map")[1:]
        deps = self.deps(node, name)
        if not deps:
            self.fail(node, f"{name} joins model inputs only; add them to a layer's output")
        layer = Pool(name=_name_of(name), deps=deps, channels=out[0],
                     out_rows=out[1], out_cols=out[2], kernel=1, stride=1)
        if layer.name in self.layers:
            self.fail(node, f"a second layer named '{layer.name}'; names must be unique")
        self.layers[layer.name] = layer
        self.value[name] = [layer.name]
        return name

    def fold_relu(self, node: Any) -> None:
        src = node.input[0]
        sources = self.value[src]
        layer = self.layers.get(sources[0]) if len(sources) == 1 else None
        if layer is None or not hasattr(layer, "relu") or self.consumers.get(src, 0) != 1:
            self.fail(node, "Relu must follow a single Conv, Gemm or Add it alone consumes")
        self.layers[layer.name] = layer.model_copy(update={"relu": True})
        self.value[node.output[0]] = sources


def _name(node: Any) -> str:
    """The node's name as a layer name ("/" and "." become "_"); its output's, or its
    operator's, when that leaves nothing."""
    return _name_of(node.name, node.output[0] if node.output else "", node.op_type)


def _name_of(*candidates: str) -> str:
    for candidate in candidates:
        name = candidate.strip("/").replace("/", "_").replace(".", "_")
        if name:
            return name
    return "layer"


def _conv(g: _Graph, node: Any, src: str) -> None:
    if g.attr(node, "group", 1) != 1:
        g.fail(node, f"group {g.attr(node, 'group', 1)}: grouped and depthwise convolutions "
               "are not supported (a Conv layer here is dense: each output channel reads "
               "every input channel)")
    if g.square(node, "dilations", 1) != 1:
        g.fail(node, f"dilations {list(g.attr(node, 'dilations', []))}: dilated convolutions "
               "are not supported")
    weight = g.weight_of_rank(node, 1, 4)
    kernel = list(weight.shape[2:])
    if list(g.attr(node, "kernel_shape", kernel)) != kernel:
        g.fail(node, f"kernel_shape {list(g.attr(node, 'kernel_shape', kernel))} disagrees "
               f"with its weight's {kernel}")
    if kernel[0] != kernel[1]:  # seeds/004 §VI: a conv layer has one kernel size K
        g.fail(node, f"kernel {kernel[0]}x{kernel[1]} is not square; a Conv layer is costed "
               "with one K x K kernel (CHEF's layer model)")
    out = g.shape_of_rank(node, node.output[0], 4, "(N, C, H, W)")[1:]
    g.add(node, Conv(name=_name(node), deps=g.deps(node, src), out_ch=out[0],
                     in_ch=int(weight.shape[1]), out_rows=out[1], out_cols=out[2],
                     kernel=int(weight.shape[2]), stride=g.square(node, "strides", 1),
                     padding=g.square(node, "pads", 0), relu=False), src)


def _fc(g: _Graph, node: Any, src: str) -> None:
    weight = g.weight_of_rank(node, 1, 2)
    transposed = node.op_type == "Gemm" and g.attr(node, "transB", 0)
    out_features, in_features = weight.shape if transposed else weight.shape[::-1]
    g.add(node, FC(name=_name(node), deps=g.deps(node, src), out_features=int(out_features),
                   in_features=int(in_features)), src)


def _lstm(g: _Graph, node: Any, src: str) -> None:
    weight = g.weight_of_rank(node, 1, 3)  # [directions, 4 hidden, embed]
    if weight.shape[0] != 1:
        g.fail(node, "only one-direction LSTMs")
    layout = g.attr(node, "layout", 0)
    shape = g.shape_of_rank(node, src, 3, "(N, T, E)" if layout else "(T, N, E)")
    steps = shape[1 if layout else 0]
    layer = LSTM(name=_name(node), deps=g.deps(node, src), embed=int(weight.shape[2]),
                 hidden=int(weight.shape[1]) // 4, cells=steps)
    g.add(node, layer, src)
    if not layer.deps:  # the batch axis is not the first one: the input is T x E features
        g.inputs[layer.name] = (steps * layer.embed,)


def _pool(g: _Graph, node: Any, src: str) -> None:
    out = g.shape_of_rank(node, node.output[0], 4, "(N, C, H, W)")[1:]
    if node.op_type == "GlobalAveragePool":
        rows = g.shape_of_rank(node, src, 4, "(N, C, H, W)")[2]
        kernel, stride, padding, kind = rows, rows, 0, "avg"
    else:
        kernel = g.square(node, "kernel_shape", 1)
        stride, padding = g.square(node, "strides", 1), g.square(node, "pads", 0)
        kind = "max" if node.op_type == "MaxPool" else "avg"
    g.add(node, Pool(name=_name(node), deps=g.deps(node, src), kind=kind, channels=out[0],
                     out_rows=out[1], out_cols=out[2], kernel=kernel, stride=stride,
                     padding=padding), src)


def _add(g: _Graph, node: Any, data: list[str]) -> None:
    if len(data) == 1:  # a bias added to a MatMul's output folds into it
        g.value[node.output[0]] = g.value[data[0]]
        return
    deps = tuple(d for name in data for d in g.deps(node, g.joined(node, name)))
    g.add(node, Add(name=_name(node), deps=deps, shape=g.shape(node.output[0])[1:],
                    relu=False), data[0])


_LAYERS = {"Conv": _conv, "Gemm": _fc, "MatMul": _fc, "LSTM": _lstm, "MaxPool": _pool,
           "AveragePool": _pool, "GlobalAveragePool": _pool}


def _visit(g: _Graph, node: Any) -> None:
    data = g.data_inputs(node)
    if not data or node.op_type in _SHAPE_OPS:
        return  # shape or constant plumbing
    op = node.op_type
    if op in _LAYERS:
        _LAYERS[op](g, node, data[0])
    elif op == "Add":
        _add(g, node, data)
    elif op == "Relu":
        g.fold_relu(node)
    elif op == "Concat":
        if g.attr(node, "axis", 0) != 1:
            g.fail(node, "concatenation on an axis other than channels (1)")
        g.value[node.output[0]] = [s for name in data for s in g.value[name]]
    elif op in _PASS_OPS:
        g.value[node.output[0]] = g.value[data[0]]
    else:
        g.fail(node, f"operator {op} is not supported")


def dag_from_onnx(path: Path, name: str | None = None) -> ModelDAG:
    """The layer DAG of the ONNX model at `path`."""
    source = elide_path(str(path), 100)
    info = probe(path, "file")
    if info is None or not stat.S_ISREG(info.st_mode):
        raise ConfigError(source, "file", "not a readable ONNX file")
    checked = load_checked(path, source)
    model = checked.model
    graph = _Graph(model, checked.weights, source)
    for node in model.graph.node:
        try:
            _visit(graph, node)
        except ValidationError as err:  # a layer the node describes is out of bounds
            raise ConfigError.from_validation(source, err, prefix=node_field(node)) from None
    try:
        dag = ModelDAG(name=name or path.stem, layers=tuple(graph.layers.values()),
                       inputs=graph.inputs)
    except ValidationError as err:
        raise ConfigError.from_validation(source, err) from None
    return validate_dag(dag, source)


# onnx itself is imported only when a file is loaded (`dag_from_onnx`).
register_family(Family("onnx", "model", matches=lambda text: Path(text).suffix == ".onnx",
                       load=lambda text: dag_from_onnx(Path(text)),
                       choices=lambda: ("<model.onnx>",), order=50))
