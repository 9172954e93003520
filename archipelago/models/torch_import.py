"""Bring your own multi-modal model: trace a `torch.nn.Module` with torch.fx (or take the
ATen graph of a program saved with torch.export, see torch_export.py), propagate shapes
with an example input, and write it as a layer DAG. torch is imported here only.

Conv2d, Linear, LSTM (one layer, batch_first), Max/AvgPool2d, AdaptiveAvgPool2d to 1x1,
addition and ReLU are understood, as modules or as the ATen operators torch.export turns
them into; ReLU folds into the layer before it, `torch.cat` on the channel axis becomes a
layer with several dependencies, and view/flatten/reshape/dropout pass values through (a
DAG layer flattens what it reads when it needs a vector). Anything else is named in a
one-line error. Batch size 1 is assumed.
"""

import operator
from typing import Any

from archipelago.errors import ConfigError
from archipelago.models.dag import FC, LSTM, Add, Conv, ModelDAG, Pool, validate_dag

_PASS_METHODS = {"view", "reshape", "flatten", "contiguous"}


class _Tracer:
    def __init__(self, source: str) -> None:
        self.source = source
        self.layers: dict[str, Any] = {}
        self.inputs: dict[str, tuple[int, ...]] = {}
        self.params: dict[str, str] = {}
        # fx node -> layer names, or ("input", shape), ("param", path), ("const",)
        self.value: dict[Any, list] = {}

    def fail(self, node, why: str) -> None:
        raise ConfigError(self.source, node.name, why)

    def deps(self, node, arg) -> tuple[str, ...]:
        sources = self.value[arg]
        if any(not isinstance(s, str) and s[0] in {"param", "const"} for s in sources):
            self.fail(node, "parameters used outside a Conv, Linear or LSTM are not supported")
        names = tuple(s for s in sources if isinstance(s, str))
        if names and len(names) != len(sources):
            self.fail(node, "mixes a model input with layer outputs")
        return names

    def add(self, node, layer) -> None:
        first = self.value[node.args[0]]
        if not layer.deps and not isinstance(first[0], str):
            self.inputs[layer.name] = first[0][1]
        self.layers[layer.name] = layer
        self.value[node] = [layer.name]

    def fold_relu(self, node, arg) -> None:
        sources = self.value[arg]
        layer = self.layers.get(sources[0]) if len(sources) == 1 else None
        if layer is None or not hasattr(layer, "relu") or len(arg.users) != 1:
            self.fail(node, "ReLU must follow a single Conv, Linear or add it alone consumes")
        self.layers[layer.name] = layer.model_copy(update={"relu": True})
        self.value[node] = sources


def _shape(node) -> tuple[int, ...]:
    meta = node.meta["tensor_meta"]
    if not hasattr(meta, "shape"):  # a module returning a tuple (LSTM): its first output
        meta = meta[0]
    return tuple(meta.shape)[1:]


def _pair(value, node, tracer: _Tracer, what: str) -> int:
    if isinstance(value, tuple | list):
        if len(set(value)) != 1:
            tracer.fail(node, f"non-square {what} {value}")
        return int(value[0])
    return int(value)


def _module_layer(tracer: _Tracer, node, module, torch) -> None:
    nn = torch.nn
    src = node.args[0]
    name = node.target.replace(".", "_")
    if isinstance(module, nn.ReLU):
        tracer.fold_relu(node, src)
    elif isinstance(module, nn.Dropout | nn.Identity | nn.Flatten):
        tracer.value[node] = tracer.value[src]
    elif isinstance(module, nn.Conv2d):
        if module.groups != 1 or _pair(module.dilation, node, tracer, "dilation") != 1:
            tracer.fail(node, "grouped or dilated convolutions are not supported")
        out = _shape(node)
        tracer.add(node, Conv(name=name, deps=tracer.deps(node, src), out_ch=out[0],
                              in_ch=module.in_channels, out_rows=out[1], out_cols=out[2],
                              kernel=_pair(module.kernel_size, node, tracer, "kernel"),
                              stride=_pair(module.stride, node, tracer, "stride"),
                              padding=_pair(module.padding, node, tracer, "padding"),
                              relu=False))
        tracer.params[name] = node.target
    elif isinstance(module, nn.Linear):
        tracer.add(node, FC(name=name, deps=tracer.deps(node, src),
                            out_features=module.out_features,
                            in_features=module.in_features))
        tracer.params[name] = node.target
    elif isinstance(module, nn.LSTM):
        if module.num_layers != 1 or not module.batch_first or module.bidirectional:
            tracer.fail(node, "only single-layer, unidirectional, batch_first LSTMs")
        cells = _shape(src)[0]
        tracer.add(node, LSTM(name=name, deps=tracer.deps(node, src), embed=module.input_size,
                              hidden=module.hidden_size, cells=cells))
        tracer.params[name] = node.target
    elif isinstance(module, nn.MaxPool2d | nn.AvgPool2d | nn.AdaptiveAvgPool2d):
        out = _shape(node)
        if isinstance(module, nn.AdaptiveAvgPool2d):
            rows = _shape(src)[1]
            if out[1:] != (1, 1) or _shape(src)[2] != rows:
                tracer.fail(node, "adaptive pooling only to 1x1 of a square map")
            kernel, stride, padding, kind = rows, rows, 0, "avg"
        else:
            kernel = _pair(module.kernel_size, node, tracer, "kernel")
            stride = _pair(module.stride, node, tracer, "stride")
            padding = _pair(module.padding, node, tracer, "padding")
            kind = "max" if isinstance(module, nn.MaxPool2d) else "avg"
        tracer.add(node, Pool(name=name, deps=tracer.deps(node, src), kind=kind,
                              channels=out[0], out_rows=out[1], out_cols=out[2],
                              kernel=kernel, stride=stride, padding=padding))
    else:
        tracer.fail(node, f"module type {type(module).__name__} is not supported")


