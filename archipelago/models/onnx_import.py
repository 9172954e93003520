"""Bring your own multi-modal model as an ONNX file: infer shapes with ONNX's own shape
inference and write the graph as a layer DAG (the same DAG `torch_import` builds from a
torch module). The onnx package is imported by the onnx_* modules only.

Three steps, each its own module: the file is validated (`onnx_check`: versions, cycles,
control flow, attribute types, initializers, onnx's checker and strict shape inference);
every node whose inputs are all constants is evaluated (`onnx_fold`: weights built by
ConstantOfShape or read through Identity, reshape targets computed from Shape); the
remaining nodes, which read the model's data, form layers by the rule `onnx_layers` states
(which operators are layers, which fuse into the layer before them, which the reading
layer absorbs), LSTM and GRU nodes in `onnx_recurrent`. Batch size 1 is assumed.

Besides the DAG, the import says which ONNX nodes each layer runs and which values cross
between layers (`OnnxImport`): the split emulation runs the file's own nodes on those
terms and compares the result with onnxruntime.
"""

import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from archipelago.errors import ConfigError, elide_path
from archipelago.models.dag import ModelDAG, validate_dag
from archipelago.models.onnx_check import load_checked, node_field, refusal
from archipelago.models.onnx_elementwise import joined
from archipelago.models.onnx_graph import Builder, Draft
from archipelago.models.onnx_layers import visit
from archipelago.safe_read import probe


@dataclass(frozen=True)
class OnnxImport:
    """A layer DAG and, per layer, the ONNX nodes it runs (indices into model.graph.node,
    graph order: its own operator, the operators fused into it, the pass-throughs it
    absorbed; a pass-through several layers read is run by each, as is a Split by the
    layer of each part read; every other node belongs to one layer, folded nodes to none),
    the values it reads that it does not compute (graph inputs or other layers' outputs;
    constants excluded), the values it computes that another layer or a graph output
    reads, and the constants (initializers and every folded value) by name."""

    dag: ModelDAG
    layer_nodes: dict[str, tuple[int, ...]]
    layer_inputs: dict[str, tuple[str, ...]]
    layer_outputs: dict[str, tuple[str, ...]]
    constants: dict[str, Any]


def _finish_outputs(b: Builder) -> None:
    """A graph output a pass-through computes (a final Flatten) is computed by the layer it
    rearranges (or a join layer of several)."""
    for out in b.outputs:
        src = b.src.get(out)
        if src is None:
            raise ConfigError(b.source, f"output {out}", "is a constant or no node computes "
                              "it from the model's inputs")
        if out in b.producer:
            continue
        if len(src.layers) != 1:
            if not src.layers:
                raise ConfigError(b.source, f"output {out}", "no layer computes it")
            joined(b, b.nodes[src.nodes[-1]], out)
            continue
        draft = b.drafts[src.layers[0]]
        draft.nodes.extend(i for i in src.nodes if i not in draft.nodes)
        b.producer[out] = src.layers[0]


def _layer(b: Builder, draft: Draft) -> Any:
    try:
        return draft.kind(**draft.fields, fused=tuple(draft.fused))
    except ValidationError as err:  # a layer the node describes is out of bounds
        node = b.nodes[draft.nodes[-1]]
        raise ConfigError.from_validation(b.source, err, prefix=node_field(node)) from None


def _folded(model: Any, weights: dict[str, Any], shapes: dict[str, tuple[int, ...]],
            source: str) -> Any:
    """Constants folded, and shapes onnx left unknown inferred again with them, in turn
    until neither learns more: a shape learnt lets a Shape of it fold (swin's padded
    windows), and a folded value lets inference size the nodes that read it."""
    # numpy (onnx_fold's) only once a file is imported: registering the family, which every
    # `archi catalog` does, stays without it.
    from archipelago.models.onnx_fold import UnfoldableNode, fold_constants, reinfer_shapes

    try:
        folded = fold_constants(model, weights, shapes)
        while unknown := _unknown(model, folded, shapes):
            before = len(folded.nodes)
            reinfer_shapes(model, folded, shapes)
            fold_constants(model, weights, shapes, folded)
            if (len(folded.nodes), _unknown(model, folded, shapes)) == (before, unknown):
                break
    except UnfoldableNode as err:
        raise refusal(source, node_field(err.node), str(err)) from None
    return folded


def _unknown(model: Any, folded: Any, shapes: dict[str, tuple[int, ...]]) -> int:
    """How many values the unfolded nodes compute whose shape is unknown, in rank (no
    entry) or in a dimension (a 0)."""
    return sum(1 for i, node in enumerate(model.graph.node) if i not in folded.nodes
               for name in node.output if name and not all(shapes.get(name, (0,))))


def import_onnx(path: Path, name: str | None = None) -> OnnxImport:
    """The ONNX model at `path` as a layer DAG, with the nodes and values of each layer."""
    source = elide_path(str(path), 100)
    info = probe(path, "file")
    if info is None or not stat.S_ISREG(info.st_mode):
        raise ConfigError(source, "file", "not a readable ONNX file")
    checked = load_checked(path, source)
    from archipelago.models.onnx_fold import value_shapes

    graph = checked.model.graph
    model, shapes = checked.model, value_shapes((*graph.input, *graph.value_info,
                                                 *graph.output))
    folded = _folded(model, checked.weights, shapes, source)
    b = Builder(model, folded.constants, folded.nodes, shapes, source)
    for index, node in enumerate(b.nodes):
        if index not in folded.nodes:
            try:
                visit(b, index, node)
            except ValidationError as err:
                raise ConfigError.from_validation(source, err, prefix=node_field(node)) \
                    from None
    _finish_outputs(b)
    layers = tuple(_layer(b, draft) for draft in b.drafts.values())
    try:
        dag = ModelDAG(name=name or path.stem, layers=layers, inputs=b.first_inputs,
                       folded=dict(sorted(folded.counts.items())))
    except ValidationError as err:
        raise ConfigError.from_validation(source, err) from None
    dag = validate_dag(dag, source)
    read = {v for draft in b.drafts.values() for v in draft.reads} | set(b.outputs)
    outputs: dict[str, list[str]] = {n: [] for n in b.drafts}
    for value, layer in b.producer.items():
        if value in read:
            outputs[layer].append(value)
    return OnnxImport(dag, {n: tuple(sorted(d.nodes)) for n, d in b.drafts.items()},
                      {n: tuple(d.reads) for n, d in b.drafts.items()},
                      {n: tuple(v) for n, v in outputs.items()}, folded.constants)


def dag_from_onnx(path: Path, name: str | None = None) -> ModelDAG:
    """The layer DAG of the ONNX model at `path`."""
    return import_onnx(path, name).dag
