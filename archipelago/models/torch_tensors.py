"""The torch operators that pick from, split, join or attend over tensors, as DAG layers
the ONNX importer writes for the same network (onnx_layers.py): an embedding lookup is an
element-wise "Gather" holding its table; a step, token or slice taken from computed data
("Gather", "Slice") and each part of a chunk or split ("Split") are element-wise layers
copying it out; a concatenation of a parameter (ViT's class token) with layer outputs is
an element-wise "Concat" holding the parameter; scaled_dot_product_attention is what the
exporters write for it: the scores Q K^T (a MatMul), their softmax (a safe one under a
boolean mask) and the weighted sum of V (a MatMul). A call that reads no data at all (a
buffer sliced, a parameter expanded or indexed by constant indices) computes a constant,
as the ONNX importer folds it.
"""

from typing import Any

from archipelago.models.dag import Elementwise, MatMul
from archipelago.models.elementwise_ops import OPS_PER_ELEMENT
from archipelago.models.torch_calls import Call
from archipelago.models.torch_layers import (
    Builder,
    Data,
    Input,
    Other,
    data_shape,
    full_shape,
    numel,
)

# Values that hold data without being data themselves: a module's tuple output, the parts
# of a split; a getitem reads them.
_CONTAINERS = ("tuple", "split")


def constant(b: Builder, node) -> Other | None:
    """The value of a call none of whose inputs carry data: a parameter-derived constant
    (its elements stored, as ONNX folds it) when it is floating point and reads a
    parameter, else a constant (indices, sizes, masks); None when an input is data."""
    values = [b.value.get(n) for n in node.all_input_nodes]
    if any(not isinstance(v, Other) or v.kind in _CONTAINERS for v in values):
        return None
    meta = node.meta.get("tensor_meta")
    dtype = getattr(meta, "dtype", None)
    if dtype is not None and dtype.is_floating_point and \
            any(v.kind == "param" for v in values):
        return Other("param", numel(full_shape(node)))
    return Other("const")


def _element(b: Builder, call: Call, op: str, src, params: int = 0) -> None:
    b.add(call, Elementwise(name=b.unique(call.base), deps=b.deps(src), op=op,
                            shape=data_shape(call.out), ops_per_element=OPS_PER_ELEMENT[op],
                            params=params), src)


def embedding(b: Builder, call: Call) -> None:
    """aten.embedding(weight, indices): one row of the table per index of the model's
    data (token ids)."""
    table, ids = call.inputs[0], call.inputs[1]
    if not isinstance(b.value.get(ids), Data | Input):
        b.fail(call, "indices that are no data reached the lookup")
    _element(b, call, "Gather", ids, numel(full_shape(table)))


def selection(b: Builder, call: Call) -> None:
    """A step, token or slice of computed data (x[:, -1], x[:, 0], x[..., :n])."""
    src = b.operand(call)
    if call.op == "index" and len(b.data(call)) != 1:
        b.fail(call, "indices computed from the model's data are not supported")
    if numel(full_shape(call.out)) == numel(full_shape(src)):  # the whole of it
        b.value[call.out] = b.value[src]
        return
    _element(b, call, "Slice" if call.op == "slice" else "Gather", src)


def split(b: Builder, call: Call) -> None:
    """chunk / split / unbind of computed data: its parts, each a layer where it is read."""
    value = b.value[b.operand(call)]
    if not isinstance(value, Data):
        b.fail(call, "splits a model input; a first layer reads the whole input")
    b.value[call.out] = Other("split", first=value, what=call.what)


def part(b: Builder, call: Call) -> None:
    """One part of a split (a getitem of it): an element-wise "Split" layer reading what
    the split read (`split` keeps it as the value's `first`)."""
    value = b.value[call.inputs[0]]
    layers = value.first.layers if isinstance(value, Other) and value.first else ()
    b.add(call, Elementwise(name=b.unique(call.base), deps=layers, op="Split",
                            shape=data_shape(call.out), ops_per_element=OPS_PER_ELEMENT["Split"]))


def parameter_concat(b: Builder, call: Call, values: list[Any]) -> None:
    """torch.cat of parameters (a class token) and layer outputs: an element-wise Concat
    holding the parameters' elements."""
    params = sum(v.numel for v in values if isinstance(v, Other) and v.kind == "param")
    deps = tuple(name for v in values if isinstance(v, Data) for name in v.layers)
    b.add(call, Elementwise(name=b.unique(call.base), deps=deps, op="Concat",
                            shape=data_shape(call.out), ops_per_element=OPS_PER_ELEMENT["Concat"],
                            params=params))