def _add(tracer: _Tracer, node, torch) -> None:
    deps = tuple(d for a in node.args for d in tracer.deps(node, a))
    tracer.add(node, Add(name=node.name, deps=deps, shape=_shape(node), relu=False))


def _relu(tracer: _Tracer, node, torch) -> None:
    tracer.fold_relu(node, node.args[0])


def _cat(tracer: _Tracer, node, torch) -> None:
    dim = node.kwargs.get("dim", node.args[1] if len(node.args) > 1 else 0)
    if dim != 1:
        tracer.fail(node, f"concatenation on axis {dim}; only channels (axis 1)")
    tracer.value[node] = [s for a in node.args[0] for s in tracer.value[a]]


def _pass(tracer: _Tracer, node, torch) -> None:
    tracer.value[node] = tracer.value[node.args[0]]


def _function_layer(tracer: _Tracer, node, torch) -> None:
    """A torch function (torch.fx) or ATen operator (torch.export) call, by its handler."""
    fn = node.target
    if isinstance(fn, torch._ops.OpOverload):
        handler = _ATEN.get(_aten_name(node))
    elif fn is operator.getitem:  # the output of a module returning a tuple (LSTM)
        handler = _pass if node.args[1] == 0 else None
    else:
        handler = {operator.add: _add, torch.add: _add, torch.relu: _relu,
                   torch.nn.functional.relu: _relu, torch.cat: _cat, torch.flatten: _pass,
                   torch.reshape: _pass}.get(fn)
    if handler is None:
        tracer.fail(node, f"function {getattr(fn, '__name__', fn)} is not supported")
    handler(tracer, node, torch)


def _aten_name(node) -> str:
    """The operator an ATen call names, without its overload (`aten::add.Tensor`:
    `aten::add`)."""
    return node.target.name().partition(".")[0]


def _arg(node, index: int, name: str, default: Any = None) -> Any:
    """Argument `name` of an ATen call, positional or keyword, else its schema default."""
    return node.args[index] if len(node.args) > index else node.kwargs.get(name, default)


def _param_shape(tracer: _Tracer, node, arg) -> tuple[int, ...]:
    source = tracer.value.get(arg, [None])[0]
    if not (isinstance(source, tuple) and source[0] == "param"):
        tracer.fail(node, "weights must be the module's parameters")
    return tuple(arg.meta["tensor_meta"].shape)


def _layer_name(tracer: _Tracer, node) -> str:
    """The module an ATen node came from (torch.export keeps the module stack), as the
    torch.fx path names it; the node's own name at the top level or when taken."""
    stack = node.meta.get("nn_module_stack") or {}
    path = next(reversed(stack.values()))[0] if stack else ""
    name = path.replace(".", "_")
    return name if name and name not in tracer.layers else node.name


def _weights_path(arg) -> str:
    """The module holding a lifted parameter (`img1.weight`: `img1`)."""
    return arg.target.rpartition(".")[0]


def _aten_conv(tracer: _Tracer, node, torch) -> None:
    weight = node.args[1]
    shape = _param_shape(tracer, node, weight)
    padding = _arg(node, 4, "padding", 0)
    if _arg(node, 6, "groups", 1) != 1 or isinstance(padding, str) or \
            _pair(_arg(node, 5, "dilation", 1), node, tracer, "dilation") != 1:
        tracer.fail(node, "grouped, dilated or 'same'-padded convolutions are not supported")
    out, name = _shape(node), _layer_name(tracer, node)
    tracer.add(node, Conv(name=name, deps=tracer.deps(node, node.args[0]), out_ch=out[0],
                          in_ch=shape[1], out_rows=out[1], out_cols=out[2],
                          kernel=_pair(shape[2:], node, tracer, "kernel"),
                          stride=_pair(_arg(node, 3, "stride", 1), node, tracer, "stride"),
                          padding=_pair(padding, node, tracer, "padding"), relu=False))
    tracer.params[name] = _weights_path(weight)


