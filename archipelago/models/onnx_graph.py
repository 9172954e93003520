"""The state of one ONNX import while layers are formed (`onnx_layers`, `onnx_recurrent`):
where each data value comes from, the layers drafted so far, and the ONNX nodes each
layer runs.

A data value is computed from graph inputs (values no node computes and no constant
holds). Its source (`Src`) is the layers whose outputs it is made of, those ONNX values,
and the pass-through nodes between them and it (reshapes, a channel Concat, a zero Pad):
a layer that reads the value runs those nodes itself on what it receives, as a DAG layer
with several dependencies concatenates them. A pass-through whose output several layers
read is run by each of them (it computes nothing).
"""

from dataclasses import dataclass, field
from typing import Any

from archipelago.errors import ConfigError, elide
from archipelago.models.onnx_check import node_field, refusal


@dataclass(frozen=True)
class Src:
    """Where a data value comes from: DAG layers, the ONNX values they (or the graph
    inputs) hold, the pass-through nodes from those to this value, and the zero padding
    (top, left, bottom, right) those nodes add (a Pad the next window layer absorbs)."""

    layers: tuple[str, ...]
    values: tuple[str, ...]
    nodes: tuple[int, ...] = ()
    pads: tuple[int, int, int, int] = (0, 0, 0, 0)


@dataclass
class Draft:
    """A layer being formed: its type and fields, the ONNX nodes it runs, the values it
    reads and the value it now outputs (an operator fused into it moves that on)."""

    kind: type
    fields: dict[str, Any]
    nodes: list[int]
    reads: list[str]
    output: str
    fused: list[str] = field(default_factory=list)


def batchless(shape: tuple[int, ...]) -> tuple[int, ...]:
    """A value's shape without its batch axis (a leading 1; batch size 1 is assumed)."""
    return shape[1:] if len(shape) > 1 and shape[0] == 1 else shape


def layer_name(*candidates: str) -> str:
    """The first candidate that leaves a name when "/" and "." become "_"."""
    for candidate in candidates:
        name = candidate.strip("/").replace("/", "_").replace(".", "_")
        if name:
            return name
    return "layer"