def sdpa(b: Builder, call: Call) -> None:
    """aten.scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal, scale):
    scores Q K^T over the heads, their softmax (the scale and a constant mask applied with
    it, as exporters fuse them into the scores), the weighted sum of V."""
    q, k, v = call.inputs[:3]
    mask = call.attrs["mask"]
    if any(not isinstance(b.value.get(n), Data) for n in (q, k, v)):
        b.fail(call, "queries, keys and values must be layer outputs")
    if mask is not None and not isinstance(b.value.get(mask), Other | Data):
        b.fail(call, "an attention mask that is a model input itself is not supported")
    if call.attrs["dropout"]:
        b.fail(call, f"dropout_p {call.attrs['dropout']}: export the model in eval mode")
    (rows, inner), cols = full_shape(q)[-2:], full_shape(k)[-2]
    batch = numel(full_shape(call.out)[:-2])
    base = b.unique(call.base)
    scores = b.add(call, MatMul(name=f"{base}_scores", deps=(b.single(call, q),
                                                               b.single(call, k)),
                                batch=batch, rows=rows, inner=inner, cols=cols))
    # With a boolean mask torch's softmax is a safe one: a row masked whole gives zeros,
    # not NaN; the dynamo exporter writes that as Where(IsNaN(p), 0, p) (onnxscript's
    # torch_lib, citing pytorch issue 103749), which onnx_layers fuses as "IsNaN".
    guard = ("IsNaN",) if mask is not None and _is_bool(mask) else ()
    if isinstance(b.value.get(mask), Data):
        scores = _masked(b, call, base, scores, mask)
    weights = b.add(call, Elementwise(name=f"{base}_softmax", deps=(scores,), op="Softmax",
                                      shape=(*data_shape(call.out)[:-1], cols),
                                      ops_per_element=sum(OPS_PER_ELEMENT[op] for op in
                                                          ("Softmax", *guard)),
                                      fused=guard))
    b.add(call, MatMul(name=base, deps=(weights, b.single(call, v)), batch=batch, rows=rows,
                       inner=cols, cols=full_shape(v)[-1]))


def _masked(b: Builder, call: Call, base: str, scores: str, mask) -> str:
    """The scores plus a mask computed from the model's data, as torch's reference
    implementation of scaled_dot_product_attention adds it (and the TorchScript exporter
    writes it): a boolean mask first made a bias per call, Where(mask, 0, -inf) on the
    mask's elements, then added to the scores, broadcast over the heads."""
    bias = b.single(call, mask)
    if _is_bool(mask):
        bias = b.add(call, Elementwise(name=f"{base}_mask", deps=(bias,), op="Where",
                                       shape=data_shape(mask),
                                       ops_per_element=OPS_PER_ELEMENT["Where"]))
    return b.add(call, Elementwise(name=f"{base}_masked", deps=(scores, bias), op="Add",
                                   shape=(*data_shape(call.out)[:-1], full_shape(mask)[-1]),
                                   ops_per_element=OPS_PER_ELEMENT["Add"]))


def _is_bool(node) -> bool:
    meta = node.meta.get("tensor_meta")
    return getattr(meta, "dtype", None) is not None and not meta.dtype.is_floating_point


def expand(b: Builder, call: Call) -> None:
    """Computed data repeated (an element-wise "Expand", as from ONNX); expanded to the
    shape it has, the data itself."""
    src = b.operand(call)
    if full_shape(src) == full_shape(call.out):
        b.value[call.out] = b.value[src]
        return
    _element(b, call, "Expand", src)


def roll(b: Builder, call: Call) -> None:
    """torch.roll(x, shifts, dims) of computed data (Swin's shifted windows): an
    element-wise "Roll" copying every element once per axis rolled (torch rolls one axis
    after another; the exporters write a Slice, Slice, Concat per axis, onnx_moves)."""
    src, dims = b.operand(call), call.attrs["dims"]
    if not dims:
        b.fail(call, "a roll of the flattened tensor (no dims) is not supported")
    b.add(call, Elementwise(name=b.unique(call.base), deps=b.deps(src), op="Roll",
                            shape=data_shape(call.out),
                            ops_per_element=OPS_PER_ELEMENT["Roll"] * len(dims)), src)


def lookup(b: Builder, call: Call) -> None:
    """aten.gather(constant, dim, indices) with indices computed from the data: the
    element-wise GatherElements the ONNX importer writes (RoBERTa's token types)."""
    data = b.data(call)
    if data != [call.inputs[-1]] or len(call.inputs) != 2:
        b.fail(call, "gathering from computed data is not supported")
    constant = b.value[call.inputs[0]]
    _element(b, call, "GatherElements", data[0],
             constant.numel if isinstance(constant, Other) and constant.kind == "param" else 0)
