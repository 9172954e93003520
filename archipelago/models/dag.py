"""Layer DAGs of multi-modal multi-task (MMMT) models (seeds/004 §VI, *Definition of the
MMMT model*): Conv, FC and LSTM layers, plus the pooling and element-wise layers backbones
need, with named dependencies that may cross modalities.

A layer with several dependencies concatenates them (channels for Conv/Pool, flattened
features for FC/LSTM); an `add` layer sums its dependencies. All data is FP32 (§I: five
DSPs per FP32 MAC), so every byte count below is four bytes per element.
"""

from functools import cached_property
from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from archipelago.errors import ConfigError, elide
from archipelago.models.dag_layers import (
    BYTES_PER_ELEMENT,
    COMPUTE_TYPES,
    FC,
    LAYER_TYPES,
    LSTM,
    MAX_LAYERS,
    Add,
    BaseLayer,
    Conv,
    Elementwise,
    Layer,
    MatMul,
    Pool,
    Size,
    conv_out,
    implied_input,
    product,
)
from archipelago.safe_read import load_json, load_yaml
from archipelago.strict_numbers import check_numbers

__all__ = ["BYTES_PER_ELEMENT", "COMPUTE_TYPES", "FC", "LSTM", "Add", "Conv", "Elementwise",
           "MatMul", "ModelDAG", "Pool", "conv_out", "dag_from_dict", "load_dag", "torch_problem",
           "validate_dag"]