class Builder:
    """Data values, their sources and the drafted layers of one graph."""

    def __init__(self, model: Any, constants: dict[str, Any], folded: set[int],
                 shapes: dict[str, tuple[int, ...]], source: str) -> None:
        self.source = source
        self.nodes = list(model.graph.node)
        self.constants = constants
        self.shapes = shapes
        self.drafts: dict[str, Draft] = {}
        self.producer: dict[str, str] = {}  # layer output value -> its layer
        self.first_inputs: dict[str, tuple[int, ...]] = {}
        self.src: dict[str, Src] = {}
        self.graph_inputs: set[str] = set()
        for info in model.graph.input:
            if info.name not in constants:
                self.graph_inputs.add(info.name)
                self.src[info.name] = Src((), (info.name,))
        self.outputs = [o.name for o in model.graph.output]
        self.readers: dict[str, int] = dict.fromkeys(self.outputs, 1)
        self.reader_nodes: dict[str, list[int]] = {}
        for index, node in enumerate(self.nodes):
            if index not in folded:
                for name in node.input:
                    if name and name not in constants:
                        self.readers[name] = self.readers.get(name, 0) + 1
                        self.reader_nodes.setdefault(name, []).append(index)
        self.skip: set[int] = set()  # nodes a pattern already placed in a layer

    # -- reading the node -------------------------------------------------------------

    def fail(self, node: Any, why: str) -> ConfigError:
        return refusal(self.source, node_field(node), why)

    def shape(self, name: str) -> tuple[int, ...]:
        shape = self.shapes.get(name)
        if not shape or not all(shape):
            raise ConfigError(self.source, elide(name, 80), "shape inference left this "
                              "value's shape unknown; export with static input shapes")
        return shape

    def shape_of_rank(self, node: Any, name: str, rank: int, layout: str) -> tuple[int, ...]:
        shape = self.shape(name)
        if len(shape) != rank:
            raise self.fail(node, f"{name} is {len(shape)}-D {list(shape)}; {node.op_type} "
                            f"is imported on {rank}-D {layout} tensors")
        return shape

    def attr(self, node: Any, name: str, default: Any) -> Any:
        from onnx import helper

        for attribute in node.attribute:
            if attribute.name == name:
                value = helper.get_attribute_value(attribute)
                return value.decode() if isinstance(value, bytes) else value
        return default

    def data_inputs(self, node: Any) -> list[str]:
        return [n for n in node.input if n in self.src]

    def const(self, node: Any, index: int, rank: int | None = None) -> Any:
        """Input `index`, which must be a constant (an initializer or a folded value)."""
        if len(node.input) <= index or node.input[index] not in self.constants:
            raise self.fail(node, f"input {index} must be a weight initializer (or a "
                            "constant computed from initializers)")
        value = self.constants[node.input[index]]
        if rank is not None and value.ndim != rank:
            raise self.fail(node, f"weight {node.input[index]} is {value.ndim}-D "
                            f"{list(value.shape)}; {node.op_type} takes a {rank}-D one")
        return value

    def optional_const(self, node: Any, index: int) -> Any:
        name = node.input[index] if len(node.input) > index else ""
        if name and name not in self.constants:
            raise self.fail(node, f"input {index} ({elide(name, 60)}) is computed from the "
                            "model's data; it must be a constant")
        return self.constants.get(name) if name else None

    # -- values -------------------------------------------------------------------------

    def pass_through(self, index: int, node: Any, reads: list[str],
                     pads: tuple[int, int, int, int] = (0, 0, 0, 0)) -> None:
        """The node's outputs are its data inputs rearranged: whoever reads them runs it."""
        srcs = [self.src[name] for name in reads]
        merged = Src(_unique(s for src in srcs for s in src.layers),
                     _unique(v for src in srcs for v in src.values),
                     _unique([*(n for src in srcs for n in src.nodes), index]),
                     tuple(a + b for a, b in zip(srcs[0].pads, pads, strict=True)))
        for name in node.output:
            if name:
                self.src[name] = merged

    def single(self, name: str, readers: int = 1) -> Draft | None:
        """The draft whose output `name` is, through pass-throughs read by nothing else, if
        `name` comes from one layer alone and `readers` nodes (the fusing operator's) read
        it: what that operator may fuse into."""
        src = self.src[name]
        if len(src.layers) != 1 or any(src.pads):
            return None
        draft = self.drafts[src.layers[0]]
        if src.values != (draft.output,) or \
                self.readers.get(draft.output, 0) != (1 if src.nodes else readers):
            return None
        if any(self.readers.get(o, 0) > 1 for i in src.nodes for o in self.nodes[i].output):
            return None  # (an output read by nothing, Dropout's mask, is no reader)
        return draft

    def fuse(self, draft: Draft, index: int, node: Any, label: str,
             extra: tuple[int, ...] = ()) -> None:
        """Merge the node (and the pass-throughs before it) into `draft`'s layer."""
        chain = [i for n in node.input if n in self.src for i in self.src[n].nodes]
        draft.nodes.extend(i for i in _unique([*chain, index, *extra]) if i not in draft.nodes)
        draft.fused.append(label)
        out = self.nodes[extra[-1]].output[0] if extra else node.output[0]
        self.producer.pop(draft.output, None)
        draft.output = out
        self.producer[out] = draft.fields["name"]
        self.src[out] = Src((self.producer[out],), (out,))

    def add_layer(self, index: int, node: Any, kind: type, fields: dict[str, Any],
                  reads: list[str], first_input: tuple[int, ...] | None = None,
                  name: str | None = None, extra: tuple[int, ...] = (),
                  output: str | None = None) -> Draft:
        """A new layer running the node (and `extra` nodes after it) on the data values
        `reads`; its output is `output`, by default the last node's first output."""
        name = name or layer_name(node.name, node.output[0] if node.output else "",
                                  node.op_type)
        if name in self.drafts:
            raise self.fail(node, f"a second layer named '{name}'; names must be unique")
        srcs = [self.src[r] for r in reads]
        if any(any(s.pads) for s in srcs) and kind.__name__ not in ("Conv", "Pool"):
            raise self.fail(node, "reads a zero-padded value (Pad): a Pad is imported only "
                            "before a Conv or pooling layer, which absorbs it")
        deps = _unique(d for s in srcs for d in s.layers)
        values = _unique(v for s in srcs for v in s.values)
        raw = [v for v in values if v in self.graph_inputs]
        if deps and raw:
            raise self.fail(node, f"mixes the model input {elide(raw[0], 40)} with layer "
                            "outputs; a layer reads one model input or layers' outputs, so "
                            "a residual or join on a raw input is not imported")
        nodes = _unique([*(i for s in srcs for i in s.nodes), index, *extra])
        out = output or self.nodes[nodes[-1]].output[0]
        draft = Draft(kind, {"name": name, "deps": deps, **fields}, list(nodes), list(values),
                      out)
        self.drafts[name] = draft
        if not deps:
            if len(values) != 1:
                raise self.fail(node, "reads several model inputs; a first layer reads one")
            shape = self.shape(values[0])  # the model input, before any pass-through
            self.first_inputs[name] = first_input or (
                shape[1:] if kind.__name__ in ("Conv", "Pool") else batchless(shape))
        for value in (output,) if output else self.nodes[nodes[-1]].output:
            if value:
                self.producer[value] = name
                self.src[value] = Src((name,), (value,))
        return draft


def _unique(items: Any) -> tuple:
    return tuple(dict.fromkeys(items))
