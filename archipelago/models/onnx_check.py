"""Validate an ONNX file before any layer is formed, so everything the importer (and the
later importer rewrite) reads afterwards is well-formed: a hostile or broken file is one
ConfigError naming the file and the node or initializer at fault, never a traceback and
never a silently wrong plan.

Order matters: versions first (the checker's own message for opset 999 names nothing),
then structure the checker cannot name (cycles, control flow), then attributes normalised
to their spec type (an INT where the spec says INTS), then initializers (types, lengths,
external files), then onnx's strict shape inference and its full checker (after
inference: the checker wants the output shapes inference fills in), then finiteness as
the weights are converted once for the importer.
The onnx package is imported here and in `onnx_import` only.
"""

import math
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from archipelago.errors import MESSAGE_LIMIT, ConfigError, elide, elide_path, first_line

# IR versions this importer reads: 3 is the first with opset imports as the importer reads
# them (onnx 1.0); the upper bound is the installed onnx package's own, the newest its
# checker and shape inference understand.
MIN_IR_VERSION = 3
# Default-domain opsets: from 6, where the legacy in-place `consumed_inputs` attribute left
# Add, Relu and BatchNormalization (the onnx package's own pytorch-converted test models are
# opset 6); the upper bound is the installed onnx's newest opset.
MIN_OPSET = 6
# Nodes whose bodies are subgraphs: a layer DAG has no data-dependent control flow.
CONTROL_FLOW = ("If", "Loop", "Scan", "SequenceMap")
# Attributes the operator spec types as INTS whose one-integer form users (and some
# exporters) write; per axis (`1`) or per axis begin and end (`2`).
LIST_ATTRIBUTES = {"strides": 1, "dilations": 1, "kernel_shape": 1, "pads": 2,
                   "output_padding": 1, "output_shape": 1}
WINDOW_OPS = {"Conv", "ConvTranspose", "ConvInteger", "QLinearConv", "MaxPool",
              "AveragePool", "LpPool", "MaxUnpool", "MaxRoiPool", "DeformConv"}
# Element types whose data the importer can read, with bytes per element in raw_data and
# the typed field that holds them otherwise (TensorProto's field per data type).
_ELEMENTS = {"FLOAT": (4, "float_data"), "DOUBLE": (8, "double_data"),
             "FLOAT16": (2, "int32_data"), "BFLOAT16": (2, "int32_data"),
             "INT8": (1, "int32_data"), "INT16": (2, "int32_data"), "INT32": (4, "int32_data"),
             "INT64": (8, "int64_data"), "UINT8": (1, "int32_data"),
             "UINT16": (2, "int32_data"), "UINT32": (4, "uint64_data"),
             "UINT64": (8, "uint64_data"), "BOOL": (1, "int32_data")}
_FLOATS = {"FLOAT", "DOUBLE", "FLOAT16", "BFLOAT16"}
# The .onnx file itself: protobuf refuses to parse a message of 2 GiB or more (its sizes are
# signed 32-bit), which is why larger models keep their weights in external data files.
MAX_MODEL_BYTES = 2**31 - 1
# Weights kept in external data files, summed: read whole into memory, then converted once
# to arrays (onnx_check._weights) and again to tensors by the emulation, so about three
# copies at once; 8 GiB is past any network a layer DAG describes (VGG-16's weights are
# 0.55 GiB in FP32) and keeps those copies within a workstation's memory.
MAX_EXTERNAL_BYTES = 8 * 2**30
# Where onnx names a node in its messages: shape inference, then the checker.
_NODE_IN_MESSAGE = (re.compile(r"\(op_type:(?P<op>[^,]*), node name: (?P<name>[^)]*)\)"),
                    re.compile(r"Name: (?P<name>.*?) OpType: (?P<op>\S+)"))


@dataclass(frozen=True)
class CheckedModel:
    """A model that passed every check, with shapes inferred, and its initializers as
    arrays (converted once, here)."""

    model: Any
    weights: dict[str, Any]


def refusal(source: str, field: str, problem: str) -> ConfigError:
    """The ConfigError for `problem`, elided in the middle so the whole line stays within
    MESSAGE_LIMIT (the path and field keep at least their start and end too)."""
    source, field = elide_path(source, 100), elide(field, 100)
    room = MESSAGE_LIMIT - len(source) - len(field) - len(": field '': ")
    return ConfigError(source, field, elide(problem, room))


def node_field(node: Any) -> str:
    """How a message names a node: its name (or its first output's) and operator."""
    name = node.name or (node.output[0] if node.output else "") or "?"
    return f"node {elide(name, 60)} ({elide(node.op_type, 30)})"