class ModelDAG(BaseModel):
    """A validated MMMT model: layers in any order, their dependencies forming a DAG."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    # What it is in a user's words, one and many: a strategy that refuses it says so.
    kind_words: ClassVar[tuple[str, str]] = (
        "a layer graph (a layer-DAG YAML, ONNX or .pt2 file)", "layer graphs")

    name: str
    layers: tuple[Layer, ...] = Field(min_length=1, max_length=MAX_LAYERS)
    inputs: dict[str, tuple[Size, ...]] = Field(default_factory=dict)
    """Shape of the external input of each layer without dependencies (default: the
    smallest input its parameters imply)."""
    folded: dict[str, int] = Field(default_factory=dict)
    """Operators an importer evaluated away as constants (weight subgraphs: Constant,
    ConstantOfShape, Identity, Cast, ...), counted by type."""

    @cached_property
    def by_name(self) -> dict[str, BaseLayer]:
        return {layer.name: layer for layer in self.layers}

    @cached_property
    def successors(self) -> dict[str, tuple[str, ...]]:
        succ: dict[str, list[str]] = {layer.name: [] for layer in self.layers}
        for layer in self.layers:
            for dep in layer.deps:
                succ[dep].append(layer.name)
        return {k: tuple(v) for k, v in succ.items()}

    @cached_property
    def levels(self) -> tuple[tuple[str, ...], ...]:
        """Kahn waves: each wave holds the layers whose dependencies all lie in earlier
        waves (the ready sets of CHEF-M2A's list mapping, §V-A)."""
        indeg = {layer.name: len(layer.deps) for layer in self.layers}
        wave = [layer.name for layer in self.layers if not layer.deps]
        waves: list[tuple[str, ...]] = []
        while wave:
            waves.append(tuple(wave))
            nxt = []
            for name in wave:
                for succ in self.successors[name]:
                    indeg[succ] -= 1
                    if indeg[succ] == 0:
                        nxt.append(succ)
            wave = nxt
        return tuple(waves)

    @cached_property
    def order(self) -> tuple[str, ...]:
        return tuple(name for wave in self.levels for name in wave)

    @property
    def compute_layers(self) -> int:
        return sum(1 for layer in self.layers if layer.is_compute)

    def input_shape(self, layer: BaseLayer) -> tuple[int, ...]:
        """What flows into `layer`: its dependencies concatenated, or its external input."""
        if not layer.deps:
            return self.inputs.get(layer.name) or implied_input(layer)
        shapes = [self.by_name[d].out_shape for d in layer.deps]
        if isinstance(layer, Conv | Pool) and all(len(s) == 3 for s in shapes):
            return (sum(s[0] for s in shapes), *shapes[0][1:])
        return (sum(product(s) for s in shapes),)

    def in_elements(self, layer: BaseLayer) -> int:
        if isinstance(layer, Add):
            return len(layer.deps) * layer.out_elements if layer.deps else layer.out_elements
        return product(self.input_shape(layer))


def validate_dag(dag: ModelDAG, source: str) -> ModelDAG:
    """Names unique, dependencies existing, no cycle, shapes agreeing: else one line naming
    the layer and the numbers."""
    seen: set[str] = set()
    for layer in dag.layers:
        if layer.name in seen:
            raise ConfigError(source, f"layers.{layer.name}", "duplicate layer name")
        seen.add(layer.name)
    for layer in dag.layers:
        for dep in layer.deps:
            if dep not in seen:
                raise ConfigError(source, f"layers.{layer.name}.deps",
                                  f"depends on '{dep}', which is no layer of {dag.name}")
            if dep == layer.name:
                raise ConfigError(source, f"layers.{layer.name}.deps", "depends on itself")
    if len(dag.order) != len(dag.layers):
        stuck = sorted(set(seen) - set(dag.order))
        raise ConfigError(source, "layers", f"dependency cycle through {', '.join(stuck[:6])}")
    if not dag.compute_layers:
        raise ConfigError(source, "layers", f"no {', '.join(COMPUTE_TYPES)} layer: nothing "
                          "for an accelerator to run")
    for name, shape in dag.inputs.items():
        if name not in seen or dag.by_name[name].deps:
            firsts = [la.name for la in dag.layers if not la.deps]
            raise ConfigError(source, f"inputs.{name}", "names no layer without dependencies "
                              f"(those: {', '.join(firsts[:8])})")
        if not shape:
            raise ConfigError(source, f"inputs.{name}", "an input shape needs a dimension")
    for layer in dag.layers:
        field, problem = torch_problem(dag, layer)
        problem = problem or _window_problem(dag, layer) or _shape_problem(dag, layer)
        if problem:
            raise ConfigError(source, f"layers.{layer.name}{field}", problem)
    return dag


def torch_problem(dag: ModelDAG, layer: BaseLayer) -> tuple[str, str | None]:
    """What torch's own kernels, which the emulator runs (chef/emulate/dag_torch.py),
    refuse beyond the shape arithmetic: (field suffix, problem) or ("", None). Called by
    validate_dag, so `plan` refuses what `emulate` could not run, before any process starts.

    - max_pool2d / avg_pool2d: padding at most half the kernel (torch: "pad should be at
      most half of effective kernel size"; dilation is 1 here);
    - a conv or pool reading several feature maps concatenates them on channels, so their
      rows and columns must agree (torch.cat)."""
    if isinstance(layer, Pool):
        top, left, bottom, right = layer.borders
        rows, cols = layer.window
        if max(top, bottom) > rows // 2 or max(left, right) > cols // 2:
            if layer.pads is None and rows == cols:
                return ".padding", (f"padding {layer.padding} is more than half the "
                                    f"{rows}-wide kernel (at most {rows // 2}; torch's "
                                    "pooling refuses more)")
            field = ".padding" if layer.pads is None else ".pads"
            return field, (f"padding {list(layer.borders)} is more than half the "
                           f"{rows}x{cols} kernel (at most {rows // 2} rows, {cols // 2} "
                           "columns; torch's pooling refuses more)")
    if isinstance(layer, Conv | Pool) and len(layer.deps) > 1:
        shapes = [dag.by_name[d].out_shape for d in layer.deps]
        if all(len(s) == 3 for s in shapes) and len({s[1:] for s in shapes}) > 1:
            sizes = ", ".join(f"{d} {s[1]}x{s[2]}" for d, s in zip(layer.deps, shapes,
                                                                  strict=True))
            return ".deps", (f"concatenates feature maps of different sizes on channels "
                             f"({elide(sizes, 200)})")
    return "", None


def _window_problem(dag: ModelDAG, layer: BaseLayer) -> str | None:
    """A first conv or pool layer, its input implied by its window, whose padding leaves no
    input: (R-1)S + K - 2P < 1. (With dependencies or a given input, the shape check
    compares the real input's output with the declared one.)"""
    if not isinstance(layer, Conv | Pool) or layer.deps or layer.name in dag.inputs:
        return None
    rows, cols = implied_input(layer)[1:]
    if min(rows, cols) < 1:
        return (f"padding {layer.padding} around a {layer.kernel}-wide kernel leaves an "
                f"input of {rows}x{cols} for a {layer.out_rows}x{layer.out_cols} output")
    return None


def _shape_problem(dag: ModelDAG, layer: BaseLayer) -> str | None:
    if not layer.deps and layer.name not in dag.inputs:
        return None
    got = dag.input_shape(layer)
    if isinstance(layer, Add) and not layer.deps:
        return f"adds no layer outputs, declared shape {layer.shape}"
    if isinstance(layer, Add | Elementwise) and layer.deps:
        return _operands_problem(dag, layer)
    if isinstance(layer, Elementwise):  # a first layer, on the model's input
        return _elementwise_problem(layer, [product(got)])
    if isinstance(layer, MatMul):
        operands = (layer.batch * layer.rows * layer.inner,
                    layer.batch * layer.inner * layer.cols)
        one_holds_both = len(layer.deps) == 1 and product(got) in operands  # x @ x^T
        if product(got) != sum(operands) and not one_holds_both:
            return (f"multiplies {layer.batch} x ({layer.rows}x{layer.inner} @ "
                    f"{layer.inner}x{layer.cols}) = {sum(operands)} operand elements, its "
                    f"inputs give {product(got)}")
        return None
    if isinstance(layer, Conv | Pool):
        channels = layer.in_ch if isinstance(layer, Conv) else layer.channels
        if len(got) != 3:
            return f"takes a feature map, its input gives {got}"
        if got[0] != channels:
            return f"expects {channels} input channels, its input gives {got[0]}"
        top, left, bottom, right = layer.borders
        rows = (got[1] + top + bottom - layer.window[0]) // layer.strides[0] + 1
        cols = (got[2] + left + right - layer.window[1]) // layer.strides[1] + 1
        if (rows, cols) != (layer.out_rows, layer.out_cols):
            return (f"input {got[1]}x{got[2]} gives output {rows}x{cols}, declared "
                    f"{layer.out_rows}x{layer.out_cols}")
        return None
    expected = product(implied_input(layer))
    if product(got) != expected:  # a (T, E) model input is T x E features
        return f"expects {expected} input features, its input gives {product(got)}"
    return None


def _operands_problem(dag: ModelDAG, layer: "Add | Elementwise") -> str | None:
    """An add's inputs each hold its output's element count, in its shape where they have
    its rank up to the order of its axes (an importer passes reshapes and transposes
    through, so a residual may join a (C, H, W) map and the (H*W, C) tokens or the
    (H, W, C) map it was viewed as); an element-wise layer's as
    `_elementwise_problem` reads them."""
    sizes = [dag.by_name[d].out_elements for d in layer.deps]
    if isinstance(layer, Add):
        shapes = {dag.by_name[d].out_shape for d in layer.deps}
        if set(sizes) != {layer.out_elements} or any(
                len(s) == len(layer.shape) and sorted(s) != sorted(layer.shape)
                for s in shapes):
            return f"adds inputs of shapes {sorted(shapes)}, declared shape {layer.shape}"
        return None
    return _elementwise_problem(layer, sizes)


# Element-wise operators that copy part of their input out (a split part of a
# concatenation: ShuffleNet's halves after its channel shuffle).
_SELECTIONS = ("Gather", "Slice", "Split")
# Element-wise operators whose one computed operand may broadcast over a constant one
# (transformers' padding mask And-ed with the (query, key) mask; an Expand).
_CONSTANT_BROADCASTS = ("And", "Or", "Where", "Expand", "Tile")


def _elementwise_problem(layer: Elementwise, sizes: list[int]) -> str | None:
    """Inputs of `sizes` elements either join into the output (one input, a
    concatenation, with up to `params` stored elements: ViT's class token), or are
    operands broadcast over it (squeeze-and-excitation's gate), or the layer selects or
    reduces part of one larger input (a Gather of a token, the last LSTM step, a mean), or
    looks each input up in a table (a Gather holding whole rows: an embedding)."""
    total = layer.out_elements
    joins = sum(sizes) <= total <= sum(sizes) + layer.params
    broadcast = all(total % s == 0 for s in sizes) and (
        (len(sizes) > 1 and max(sizes) == total) or layer.op in _CONSTANT_BROADCASTS)
    selects = sum(sizes) > total and (len(sizes) == 1 or layer.op in _SELECTIONS)
    # an embedding lookup: one row of its table (`params`, whole rows) per input id
    width = total // sum(sizes) if total % sum(sizes) == 0 else 0
    looks_up = layer.op == "Gather" and width > 0 and layer.params % width == 0 < layer.params
    if joins or broadcast or selects or looks_up:
        return None
    return (f"inputs of {', '.join(map(str, sizes))} elements neither join nor broadcast "
            f"into its shape {layer.shape} (nor does it select from one larger input; "
            f"stored elements {layer.params})")


def dag_from_dict(data: dict, source: str) -> ModelDAG:
    layers = data.get("layers")
    for i, layer in enumerate(layers if isinstance(layers, list) else []):
        name = layer.get("type") if isinstance(layer, dict) else None
        kind = LAYER_TYPES.get(name) if isinstance(name, str) else None
        if kind is not None:  # `kernel: true` or `"3"` is refused, not read as 1 or 3
            check_numbers(layer, kind, source, f"layers.{i}")
    try:
        dag = ModelDAG(**data)
    except ValidationError as err:
        first = err.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        raise ConfigError(source, field, first["msg"]) from None
    except TypeError as err:
        raise ConfigError(source, "model", str(err)) from None
    return validate_dag(dag, source)


def load_dag(path: Path) -> ModelDAG:
    """A DAG from a YAML or JSON file (`name`, `layers: [{name, type, deps, ...}]`)."""
    source = str(path)
    data = load_json(path, "model") if path.suffix == ".json" else load_yaml(path, "model")
    if not isinstance(data, dict):
        raise ConfigError(source, "model", "top level must be a mapping")
    data.setdefault("name", path.stem)
    return dag_from_dict(data, source)
