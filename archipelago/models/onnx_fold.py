"""Constant folding of an ONNX graph before layers are formed: every node whose inputs are
all constants (initializers or values folded before it) is evaluated once, here, so the
layer formation sees weights wherever an exporter computed them (the onnx package's light
models build every weight with ConstantOfShape; timm's exports read weights through
Identity; the legacy torch exporter computes reshape targets from Shape, Gather, Concat).
Shape and Size of a data value are constants too: the file's shapes are static (onnx_check's
strict shape inference).

Evaluation is numpy for the plumbing operators exporters write, and onnx's own reference
evaluator (onnx.reference) on that one node for anything else; never onnxruntime, which is
the emulation's independent reference. ConstantOfShape is a broadcast view (no memory for a
vgg19-sized weight of equal values).
"""

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# Operators that are not functions of their inputs: never folded.
_RANDOM = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
           "Multinomial", "Bernoulli"}
# Operators whose output depends only on the input's static shape, not its values.
_SHAPE_OF = {"Shape", "Size"}


@dataclass
class Folded:
    """The constants (initializers plus every folded value), the folded nodes' indices in
    graph order, and their count by operator type."""

    constants: dict[str, Any]
    nodes: set[int] = field(default_factory=set)
    counts: Counter = field(default_factory=Counter)


def fold_constants(model: Any, weights: dict[str, Any],
                   shapes: dict[str, tuple[int, ...]], folded: Folded | None = None) -> Folded:
    """Evaluate every node of `model.graph` (topologically ordered: onnx's checker) whose
    inputs are constants; `shapes` are the values' static shapes for Shape and Size, which
    fold only where every dimension is known (onnx writes an unknown one as 0: a Shape of
    the output of a Pad whose pads are computed, until `reinfer_shapes` has seen them).
    Given `folded`, the nodes it lacks are tried again (after `reinfer_shapes`). A node
    whose constant inputs do not evaluate is an UnfoldableNode."""
    folded = folded or Folded(dict(weights))
    constants = folded.constants
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)
    for index, node in enumerate(model.graph.node):
        if index in folded.nodes or node.domain not in ("", "ai.onnx") or \
                node.op_type in _RANDOM:
            continue
        inputs = [name for name in node.input if name]
        if node.op_type in _SHAPE_OF and inputs and inputs[0] not in constants:
            if not all(shapes.get(inputs[0], (0,))):
                continue
            values = [_shape_of(node, shapes[inputs[0]])]
        elif all(name in constants for name in inputs):
            try:
                values = _evaluate(node, [constants[n] if n else None for n in node.input],
                                   opset)
            except Exception as err:  # numpy's or onnx.reference's, on the file's values
                raise UnfoldableNode(node, err) from None
        else:
            continue
        if not all(isinstance(v, np.ndarray | np.generic) for v in values):
            continue  # a sequence (SequenceEmpty): not a tensor; the layer rule refuses it
        for name, value in zip(node.output, values, strict=False):
            if name:
                constants[name] = value
        folded.nodes.add(index)
        folded.counts[node.op_type] += 1
    return folded


class UnfoldableNode(Exception):
    """A node whose inputs are all constants but which cannot be evaluated on them (a
    Reshape to a shape its input's elements do not fill): the file is at fault."""

    def __init__(self, node: Any, err: Exception) -> None:
        from archipelago.errors import first_line

        super().__init__(first_line(err, 200))
        self.node = node


# Folded values up to this many elements are given to the second shape inference as
# values (reshape targets, expand shapes); larger ones (weights) by their shape only.
_VALUE_LIMIT = 4096