def load_checked(path: Path, source: str) -> CheckedModel:
    """The ONNX model at `path`, validated and shape-inferred, or one ConfigError naming
    `source` (the path as messages show it)."""
    import onnx

    size = os.stat(path).st_size
    if size > MAX_MODEL_BYTES:
        raise refusal(source, "file", f"is {size:,} bytes; an ONNX file holds at most "
                      f"{MAX_MODEL_BYTES:,} (2 GiB, protobuf's limit): keep the weights in "
                      "external data files")
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as err:  # DecodeError, RuntimeWarning-as-error, ... by onnx version
        raise refusal(source, "onnx", f"not an ONNX model: {first_line(err, 200)}") from None
    _check_versions(model, source)
    _check_structure(model.graph, source)
    _normalise_attributes(model.graph, source)
    _check_initializers(model, path.parent, source)
    onnx.load_external_data_for_model(model, str(path.parent))
    model = _check_and_infer(model, source)
    return CheckedModel(model, _weights(model.graph, source))


def _check_versions(model: Any, source: str) -> None:
    import onnx

    newest_ir, newest_opset = onnx.IR_VERSION, onnx.defs.onnx_opset_version()
    if not MIN_IR_VERSION <= model.ir_version <= newest_ir:
        raise refusal(source, "ir_version", f"IR version {model.ir_version} is outside "
                      f"{MIN_IR_VERSION}..{newest_ir}, the range this importer reads")
    default = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")]
    if not default:
        raise refusal(source, "opset_import", "imports no default-domain ('ai.onnx') "
                      "opset; the importer reads only standard operators")
    for opset in default:
        if not MIN_OPSET <= opset <= newest_opset:
            raise refusal(source, "opset_import", f"opset {opset} is outside "
                          f"{MIN_OPSET}..{newest_opset}, the opsets this importer reads "
                          f"(IR version {model.ir_version})")


def _check_structure(graph: Any, source: str) -> None:
    """Control-flow nodes and cycles, refused by name before the checker (whose message
    for a cycle reads as an ordering slip and names one node)."""
    from onnx import AttributeProto

    for node in graph.node:
        if node.op_type in CONTROL_FLOW or any(
                a.type in (AttributeProto.GRAPH, AttributeProto.GRAPHS) for a in node.attribute):
            raise refusal(source, node_field(node), "control flow (a node with a subgraph) "
                          "cannot be a layer DAG; export the branch taken, unrolled")
    cycle = _cycle(graph.node)
    if cycle:
        names = " -> ".join(elide(n.name or n.op_type, 40) for n in cycle[:8])
        more = f" (+{len(cycle) - 8} more)" if len(cycle) > 8 else ""
        raise refusal(source, "graph", f"dependency cycle through {len(cycle)} node(s): "
                      f"{names}{more}")


def _cycle(nodes: Any) -> list[Any]:
    """The nodes of one cycle among `nodes` (value edges producer -> consumer), or []."""
    producers: dict[str, int] = {}
    for index, node in enumerate(nodes):
        for out in node.output:
            if out:
                producers.setdefault(out, index)
    edges = [sorted({producers[i] for i in node.input if i in producers}) for node in nodes]
    state = [0] * len(edges)  # 0 unseen, 1 on the current path, 2 done
    for root in range(len(edges)):
        if state[root]:
            continue
        path, stack = [root], [iter(edges[root])]
        state[root] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state[nxt] == 1:
                return [nodes[i] for i in path[path.index(nxt):]]
            elif state[nxt] == 0:
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(edges[nxt]))
    return []


def _normalise_attributes(graph: Any, source: str) -> None:
    """Window attributes the spec types as lists (strides, dilations, pads, kernel_shape)
    given as one integer become that integer on every spatial axis, when the node's spatial
    rank is known from its kernel or weight; else one line."""
    from onnx import AttributeProto

    ranks = {t.name: len(t.dims) - 2 for t in graph.initializer}
    for node in graph.node:
        if node.op_type not in WINDOW_OPS:
            continue
        for attribute in node.attribute:
            per_axis = LIST_ATTRIBUTES.get(attribute.name)
            if per_axis is None or attribute.type != AttributeProto.INT:
                continue
            axes = _spatial_rank(node, ranks)
            if axes is None or axes < 1:
                raise refusal(source, f"{node_field(node)}.{attribute.name}",
                              f"one integer ({attribute.i}) where the spec takes a list "
                              "per spatial axis, and the node's spatial rank is unknown; "
                              "write the list")
            value = attribute.i
            attribute.ClearField("i")
            attribute.type = AttributeProto.INTS
            attribute.ints.extend([value] * (axes * per_axis))


