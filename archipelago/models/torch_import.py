"""Bring your own multi-modal model: trace a `torch.nn.Module` with torch.fx (or take the
ATen graph of a program saved with torch.export, see torch_export.py), propagate shapes
with an example input, and write it as a layer DAG. torch is imported here only.

Each call becomes what its operator means (torch_calls.py names the operator, whichever
way the user wrote it; torch_modules.py and torch_layers.py build the layers and state
the fusion rule, the ONNX importer's): convolutions (grouped, depthwise, non-square,
asymmetrically padded), Linear (on every row of a (T, E) input), LSTM and GRU (stacked,
bidirectional), pooling, BatchNorm, LayerNorm, the activations, Softmax, LRN, residual
additions, element-wise products (squeeze-and-excitation), matrix products and
nn.MultiheadAttention (attention blocks), concatenation and the reshapes. A module called
at several places (the CIFAR-10 tutorial's one `self.pool`) is one layer per call: pool,
pool_1. What cannot be traced or is not understood is one line naming the call and why.
Batch size 1 is assumed.
"""

import traceback
from pathlib import Path

from pydantic import ValidationError

from archipelago.errors import ConfigError, elide
from archipelago.models.dag import ModelDAG, validate_dag
from archipelago.models.torch_calls import REGIONS, Call, aten_call, fx_call, module_of
from archipelago.models.torch_layers import (
    Builder,
    Input,
    Other,
    data_shape,
    full_shape,
    numel,
)
from archipelago.models.torch_modules import HANDLERS
from archipelago.models.torch_tensors import constant


def _trace(module, name: str, source: str, torch):
    """torch.fx's graph of `module`; a module it cannot trace (data-dependent control flow,
    an untraceable call) is one line naming the user's code where tracing stopped."""
    try:
        return torch.fx.symbolic_trace(module)
    except Exception as err:  # TraceError, TypeError, ... from the user's forward
        ours = (str(Path(torch.__file__).parent), str(Path(__file__).parent.parent))
        frames = [f for f in traceback.extract_tb(err.__traceback__)
                  if not f.filename.startswith(ours)]
        where = f" at {Path(frames[-1].filename).name}:{frames[-1].lineno} " \
                f"({frames[-1].name}: {elide(frames[-1].line or '', 80)})" if frames else ""
        why = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ConfigError(source, "trace", f"torch.fx cannot trace {name}{where}: "
                          f"{elide(why, 160)}") from None


def _live(graph) -> set:
    """The nodes the outputs depend on: what the model computes and returns."""
    output = next(n for n in graph.nodes if n.op == "output")
    live, stack = set(), [output]
    while stack:
        node = stack.pop()
        if node not in live:
            live.add(node)
            stack.extend(node.all_input_nodes)
    return live


def _calls(graph, modules: dict, live: set, torch) -> dict:
    """Each call node's Call; the ATen nodes of one call of a module torch.export
    decomposes (attention, LRN; torch.fx records the module call) map to that call."""
    calls, regions = {}, {}
    for node in graph.nodes:
        if node.op not in {"call_module", "call_method", "call_function"}:
            continue
        module = module_of(node) if node.op == "call_function" else None
        if module is not None and module[1] in REGIONS:  # keyed by call: `lrn`, `lrn@1`
            regions.setdefault(next(reversed(node.meta["nn_module_stack"])), []).append(node)
            continue
        call = aten_call(node, torch) if isinstance(node.target, torch._ops.OpOverload) \
            else fx_call(node, modules, torch)
        if call is not None:
            calls[node] = call
    for nodes in regions.values():
        call = REGIONS[module_of(nodes[0])[1]](nodes, live)
        calls.update({n: Call("inner", call.base, (), n, call.what, {"call": call.out})
                      for n in nodes})
        calls[call.out] = call
    return calls


def _unknown(node, modules: dict, source: str) -> ConfigError:
    if node.op == "call_module":
        module = modules[node.target]
        what = f"module {node.target} ({type(module).__name__})"
    elif node.op == "call_method":
        what = f"method .{node.target}()"
    else:
        what = f"function {getattr(node.target, '__name__', node.target)}"
    return ConfigError(source, node.name, f"{what} is not supported")


def dag_from_module(module, example_inputs: tuple, name: str = "imported",
                    source: str | None = None) -> tuple[ModelDAG, dict[str, str]]:
    """The DAG of `module` and, per Conv/FC/LSTM layer, the module path of its weights. A
    GraphModule (what torch.export's `program.module()` gives) is read as it is; any other
    module is traced with torch.fx. Errors name `source` (the module by default)."""
    import torch
    import torch.fx
    from torch.fx.passes.shape_prop import ShapeProp

    source = source or f"torch module {name}"
    graph = module if isinstance(module, torch.fx.GraphModule) else \
        _trace(module, name, source, torch)
    try:
        ShapeProp(graph).propagate(*example_inputs)
    except Exception as err:  # the example inputs do not fit the module
        why = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ConfigError(source, "example_inputs", elide(why, 200)) from None
    modules = dict(graph.named_modules())
    live = _live(graph.graph)
    calls = _calls(graph.graph, modules, live, torch)
    builder = Builder(source, calls, live)
    inner = {node for node, call in calls.items() if call.op == "inner"}  # a module's parts
    for node in graph.graph.nodes:
        if node not in live or node.op == "output":
            continue
        if node.op == "placeholder":
            shape = data_shape(node)
            builder.value[node] = Input(shape) if shape else Other("const")
        elif node.op == "get_attr":  # a parameter, buffer or constant tensor
            builder.value[node] = Other("param", numel(full_shape(node)))
        elif node not in inner and (fixed := constant(builder, node)) is not None:
            builder.value[node] = fixed  # computed from constants only: folded
        elif node not in calls:
            raise _unknown(node, modules, source)
        else:
            try:
                HANDLERS[calls[node].op](builder, calls[node])
            except ValidationError as err:  # a layer the call describes is out of bounds
                raise ConfigError.from_validation(source, err, prefix=node.name) from None
    dag = ModelDAG(name=name, layers=tuple(builder.layers.values()), inputs=builder.inputs)
    return validate_dag(dag, source), builder.params
