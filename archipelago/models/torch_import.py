"""Bring your own multi-modal model: trace a `torch.nn.Module` with torch.fx, propagate
shapes with an example input, and write it as a layer DAG. torch is imported here only.

Conv2d, Linear, LSTM (one layer, batch_first), Max/AvgPool2d, AdaptiveAvgPool2d to 1x1,
addition and ReLU are understood; ReLU folds into the layer before it, `torch.cat` on the
channel axis becomes a layer with several dependencies, and view/flatten/reshape/dropout
pass values through (a DAG layer flattens what it reads when it needs a vector).
Anything else is named in a one-line error. Batch size 1 is assumed.
"""

import operator
from typing import Any

from archipelago.errors import ConfigError
from archipelago.models.dag import FC, LSTM, Add, Conv, ModelDAG, Pool, validate_dag

_PASS_METHODS = {"view", "reshape", "flatten", "contiguous"}


class _Tracer:
    def __init__(self, name: str) -> None:
        self.name = name
        self.layers: dict[str, Any] = {}
        self.inputs: dict[str, tuple[int, ...]] = {}
        self.params: dict[str, str] = {}
        self.value: dict[Any, list] = {}  # fx node -> layer names or ("input", shape)

    def fail(self, node, why: str) -> None:
        raise ConfigError(f"torch module {self.name}", node.name, why)

    def deps(self, node, arg) -> tuple[str, ...]:
        sources = self.value[arg]
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
    if isinstance(value, tuple):
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


def _function_layer(tracer: _Tracer, node, torch) -> None:
    fn = node.target
    if fn in (operator.add, torch.add):
        deps = tuple(d for a in node.args for d in tracer.deps(node, a))
        tracer.add(node, Add(name=node.name, deps=deps, shape=_shape(node), relu=False))
    elif fn in (torch.relu, torch.nn.functional.relu):
        tracer.fold_relu(node, node.args[0])
    elif fn is torch.cat:
        dim = node.kwargs.get("dim", node.args[1] if len(node.args) > 1 else 0)
        if dim != 1:
            tracer.fail(node, f"concatenation on axis {dim}; only channels (axis 1)")
        tracer.value[node] = [s for a in node.args[0] for s in tracer.value[a]]
    elif fn in (torch.flatten, torch.reshape) or (
            fn is operator.getitem and node.args[1] == 0):
        tracer.value[node] = tracer.value[node.args[0]]
    else:
        tracer.fail(node, f"function {getattr(fn, '__name__', fn)} is not supported")


def dag_from_module(module, example_inputs: tuple, name: str = "imported"
                    ) -> tuple[ModelDAG, dict[str, str]]:
    """The DAG of `module` and, per Conv/FC/LSTM layer, the module path of its weights."""
    import torch
    import torch.fx
    from torch.fx.passes.shape_prop import ShapeProp

    graph = torch.fx.symbolic_trace(module)
    ShapeProp(graph).propagate(*example_inputs)
    tracer = _Tracer(name)
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
        elif node.op == "get_attr":
            tracer.fail(node, "parameters used outside a module are not supported")
    dag = ModelDAG(name=name, layers=tuple(tracer.layers.values()), inputs=tracer.inputs)
    return validate_dag(dag, f"torch module {name}"), tracer.params