def _spatial_rank(node: Any, ranks: dict[str, int]) -> int | None:
    from onnx import AttributeProto

    for attribute in node.attribute:
        if attribute.name == "kernel_shape" and attribute.type == AttributeProto.INTS:
            return len(attribute.ints)
    if len(node.input) > 1 and node.input[1] in ranks:  # Conv's weight (M, C, k1, k2, ...)
        return ranks[node.input[1]]
    return None


def _check_initializers(model: Any, base: Path, source: str) -> None:
    from onnx import TensorProto

    graph = model.graph
    if graph.sparse_initializer:
        raise refusal(source, f"initializer {elide(_sparse_name(graph), 80)}",
                      "sparse initializers are not supported; store it dense")
    external = 0
    for tensor in graph.initializer:
        field = f"initializer {elide(tensor.name, 80)}"
        kind = TensorProto.DataType.Name(tensor.data_type) if tensor.data_type in \
            TensorProto.DataType.values() else None
        if kind is None or kind == "UNDEFINED":
            raise refusal(source, field, f"element type {tensor.data_type} is "
                          f"{'undefined' if kind else 'unknown'}; one of "
                          f"{', '.join(sorted(_ELEMENTS))}")
        if kind not in _ELEMENTS:
            raise refusal(source, field, f"element type {kind} is not supported; one of "
                          f"{', '.join(sorted(_ELEMENTS))}")
        bad = [d for d in tensor.dims if d <= 0]
        if bad:
            raise refusal(source, field, f"dimension {bad[0]} in shape "
                          f"{elide(str(list(tensor.dims)), 80)}; every dimension of a "
                          "weight is positive")
        count = math.prod(tensor.dims)
        size, typed = _ELEMENTS[kind]
        if tensor.data_location == TensorProto.EXTERNAL:
            _check_external(tensor, count * size, base, source, field)
            external += count * size
            if external > MAX_EXTERNAL_BYTES:
                raise refusal(source, field, f"external data reaches {external:,} bytes "
                              f"with this initializer; the limit is {MAX_EXTERNAL_BYTES:,} "
                              "(8 GiB) of weights read into memory")
        elif tensor.HasField("raw_data"):
            if len(tensor.raw_data) != count * size:
                raise refusal(source, field, f"holds {len(tensor.raw_data)} bytes; its "
                              f"shape {list(tensor.dims)} of {kind} needs {count * size}")
        elif len(getattr(tensor, typed)) != count:
            raise refusal(source, field, f"holds {len(getattr(tensor, typed))} values; "
                          f"its shape {list(tensor.dims)} needs {count}")
    for info in graph.input:
        if info.type.HasField("tensor_type") and not info.type.tensor_type.HasField("shape"):
            raise refusal(source, f"input {elide(info.name, 80)}", "declares no shape; "
                          "export with static input shapes")
        _check_sized(info, source)
    for info in (*graph.input, *graph.value_info, *graph.output):
        dims = info.type.tensor_type.shape.dim
        if any(d.HasField("dim_value") and d.dim_value <= 0 for d in dims):
            shape = [d.dim_value if d.HasField("dim_value") else d.dim_param for d in dims]
            raise refusal(source, f"value {elide(info.name, 80)}",
                          f"shape {elide(str(shape), 80)} has a dimension below 1")


# onnxruntime's own tool for giving a symbolic dimension its size (the user's copy, named
# by them: this importer never writes the model)
FIX_DIMS = "python -m onnxruntime.tools.make_dynamic_shape_fixed"


def _check_sized(info: Any, source: str) -> None:
    """A graph input of fixed size: a symbolic one ('batch', the dynamic axes of
    torch.onnx.export) would leave every layer's size to a guess, so the user fixes it with
    onnxruntime's tool, which the refusal spells out."""
    name = elide(info.name, 80)
    for axis, dim in enumerate(info.type.tensor_type.shape.dim):
        if dim.HasField("dim_value"):
            continue
        fix = (f"--dim_param {dim.dim_param} --dim_value N" if dim.dim_param else
               f"--input_name {name} --input_shape D0,D1,...")
        raise refusal(source, f"input {name}", f"dimension {axis} is "
                      + (f"symbolic ('{elide(dim.dim_param, 40)}')" if dim.dim_param
                         else "unknown")
                      + f"; give it a size first: {FIX_DIMS} {fix} IN.onnx OUT.onnx")