def reinfer_shapes(model: Any, folded: Folded, shapes: dict[str, tuple[int, ...]]) -> None:
    """Fill in `shapes` the data values whose shape onnx's inference left unknown because it
    could not evaluate a shape computation (the legacy exporter's Where/Equal around an
    Expand): inference again on the unfolded nodes, with the folded values as constants."""
    from onnx import helper, numpy_helper, shape_inference

    graph = model.graph
    nodes = [n for i, n in enumerate(graph.node) if i not in folded.nodes]
    read = {name for node in nodes for name in node.input if name in folded.constants}
    small = [numpy_helper.from_array(np.array(folded.constants[n], order="C"), n)  # 0-d kept
             for n in sorted(read) if folded.constants[n].size <= _VALUE_LIMIT]
    large = [helper.make_tensor_value_info(
        n, helper.np_dtype_to_tensor_dtype(folded.constants[n].dtype),
        list(folded.constants[n].shape))
        for n in sorted(read) if folded.constants[n].size > _VALUE_LIMIT]
    inputs = [i for i in graph.input if i.name not in folded.constants]
    copy = helper.make_graph(nodes, graph.name, [*inputs, *large], list(graph.output),
                             initializer=small)
    again = helper.make_model(copy, opset_imports=list(model.opset_import),
                              ir_version=model.ir_version)
    inferred = shape_inference.infer_shapes(again, data_prop=True)
    learnt = value_shapes((*inferred.graph.value_info, *inferred.graph.output))
    for name, dims in learnt.items():
        if all(dims) and not all(shapes.get(name, (0,))):
            shapes[name] = dims


def value_shapes(infos: Any) -> dict[str, tuple[int, ...]]:
    """The shapes of the values `infos` describe (a dimension onnx does not know is 0). A
    value whose rank is unknown (no shape at all: a Reshape to a computed target) is left
    out, so that it is never taken for a 0-d scalar, whose shape is () too."""
    return {info.name: tuple(d.dim_value for d in info.type.tensor_type.shape.dim)
            for info in infos if info.type.tensor_type.HasField("shape")}


def _attrs(node: Any) -> dict[str, Any]:
    from onnx import helper

    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _shape_of(node: Any, shape: tuple[int, ...]) -> Any:
    if node.op_type == "Size":
        return np.array(int(np.prod(shape)), np.int64)
    attrs = _attrs(node)
    start, end = attrs.get("start", 0), attrs.get("end", len(shape))
    return np.array(shape[start:end], np.int64)


def _evaluate(node: Any, args: list[Any], opset: int) -> list[Any]:
    """The node's outputs: numpy for the plumbing exporters write, else onnx.reference."""
    fast = _NUMPY.get(node.op_type)
    if fast is not None:
        result = fast(node, args, opset)
        if result is not None:
            return [result]
    return _reference(node, args, opset)


def _constant(node: Any, args: list[Any], opset: int) -> Any:
    from onnx import numpy_helper

    ((name, value),) = _attrs(node).items()
    if name in ("value", "sparse_value"):
        return numpy_helper.to_array(value) if name == "value" else None
    dtype = {"value_float": np.float32, "value_floats": np.float32, "value_int": np.int64,
             "value_ints": np.int64}.get(name)
    return np.array(value, dtype) if dtype else None


def _constant_of_shape(node: Any, args: list[Any], opset: int) -> Any:
    from onnx import numpy_helper

    value = _attrs(node).get("value")
    fill = numpy_helper.to_array(value).reshape(-1) if value is not None else \
        np.zeros(1, np.float32)
    return np.broadcast_to(fill[0], tuple(int(d) for d in args[0]))


def _axes(node: Any, args: list[Any], opset: int, version: int) -> list[int] | None:
    """Axes as an attribute (before `version`) or the second input (from it)."""
    if opset >= version:
        return [int(a) for a in args[1]] if len(args) > 1 and args[1] is not None else None
    axes = _attrs(node).get("axes")
    return list(axes) if axes is not None else None


def _unsqueeze(node: Any, args: list[Any], opset: int) -> Any:
    axes = _axes(node, args, opset, 13)
    rank = args[0].ndim + len(axes or [])
    shape = list(args[0].shape)
    for axis in sorted(a % rank for a in axes or []):
        shape.insert(axis, 1)
    return args[0].reshape(shape)


def _squeeze(node: Any, args: list[Any], opset: int) -> Any:
    axes = _axes(node, args, opset, 13)
    return np.squeeze(args[0], axis=tuple(axes) if axes is not None else None)


def _reshape(node: Any, args: list[Any], opset: int) -> Any:
    return args[0].reshape(reshaped(args[0].shape, [int(d) for d in args[1]],
                                    bool(_attrs(node).get("allowzero", 0))))


