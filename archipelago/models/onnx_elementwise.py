"""The helpers the ONNX layer rules share (onnx_layers, onnx_import): an element-wise
layer drafted, an operator fused into the layer before it or made its own, a value joined
from several layers made one layer's output for an operator of several operands, and the
stored elements a node reads."""

from typing import Any

from archipelago.models.dag import FC, Add, Conv, Elementwise, MatMul, Pool
from archipelago.models.elementwise_ops import OPS_PER_ELEMENT, lrn_ops
from archipelago.models.onnx_graph import Builder, Draft, batchless, layer_name

# Layers an activation or a constant operation fuses into.
FUSE_INTO = (Conv, FC, MatMul, Add, Elementwise)


def constant_elements(b: Builder, node: Any) -> int:
    """The floating-point tensors (weights, biases, embeddings) the node reads: integer
    constants are axes, indices or shapes, and a single number is a scale the code wrote
    (1 / sqrt(d), 0.5 in GELU), which torch_import sees as a Python number, no tensor."""
    return sum(int(b.constants[n].size) for n in node.input
               if n in b.constants and b.constants[n].dtype.kind == "f"
               and b.constants[n].size > 1)


def elementwise(b: Builder, index: int, node: Any, op: str, reads: list[str],
                 extra: tuple[int, ...] = (), params: int = 0,
                 output: str | None = None) -> Draft:
    out = output or (b.nodes[extra[-1]] if extra else node).output[0]
    ops = OPS_PER_ELEMENT.get(op, 1)
    if op == "LRN":  # a sum of squares over `size` channels, then scale and power
        ops = lrn_ops(int(b.attr(node, "size", 1)))
    return b.add_layer(index, node, Elementwise,
                       {"op": op, "shape": batchless(b.shape(out)), "ops_per_element": ops,
                        "params": params}, reads, extra=extra, output=output,
                       name=layer_name(out) if output else None)


def joined(b: Builder, node: Any, name: str) -> str:
    """`name` as one layer's output, for an operator of several operands, which are not
    concatenated (an Add, a product, a MatMul; an operator of one operand reads a
    concatenation as a DAG layer reads several: torch_import's rule, so a DenseNet imports
    as the same layers from either format): a value joined from several layers becomes
    its own layer first, a 1x1 stride-1 max pool for feature maps (as `DagBuilder.concat`
    writes one), an Elementwise Concat otherwise."""
    src = b.src[name]
    if len(src.layers) <= 1:
        return name
    shape = batchless(b.shape(name))
    last = src.nodes[-1]
    concat = b.nodes[last]
    if len(shape) == 3 and concat.op_type == "Concat" and b.attr(concat, "axis", 0) in (1, -3):
        b.add_layer(last, concat, Pool, {"channels": shape[0], "out_rows": shape[1],
                                                "out_cols": shape[2], "kernel": 1,
                                                "stride": 1}, [name],
                    name=layer_name(name), output=name)
    else:
        b.add_layer(last, concat, Elementwise,
                    {"op": "Concat", "shape": shape, "ops_per_element": 1}, [name],
                    name=layer_name(name), output=name)
    return name


def fuse_or_own(b: Builder, index: int, node: Any, label: str, reads: list[str],
                 extra: tuple[int, ...] = (), params: int = 0, readers: int = 1) -> None:
    draft = b.single(reads[0], readers) if len(reads) == 1 else None
    out = (b.nodes[extra[-1]] if extra else node).output[0]
    if draft is not None and issubclass(draft.kind, FUSE_INTO) and \
            product(b.shape(out)) <= product(b.shape(draft.output)):  # broadcast: its own
        b.fuse(draft, index, node, label, extra)
        if label == "Relu" and "relu" in draft.kind.model_fields:
            draft.fields["relu"] = True
        if draft.kind is Elementwise:
            draft.fields["ops_per_element"] += OPS_PER_ELEMENT.get(label, 1)
            draft.fields["params"] += params
        return
    elementwise(b, index, node, label, reads if len(reads) == 1 else
                 [joined(b, node, r) for r in reads], extra=extra,
                 params=params)


def product(shape: tuple[int, ...]) -> int:
    total = 1
    for dim in shape:
        total *= dim
    return total
