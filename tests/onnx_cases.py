"""Helpers of the ONNX emulation tests: tiny models built with onnx.helper, the torch
interpreter run on a whole graph, onnxruntime on the same input, and a stand-in import
that makes every node its own layer (for placements that split a graph node by node)."""

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from archipelago.strategies.chef.emulate.onnx_run import (
    _Scope,
    compare,
    onnxruntime_outputs,
    opset_of,
    seeded_inputs,
)
from archipelago.strategies.chef.emulate.onnx_torch import run_nodes


def make_model(nodes: list, inputs: dict[str, list[int]], outputs: dict[str, int] | list[str],
               weights: dict[str, np.ndarray] | None = None,
               opset: int = 17) -> onnx.ModelProto:
    """One graph: FLOAT inputs of the given shapes, outputs of the given element types
    (FLOAT for a plain list), initializers from `weights`."""
    if isinstance(outputs, list):
        outputs = dict.fromkeys(outputs, TensorProto.FLOAT)
    graph = helper.make_graph(
        nodes, "case",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs.items()],
        [helper.make_tensor_value_info(n, t, None) for n, t in outputs.items()],
        [numpy_helper.from_array(np.asarray(a), n) for n, a in (weights or {}).items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8 if opset < 19 else 9
    return model


def interpret(model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every graph output, by the torch interpreter running the whole graph in one scope."""
    constants = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    scope = _Scope(constants, inputs)
    run_nodes(model.graph.node, scope, opset_of(model))
    return {o.name: scope[o.name].numpy() for o in model.graph.output}


def check_against_onnxruntime(model: onnx.ModelProto, seed: int = 0,
                              spec: bool = False) -> dict:
    """The interpreter's outputs compared with onnxruntime's on seeded inputs, or, with
    `spec`, with onnx's own Python reference of the operator specification (for the forms
    onnxruntime's CPU kernels refuse: batch-first recurrent layouts, an even LRN window)."""
    inputs = seeded_inputs(model, seed)
    if spec:
        from onnx.reference import ReferenceEvaluator

        names = [o.name for o in model.graph.output]
        reference = dict(zip(names, ReferenceEvaluator(model).run(names, inputs), strict=True))
    else:
        reference = onnxruntime_outputs(model.SerializeToString(), inputs)
    return compare(interpret(model, inputs), reference)


@dataclass(frozen=True)
class NodeLayers:
    """An OnnxImport's emulation fields with every node its own layer (named n<index>),
    initializers as the constants."""

    layer_nodes: dict[str, tuple[int, ...]]
    layer_inputs: dict[str, tuple[str, ...]]
    layer_outputs: dict[str, tuple[str, ...]]
    constants: dict[str, np.ndarray]


def node_layers(path: Path) -> NodeLayers:
    model = onnx.load(str(path))
    constants = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    wanted = {o.name for o in model.graph.output}
    for node in model.graph.node:
        wanted.update(node.input)
    nodes, reads, writes = {}, {}, {}
    for i, node in enumerate(model.graph.node):
        name = f"n{i}"
        nodes[name] = (i,)
        reads[name] = tuple(dict.fromkeys(v for v in node.input
                                          if v and v not in constants))
        writes[name] = tuple(v for v in node.output if v in wanted)
    return NodeLayers(nodes, reads, writes, constants)
