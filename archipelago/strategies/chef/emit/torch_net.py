"""One project's layers as a torch.fx graph module, which hls4ml's PyTorch converter reads.

Each DAG layer becomes the torch.nn layers hls4ml converts (Conv2d, Linear, MaxPool2d,
AvgPool2d, ReLU, ConstantPad2d) and the functions it converts (torch.cat, torch.flatten,
+), named after the layer so the HLS project's layers keep the DAG's names. The module's
arguments are the project's input streams and it returns its output streams, both in
`Stage` order. Weights are given per layer ([weight, bias], as torch's layers hold them).
"""

import operator
import re

import torch
from torch import fx, nn

from archipelago.errors import ArchipelagoError
from archipelago.models.dag import FC, Add, Conv, ModelDAG, Pool
from archipelago.strategies.chef.emit.stages import Stage, layer_inputs, value_shape

# What this converter builds, for the refusal's list.
BUILT = ("conv (groups 1), fc (one row), avg and max pools with windows equal to their "
         "stride (a max pool padded only after a ReLU), add")


def refusal(dag: ModelDAG, name: str) -> str | None:
    """Why hls4ml cannot take layer `name` as built here (one line naming the layer and
    its operator), or None."""
    layer = dag.by_name[name]
    shapes = [value_shape(dag, v) for v in layer_inputs(dag, name)]
    problem = None
    if isinstance(layer, Conv) and layer.groups > 1:
        problem = (f"grouped Conv (groups {layer.groups}), which hls4ml's PyTorch "
                   "converter does not implement")
    elif isinstance(layer, Pool) and layer.window != layer.strides:
        problem = (f"{layer.kind} pool {layer.window} at stride {layer.strides} (hls4ml's "
                   "io_stream pooling takes windows equal to their stride)")
    elif isinstance(layer, Pool) and layer.kind == "max" and any(layer.borders) and not all(
            getattr(dag.by_name[d], "relu", False) for d in layer.deps):
        problem = (f"max pool with padding {list(layer.borders)} over an input that may be "
                   "negative (hls4ml pads with zeros only)")
    elif isinstance(layer, Conv | Pool) and any(len(s) != 3 for s in shapes):
        problem = f"{layer.type} over a flat input of shapes {shapes}"
    elif isinstance(layer, FC) and layer.rows > 1:
        problem = f"FC over {layer.rows} rows (a batched MatMul)"
    elif isinstance(layer, Add) and any(s != tuple(layer.shape) for s in shapes):
        problem = f"Add of inputs shaped {shapes} into {tuple(layer.shape)}"
    elif not isinstance(layer, Conv | Pool | FC | Add):
        problem = f"operator {getattr(layer, 'op', layer.type)}"
    if problem is None:
        return None
    return (f"cannot build layer '{name}' of {dag.name} with hls4ml: {problem}; the "
            f"hls4ml build takes {BUILT}")


def check_buildable(dag: ModelDAG) -> None:
    """Refuse the first layer hls4ml cannot take, before any project is written."""
    problem = next(filter(None, (refusal(dag, n) for n in dag.order)), None)
    if problem:
        raise ArchipelagoError(problem)


def module_names(layers: tuple[str, ...]) -> dict[str, str]:
    """Layer -> a Python identifier (torch.fx and the HLS project's C++ name it), unique."""
    out: dict[str, str] = {}
    for name in layers:
        ident = re.sub(r"\W", "_", name)
        ident = ident if re.match(r"[A-Za-z]", ident) else f"l_{ident}"
        while ident in out.values():
            ident += "_"
        out[name] = ident
    return out


def stage_module(dag: ModelDAG, stage: Stage,
                 weights: dict[str, list[torch.Tensor]]) -> fx.GraphModule:
    """The layers of one `Stage` with their weights, as a torch.fx graph (hls4ml traces
    it again; a forward of `*streams` would not trace). Inputs are named `in_VALUE`."""
    idents = module_names(stage.layers)
    root = nn.Module()
    graph = fx.Graph()
    values = {v: graph.placeholder("in_" + re.sub(r"\W", "_", v)) for v in stage.inputs}
    for name in stage.layers:
        layer, ident = dag.by_name[name], idents[name]
        args = [values[v] for v in layer_inputs(dag, name)]
        if isinstance(layer, FC):
            args = [graph.call_function(torch.flatten, (a, 1))
                    if len(value_shape(dag, v)) > 1 else a
                    for a, v in zip(args, layer_inputs(dag, name), strict=True)]
        out = args[0]  # joined two at a time: hls4ml merges no more than two tensors
        for other in args[1:]:
            out = graph.call_function(operator.add, (out, other)) if isinstance(layer, Add) \
                else graph.call_function(torch.cat, ([out, other],), {"dim": 1})
        for suffix, module in _modules(layer, weights.get(name, [])):
            root.add_module(ident + suffix, module)
            out = graph.call_module(ident + suffix, (out,))
        values[name] = out
    graph.output(tuple(values[v] for v in stage.outputs))
    return fx.GraphModule(root, graph).eval()


def _modules(layer, weights: list[torch.Tensor]) -> list[tuple[str, nn.Module]]:
    """(name suffix, module) of one DAG layer: its padding, its operator, its ReLU."""
    out: list[tuple[str, nn.Module]] = []
    if isinstance(layer, Conv):
        top, left, bottom, right = layer.borders
        symmetric = top == bottom and left == right
        if not symmetric:
            out.append(("_pad", nn.ConstantPad2d((left, right, top, bottom), 0.0)))
        conv = nn.Conv2d(layer.in_ch, layer.out_ch, layer.window, layer.strides,
                         padding=(top, left) if symmetric else 0)
        _load(conv, weights)
        out.append(("", conv))
    elif isinstance(layer, FC):
        linear = nn.Linear(layer.in_features, layer.out_features)
        _load(linear, weights)
        out.append(("", linear))
    elif isinstance(layer, Pool):  # zeros: an average counts them (as run_layer's), a max
        top, left, bottom, right = layer.borders  # pool pads only non-negative inputs
        if any(layer.borders):
            out.append(("_pad", nn.ConstantPad2d((left, right, top, bottom), 0.0)))
        pool = nn.MaxPool2d if layer.kind == "max" else nn.AvgPool2d
        out.append(("", pool(layer.window, layer.strides)))
    if getattr(layer, "relu", False):
        out.append(("_relu", nn.ReLU()))
    return out


def _load(module: nn.Conv2d | nn.Linear, weights: list[torch.Tensor]) -> None:
    with torch.no_grad():
        module.weight.copy_(weights[0].reshape(module.weight.shape))
        module.bias.copy_(weights[1].reshape(module.bias.shape))
