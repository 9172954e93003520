"""Data movement the ONNX exporters write as several nodes or as an index: torch.roll as two
Slices joined by a Concat (Swin's shifted windows), and a Gather or GatherND whose
constant indices pick every element once (transformers' padding mask indexed by its own
aranges). A roll is an element-wise "Roll" layer copying every element once per axis, as
the torch importer writes aten.roll; a permutation passes through like a Transpose."""

from typing import Any

from archipelago.models.dag import Elementwise
from archipelago.models.elementwise_ops import OPS_PER_ELEMENT
from archipelago.models.onnx_elementwise import elementwise, product
from archipelago.models.onnx_graph import Builder


def moved(b: Builder, index: int, node: Any, source: str) -> bool:
    """Whether selection `node` of `source` was placed as a roll's layer or, a
    permutation, passed through."""
    if node.op_type == "Slice" and roll(b, index, node, source):
        return True
    if permutation(b, node, source):
        b.pass_through(index, node, [source])
        return True
    return False


def permutation(b: Builder, node: Any, source: str) -> bool:
    """A Gather or GatherND by constant indices that picks every element once: the
    elements rearranged, a pass-through like a Transpose."""
    if node.op_type not in ("Gather", "GatherND") or node.input[1] not in b.constants or \
            product(b.shape(node.output[0])) != product(b.shape(source)):
        return False
    indices, shape = b.constants[node.input[1]], b.shape(source)
    if node.op_type == "Gather":
        rows = indices.reshape(-1, 1) % shape[int(b.attr(node, "axis", 0)) % len(shape)]
    elif b.attr(node, "batch_dims", 0) == 0:
        rows = indices.reshape(-1, indices.shape[-1]) % shape[:indices.shape[-1]]
    else:
        return False
    return len({tuple(row) for row in rows.tolist()}) == len(rows)


def _span(b: Builder, node: Any, source: str) -> tuple[int, int, int] | None:
    """(axis, start, end) of a Slice of `source` along one axis with step 1, clamped."""
    if node.op_type != "Slice" or list(node.input[:1]) != [source] or len(node.input) < 4 \
            or any(n not in b.constants for n in node.input[1:] if n):
        return None
    starts, ends, axes = (b.constants[n].reshape(-1).tolist() for n in node.input[1:4])
    steps = b.constants[node.input[4]].reshape(-1).tolist() if len(node.input) > 4 and \
        node.input[4] else [1]
    shape = b.shape(source)
    if len(axes) != 1 or steps != [1]:
        return None
    axis, size = int(axes[0]) % len(shape), shape[int(axes[0]) % len(shape)]
    start, end = (min(max(v + size if v < 0 else v, 0), size) for v in (starts[0], ends[0]))
    return axis, start, end


def roll(b: Builder, index: int, node: Any, source: str) -> bool:
    """Slice `node` and another Slice of `source`, both read only by one Concat on their
    axis, which joins [k, n) then [0, k): torch.roll by n - k, one layer (joining the
    roll it reads, when that roll's output is read by these two Slices alone)."""
    readers = b.reader_nodes.get(node.output[0], [])
    if len(readers) != 1 or b.nodes[readers[0]].op_type != "Concat":
        return False
    concat = b.nodes[readers[0]]
    if len(concat.input) != 2 or b.readers.get(concat.input[0]) != 1 or \
            b.readers.get(concat.input[1]) != 1:
        return False
    parts = [next((i for i in b.reader_nodes.get(source, [])
                   if b.nodes[i].output[0] == value), None) for value in concat.input]
    if None in parts or index not in parts:
        return False
    spans = [_span(b, b.nodes[i], source) for i in parts]
    size = b.shape(source)[spans[0][0]] if spans[0] else 0
    if None in spans or {s[0] for s in spans} != {int(b.attr(concat, "axis", 0)) % len(
            b.shape(source))} or spans[0][2] != size or spans[1][1] != 0 or \
            spans[0][1] != spans[1][2] or not 0 < spans[0][1] < size:
        return False
    other = next(i for i in parts if i != index)
    b.skip.update((other, readers[0]))
    draft = b.single(source, readers=2)
    if draft is not None and draft.kind is Elementwise and draft.fields["op"] == "Roll":
        b.fuse(draft, index, node, "Roll", (other, readers[0]))
        draft.fields["ops_per_element"] += OPS_PER_ELEMENT["Roll"]
        return True
    elementwise(b, index, node, "Roll", [source], extra=(other, readers[0]))
    return True