def _aten_linear(tracer: _Tracer, node, torch) -> None:
    weight = node.args[1]
    shape, name = _param_shape(tracer, node, weight), _layer_name(tracer, node)
    tracer.add(node, FC(name=name, deps=tracer.deps(node, node.args[0]),
                        out_features=shape[0], in_features=shape[1]))
    tracer.params[name] = _weights_path(weight)


def _aten_lstm(tracer: _Tracer, node, torch) -> None:
    """aten.lstm(input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
    batch_first), starting from the zero state."""
    src, state, weights = node.args[0], node.args[1], node.args[2]
    if node.args[4] != 1 or node.args[7] or not node.args[8] or not node.args[3]:
        tracer.fail(node, "only single-layer, unidirectional, batch_first LSTMs with biases")
    if any(tracer.value[h] != [("const",)] for h in state):
        tracer.fail(node, "an LSTM's initial state must be zeros")
    embed = _param_shape(tracer, node, weights[0])[1]
    hidden = _param_shape(tracer, node, weights[1])[1]
    name = _layer_name(tracer, node)
    tracer.add(node, LSTM(name=name, deps=tracer.deps(node, src), embed=embed, hidden=hidden,
                          cells=_shape(src)[0]))
    tracer.params[name] = _weights_path(weights[0])


def _aten_pool(tracer: _Tracer, node, torch) -> None:
    """max_pool2d(input, kernel, stride=[] (the kernel), padding, ...), avg_pool2d alike,
    adaptive_avg_pool2d(input, output_size) to 1x1 of a square map."""
    src, out = node.args[0], _shape(node)
    if _aten_name(node) == "aten::adaptive_avg_pool2d":
        rows = _shape(src)[1]
        if out[1:] != (1, 1) or _shape(src)[2] != rows:
            tracer.fail(node, "adaptive pooling only to 1x1 of a square map")
        kernel, stride, padding, kind = rows, rows, 0, "avg"
    else:
        kernel = _pair(node.args[1], node, tracer, "kernel")
        stride = _pair(_arg(node, 2, "stride", []) or kernel, node, tracer, "stride")
        padding = _pair(_arg(node, 3, "padding", 0), node, tracer, "padding")
        kind = "max" if _aten_name(node) == "aten::max_pool2d" else "avg"
    tracer.add(node, Pool(name=_layer_name(tracer, node), deps=tracer.deps(node, src),
                          kind=kind, channels=out[0], out_rows=out[1], out_cols=out[2],
                          kernel=kernel, stride=stride, padding=padding))


def _aten_zeros(tracer: _Tracer, node, torch) -> None:
    tracer.value[node] = [("const",)]  # an LSTM's initial state; refused anywhere else


# torch.export's ATen operators, by name: the modules and functions above as it records them
_ATEN: dict[str, Any] = {
    "aten::conv2d": _aten_conv, "aten::linear": _aten_linear, "aten::lstm": _aten_lstm,
    "aten::max_pool2d": _aten_pool, "aten::avg_pool2d": _aten_pool,
    "aten::adaptive_avg_pool2d": _aten_pool, "aten::zeros": _aten_zeros,
    "aten::add": _add, "aten::relu": _relu, "aten::cat": _cat, "aten::flatten": _pass,
    "aten::reshape": _pass, "aten::view": _pass, "aten::dropout": _pass,
}


def dag_from_module(module, example_inputs: tuple, name: str = "imported",
                    source: str | None = None) -> tuple[ModelDAG, dict[str, str]]:
    """The DAG of `module` and, per Conv/FC/LSTM layer, the module path of its weights. A
    GraphModule (what torch.export's `program.module()` gives) is read as it is; any other
    module is traced with torch.fx. Errors name `source` (the module by default)."""
    import torch
    import torch.fx
    from torch.fx.passes.shape_prop import ShapeProp

    graph = module if isinstance(module, torch.fx.GraphModule) else \
        torch.fx.symbolic_trace(module)
    ShapeProp(graph).propagate(*example_inputs)
    source = source or f"torch module {name}"
    tracer = _Tracer(source)
    modules = dict(graph.named_modules())
    for node in graph.graph.nodes:
        if not node.users and node.op != "output":
            continue  # a value nobody reads, e.g. the (h, c) state an LSTM also returns
        if node.op == "placeholder":
            tracer.value[node] = [("input", _shape(node))]
        elif node.op == "call_module":
            _module_layer(tracer, node, modules[node.target], torch)
        elif node.op == "call_function":
            _function_layer(tracer, node, torch)
        elif node.op == "call_method":
            if node.target == "relu":
                tracer.fold_relu(node, node.args[0])
            elif node.target in _PASS_METHODS:
                tracer.value[node] = tracer.value[node.args[0]]
            else:
                tracer.fail(node, f"method .{node.target}() is not supported")
        elif node.op == "get_attr":  # a parameter torch.export lifted out of its module
            tracer.value[node] = [("param", node.target)]
    dag = ModelDAG(name=name, layers=tuple(tracer.layers.values()), inputs=tracer.inputs)
    return validate_dag(dag, source), tracer.params