def _sparse_name(graph: Any) -> str:
    return graph.sparse_initializer[0].values.name


def _check_external(tensor: Any, needed: int, base: Path, source: str, field: str) -> None:
    """External data: a relative file inside the model's folder, holding `needed` bytes
    from its offset, exactly `needed` to its end when no length is given (onnx's own loader
    allows no path outside that folder)."""
    entries = {e.key: e.value for e in tensor.external_data}
    location = entries.get("location", "")
    shown = elide(location, 80)
    try:
        target = (base / location).resolve()
        inside = target.is_relative_to(base.resolve())
    except (OSError, ValueError):  # a NUL byte, a name past the file system's limits
        inside = False
    if not location or os.path.isabs(location) or not inside:
        raise refusal(source, field, f"external data location '{shown}' must name a file "
                      "in the model's folder")
    try:
        offset, length = int(entries.get("offset", 0)), int(entries.get("length", needed))
        info = os.stat(target)
    except ValueError:
        raise refusal(source, field, "external data offset or length is not an "
                      "integer") from None
    except OSError as err:
        raise refusal(source, field, f"external data file {shown}: "
                      f"{err.strerror or 'unreadable'}") from None
    if not stat.S_ISREG(info.st_mode):
        raise refusal(source, field, f"external data {shown} is not a regular file")
    # without a length, onnx reads from the offset to the end of the file
    end = offset + needed if "length" in entries else info.st_size
    if offset < 0 or length != needed or end != offset + needed or info.st_size < end:
        raise refusal(source, field, f"external data file {shown} holds "
                      f"{max(info.st_size - max(offset, 0), 0)} bytes from offset {offset}"
                      f" (length {length}); its shape {list(tensor.dims)} needs {needed}")


def _check_and_infer(model: Any, source: str) -> Any:
    """The model with every value's shape inferred (strict: a node whose output shape
    cannot be inferred is refused), passed by onnx's checker (full: types and inference
    again), each failure one line naming the node."""
    import onnx
    from onnx import shape_inference

    try:  # inferred first: the checker requires the output shapes inference fills in
        inferred = shape_inference.infer_shapes(model, check_type=True, strict_mode=True,
                                                data_prop=True)
        onnx.checker.check_model(inferred, full_check=True)
        return inferred
    except Exception as err:  # ValidationError, InferenceError, ... by onnx version
        raise _onnx_error(err, model.graph, source) from None


def _onnx_error(err: BaseException, graph: Any, source: str) -> ConfigError:
    text = " ".join(line.strip() for line in str(err).splitlines() if line.strip())
    field = "onnx"
    for pattern in _NODE_IN_MESSAGE:
        found = pattern.search(text)
        if found:
            name, op = found["name"].strip(), found["op"].strip()
            node = next((n for n in graph.node if n.name == name and n.op_type == op), None)
            field = node_field(node) if node is not None else \
                f"node {elide(name, 60)} ({elide(op, 30)})"
            text = pattern.sub("", text)
            break
    text = re.sub(r"\[\w+Error\]\s*", "", text)
    text = re.sub(r"==> Context:.*", "", text).replace("Inference error(s):", "")
    parts = [p.strip(" :") for p in " ".join(text.split()).split(" : ")]
    text = " : ".join(dict.fromkeys(p for p in parts if p))  # onnx repeats its reason
    return refusal(source, field, text or type(err).__name__)


def _weights(graph: Any, source: str) -> dict[str, Any]:
    """Every initializer as an array; a NaN or +inf in a floating one is refused. -inf is
    read: it is an additive attention mask's "never attend" (the dynamo exporter writes
    nn.Transformer.generate_square_subsequent_mask as an initializer, the TorchScript
    exporter as a Constant node), and softmax makes it an exact 0."""
    import numpy as np
    from onnx import TensorProto, numpy_helper

    weights = {}
    for tensor in graph.initializer:
        array = numpy_helper.to_array(tensor)
        if TensorProto.DataType.Name(tensor.data_type) in _FLOATS:
            values = array.astype(np.float32, copy=False)
            kept = np.isfinite(values) | np.isneginf(values)
            if not kept.all():
                bad = int(kept.size - np.count_nonzero(kept))
                first = array.reshape(-1)[int(np.argmin(kept.reshape(-1)))]
                raise refusal(source, f"initializer {elide(tensor.name, 80)}",
                              f"{bad} of its {kept.size} weights are not finite "
                              f"(first: {first}); weights must be finite numbers (or -inf, "
                              "an additive mask's)")
        weights[tensor.name] = array
    return weights