def reshaped(shape: tuple[int, ...], target: list[int], allowzero: bool) -> tuple[int, ...]:
    """The shape ONNX's Reshape gives a value of `shape` (a 0 copies the input's dimension
    at its position unless `allowzero`; one -1 takes the elements left), or a ValueError
    saying why `target` cannot hold them."""
    dims = list(target)
    if not allowzero:
        beyond = [i for i, d in enumerate(dims) if d == 0 and i >= len(shape)]
        if beyond:
            raise ValueError(f"Reshape to {target}: its 0 at position {beyond[0]} copies a "
                             f"dimension the {len(shape)}-dimensional input {list(shape)} "
                             "does not have")
        dims = [shape[i] if d == 0 else d for i, d in enumerate(dims)]
    elements, known = math.prod(shape), math.prod(d for d in dims if d != -1)
    if dims.count(-1) > 1 or any(d < -1 for d in dims):
        raise ValueError(f"Reshape to {target}: a shape holds sizes >= 0 and at most one -1")
    if -1 in dims and known and elements % known == 0:
        dims[dims.index(-1)] = elements // known
    if -1 in dims or math.prod(dims) != elements:
        raise ValueError(f"Reshape of {list(shape)} ({elements:,} elements) to {target}: "
                         "the target does not hold that many elements")
    return tuple(dims)


def _transpose(node: Any, args: list[Any], opset: int) -> Any:
    perm = _attrs(node).get("perm")
    return np.transpose(args[0], perm)


def _cast(node: Any, args: list[Any], opset: int) -> Any:
    from onnx import helper

    to = helper.tensor_dtype_to_np_dtype(_attrs(node)["to"])
    return args[0].astype(to)


def _concat(node: Any, args: list[Any], opset: int) -> Any:
    return np.concatenate(args, axis=_attrs(node)["axis"])


def _gather(node: Any, args: list[Any], opset: int) -> Any:
    return np.take(args[0], args[1].astype(np.int64), axis=_attrs(node).get("axis", 0))


def _gather_elements(node: Any, args: list[Any], opset: int) -> Any:
    """out[i][j] = data[indices[i][j]][j] (axis 0): onnx.reference's reshapes a one-element
    result when the indices cover fewer elements than the data on the other axes (BERT's
    token types gathered by position). Negative indices count from the end."""
    data, indices = args[0], args[1].astype(np.int64)
    axis = _attrs(node).get("axis", 0) % data.ndim
    if indices.ndim != data.ndim:
        return None
    index = tuple(slice(None) if a == axis else slice(0, indices.shape[a])
                  for a in range(data.ndim))
    indices = np.where(indices < 0, indices + data.shape[axis], indices)
    return np.take_along_axis(data[index], indices, axis=axis)


def _slice(node: Any, args: list[Any], opset: int) -> Any:
    if opset < 10:
        return None  # starts/ends as attributes: onnx.reference
    data, starts, ends = args[0], args[1], args[2]
    axes = args[3] if len(args) > 3 and args[3] is not None else range(len(starts))
    steps = args[4] if len(args) > 4 and args[4] is not None else [1] * len(starts)
    index = [slice(None)] * data.ndim
    for axis, start, end, step in zip(axes, starts, ends, steps, strict=True):
        index[int(axis)] = slice(int(start), int(end), int(step))
    return data[tuple(index)]


_NUMPY = {"Constant": _constant, "ConstantOfShape": _constant_of_shape,
          "Identity": lambda node, args, opset: args[0],
          "Cast": _cast, "Reshape": _reshape, "Transpose": _transpose,
          "Unsqueeze": _unsqueeze, "Squeeze": _squeeze, "Concat": _concat, "Gather": _gather,
          "GatherElements": _gather_elements,
          "Slice": _slice}


def _reference(node: Any, args: list[Any], opset: int) -> list[Any]:
    """One node evaluated by onnx's reference implementation."""
    from onnx import helper
    from onnx.reference import ReferenceEvaluator

    names = [f"in{i}" if name else "" for i, name in enumerate(node.input)]
    outputs = [f"out{i}" for i in range(len(node.output))]
    copy = helper.make_node(node.op_type, names, outputs, domain=node.domain)
    copy.attribute.extend(node.attribute)
    graph = helper.make_graph(
        [copy], "fold", [helper.make_tensor_value_info(n, 0, None) for n in names if n],
        [helper.make_tensor_value_info(n, 0, None) for n in outputs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    feeds = {n: np.asarray(a) for n, a in zip(names, args, strict=True) if n}
    return list(ReferenceEvaluator(model).run(None, feeds))
