"""Layer DAGs of multi-modal multi-task (MMMT) models (seeds/004 §VI, *Definition of the
MMMT model*): Conv, FC and LSTM layers, plus the pooling and element-wise layers backbones
need, with named dependencies that may cross modalities.

A layer with several dependencies concatenates them (channels for Conv/Pool, flattened
features for FC/LSTM); an `add` layer sums its dependencies. All data is FP32 (§I: five
DSPs per FP32 MAC), so every byte count below is four bytes per element.
"""

from functools import cached_property
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from archipelago.errors import ConfigError, elide
from archipelago.families import Family, register_family
from archipelago.names import Name
from archipelago.safe_read import load_json, load_yaml
from archipelago.strict_numbers import check_numbers

BYTES_PER_ELEMENT = 4  # FP32 weights and features (seeds/004 §I)

# One dimension of a layer (channels, features, rows, kernel, cells). A million is far past
# any network's layer; larger numbers are typos whose products overflow the cost model's
# floats (an FC of 10^200 features).
MAX_LAYER_DIM = 2**20
Size = Annotated[int, Field(gt=0, le=MAX_LAYER_DIM)]
# Layers of one DAG: the built-in MMMT models have up to 185 (vlocnet); mapping is at
# least quadratic in the count, and 4,096 is far past any network a search can map.
MAX_LAYERS = 4096
Padding = Annotated[int, Field(ge=0, le=MAX_LAYER_DIM)]

LayerType = Literal["conv", "fc", "lstm", "pool", "add", "elementwise", "matmul"]
COMPUTE_TYPES: tuple[str, ...] = ("conv", "fc", "lstm", "matmul")
# (top, left, bottom, right) zero padding of a window layer, ONNX's `pads` order for 2-D.
Pads = tuple[Padding, Padding, Padding, Padding]


class _Layer(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: Name
    modality: Name = "m0"
    deps: tuple[str, ...] = ()
    fused: tuple[str, ...] = ()
    """Operators an importer merged into this layer (e.g. BatchNormalization, Relu), by
    their source name, so a plan can say what it folded."""

    @property
    def is_compute(self) -> bool:
        return self.type in COMPUTE_TYPES  # type: ignore[attr-defined]

    @property
    def weight_elements(self) -> int:
        return 0

    @property
    def out_shape(self) -> tuple[int, ...]:
        raise NotImplementedError

    @property
    def out_elements(self) -> int:
        total = 1
        for dim in self.out_shape:
            total *= dim
        return total


class _Window(_Layer):
    """A sliding window over a feature map: `kernel`, `stride` and `padding` describe a
    square window (CHEF §VI's K and S); `kernel_cols`, `stride_cols` and `pads` override
    the column size, column stride and the four borders when they differ."""

    out_rows: Size
    out_cols: Size
    kernel: Size
    stride: Size = 1
    padding: Padding = 0
    kernel_cols: Size | None = None
    stride_cols: Size | None = None
    pads: Pads | None = None

    @property
    def window(self) -> tuple[int, int]:
        """(rows, cols) of the kernel."""
        return self.kernel, self.kernel_cols or self.kernel

    @property
    def strides(self) -> tuple[int, int]:
        return self.stride, self.stride_cols or self.stride

    @property
    def borders(self) -> Pads:
        """(top, left, bottom, right) padding."""
        return self.pads or (self.padding,) * 4

    @property
    def in_rows(self) -> int:
        top, _, bottom, _ = self.borders
        return (self.out_rows - 1) * self.stride + self.kernel - top - bottom

    @property
    def in_cols(self) -> int:
        _, left, _, right = self.borders
        return (self.out_cols - 1) * self.strides[1] + self.window[1] - left - right


class Conv(_Window):
    """Output channels M, input channels N, output rows R and cols C, kernel K (§VI);
    `groups` splits the channels into independent convolutions (depthwise when it equals
    both channel counts), each output channel reading N / groups input channels."""

    type: Literal["conv"] = "conv"
    out_ch: Size
    in_ch: Size
    groups: Size = 1
    relu: bool = True

    @model_validator(mode="after")
    def _groups_divide_channels(self) -> "Conv":
        if self.in_ch % self.groups or self.out_ch % self.groups:
            raise ValueError(f"groups {self.groups} must divide in_ch {self.in_ch} and "
                             f"out_ch {self.out_ch}")
        return self

    @property
    def macs(self) -> int:
        rows, cols = self.window
        return (self.out_ch * (self.in_ch // self.groups) * rows * cols * self.out_rows
                * self.out_cols)

    @property
    def weight_elements(self) -> int:
        rows, cols = self.window
        return self.out_ch * (self.in_ch // self.groups) * rows * cols + self.out_ch

    @property
    def out_shape(self) -> tuple[int, ...]:
        return (self.out_ch, self.out_rows, self.out_cols)


class FC(_Layer):
    """A fully connected layer; `rows` applies it to each of that many rows of its input
    (the tokens of a (T, E) @ (E, F) product, the steps of an LSTM's output), the same
    weights read for every row."""

    type: Literal["fc"] = "fc"
    out_features: Size
    in_features: Size
    rows: Size = 1
    relu: bool = False

    @property
    def macs(self) -> int:
        return self.rows * self.out_features * self.in_features

    @property
    def weight_elements(self) -> int:
        return self.out_features * self.in_features + self.out_features

    @property
    def out_shape(self) -> tuple[int, ...]:
        return (self.rows, self.out_features) if self.rows > 1 else (self.out_features,)


class LSTM(_Layer):
    """Embedded vector dimension E, hidden states H, cells (time steps) T (§VI). A GRU
    cell has three gates to the LSTM's four; a bidirectional layer runs a second set of
    weights backwards over the cells and concatenates the two hidden states."""

    type: Literal["lstm"] = "lstm"
    embed: Size
    hidden: Size
    cells: Size
    cell: Literal["lstm", "gru"] = "lstm"
    directions: Literal[1, 2] = 1

    @property
    def gates(self) -> int:
        return 4 if self.cell == "lstm" else 3

    @property
    def macs(self) -> int:
        return (self.directions * self.cells * self.gates * self.hidden
                * (self.embed + self.hidden))

    @property
    def weight_elements(self) -> int:  # input and recurrent matrices, two biases
        per_direction = self.gates * self.hidden * (self.embed + self.hidden + 2)
        return self.directions * per_direction

    @property
    def out_shape(self) -> tuple[int, ...]:
        return (self.cells, self.directions * self.hidden)


class Pool(_Window):
    type: Literal["pool"] = "pool"
    kind: Literal["max", "avg"] = "max"
    channels: Size

    @property
    def macs(self) -> int:
        return 0

    @property
    def out_shape(self) -> tuple[int, ...]:
        return (self.channels, self.out_rows, self.out_cols)


class Add(_Layer):
    """Element-wise sum of its dependencies (a residual join), optionally followed by ReLU."""

    type: Literal["add"] = "add"
    shape: tuple[Size, ...] = Field(min_length=1, max_length=8)
    relu: bool = True

    @property
    def macs(self) -> int:
        return 0

    @property
    def out_shape(self) -> tuple[int, ...]:
        return tuple(self.shape)


class Elementwise(_Layer):
    """A layer that touches each element of its output a few times and holds at most a
    per-channel parameter vector: a normalization (BatchNormalization kept apart from a
    conv, LayerNormalization), an activation that does not follow a layer it could fuse
    into, Softmax, LRN, or the product of several inputs (squeeze-and-excitation's Mul,
    broadcasting smaller inputs over `shape`). `op` names the operator."""

    type: Literal["elementwise"] = "elementwise"
    op: Name
    shape: tuple[Size, ...] = Field(min_length=1, max_length=8)
    ops_per_element: Size = 1
    params: int = Field(default=0, ge=0, le=MAX_LAYER_DIM)

    @property
    def macs(self) -> int:
        return 0

    @property
    def weight_elements(self) -> int:
        return self.params

    @property
    def out_shape(self) -> tuple[int, ...]:
        return tuple(self.shape)


class MatMul(_Layer):
    """A product of two computed operands (attention's Q K^T and its weights times V):
    `batch` independent (rows x inner) @ (inner x cols) products, no stored weights."""

    type: Literal["matmul"] = "matmul"
    batch: Size = 1
    rows: Size
    inner: Size
    cols: Size

    @property
    def macs(self) -> int:
        return self.batch * self.rows * self.inner * self.cols

    @property
    def out_shape(self) -> tuple[int, ...]:
        return (self.batch, self.rows, self.cols) if self.batch > 1 else (self.rows, self.cols)


Layer = Annotated[Conv | FC | LSTM | Pool | Add | Elementwise | MatMul,
                  Field(discriminator="type")]
_LAYER_TYPES: dict[str, type[_Layer]] = {"conv": Conv, "fc": FC, "lstm": LSTM, "pool": Pool,
                                         "add": Add, "elementwise": Elementwise,
                                         "matmul": MatMul}


def _product(shape: tuple[int, ...]) -> int:
    total = 1
    for dim in shape:
        total *= dim
    return total


def conv_out(size: int, kernel: int, stride: int, padding: int) -> int:
    """Output size of a convolution or pooling window (floor, as torch computes it)."""
    return (size + 2 * padding - kernel) // stride + 1


class ModelDAG(BaseModel):
    """A validated MMMT model: layers in any order, their dependencies forming a DAG."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    layers: tuple[Layer, ...] = Field(min_length=1, max_length=MAX_LAYERS)
    inputs: dict[str, tuple[Size, ...]] = Field(default_factory=dict)
    """Shape of the external input of each layer without dependencies (default: the
    smallest input its parameters imply)."""
    folded: dict[str, int] = Field(default_factory=dict)
    """Operators an importer evaluated away as constants (weight subgraphs: Constant,
    ConstantOfShape, Identity, Cast, ...), counted by type."""

    @cached_property
    def by_name(self) -> dict[str, _Layer]:
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

    def input_shape(self, layer: _Layer) -> tuple[int, ...]:
        """What flows into `layer`: its dependencies concatenated, or its external input."""
        if not layer.deps:
            return self.inputs.get(layer.name) or _implied_input(layer)
        shapes = [self.by_name[d].out_shape for d in layer.deps]
        if isinstance(layer, Conv | Pool) and all(len(s) == 3 for s in shapes):
            return (sum(s[0] for s in shapes), *shapes[0][1:])
        return (sum(_product(s) for s in shapes),)

    def in_elements(self, layer: _Layer) -> int:
        if isinstance(layer, Add):
            return len(layer.deps) * layer.out_elements if layer.deps else layer.out_elements
        return _product(self.input_shape(layer))


def _implied_input(layer: _Layer) -> tuple[int, ...]:
    if isinstance(layer, Conv):
        return (layer.in_ch, layer.in_rows, layer.in_cols)
    if isinstance(layer, Pool):
        return (layer.channels, layer.in_rows, layer.in_cols)
    if isinstance(layer, FC):
        return (layer.rows, layer.in_features) if layer.rows > 1 else (layer.in_features,)
    if isinstance(layer, LSTM):
        return (layer.cells * layer.embed,)
    if isinstance(layer, MatMul):
        return (layer.batch * layer.inner * (layer.rows + layer.cols),)
    return tuple(layer.out_shape)


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


def torch_problem(dag: ModelDAG, layer: _Layer) -> tuple[str, str | None]:
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


def _window_problem(dag: ModelDAG, layer: _Layer) -> str | None:
    """A first conv or pool layer, its input implied by its window, whose padding leaves no
    input: (R-1)S + K - 2P < 1. (With dependencies or a given input, the shape check
    compares the real input's output with the declared one.)"""
    if not isinstance(layer, Conv | Pool) or layer.deps or layer.name in dag.inputs:
        return None
    rows, cols = _implied_input(layer)[1:]
    if min(rows, cols) < 1:
        return (f"padding {layer.padding} around a {layer.kernel}-wide kernel leaves an "
                f"input of {rows}x{cols} for a {layer.out_rows}x{layer.out_cols} output")
    return None


def _shape_problem(dag: ModelDAG, layer: _Layer) -> str | None:
    if not layer.deps and layer.name not in dag.inputs:
        return None
    got = dag.input_shape(layer)
    if isinstance(layer, Add):
        shapes = {dag.by_name[d].out_shape for d in layer.deps}
        if {_product(s) for s in shapes} != {_product(layer.shape)}:
            return f"adds inputs of shapes {sorted(shapes)}, declared shape {layer.shape}"
        return None
    if isinstance(layer, Elementwise | MatMul):
        sizes = [_product(dag.by_name[d].out_shape) for d in layer.deps] or [_product(got)]
        return _operand_problem(layer, sizes)
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
    expected = _product(_implied_input(layer))
    if _product(got) != expected:
        return f"expects {expected} input features, its input gives {_product(got)}"
    return None


def _operand_problem(layer: Elementwise | MatMul, sizes: list[int]) -> str | None:
    """A MatMul's inputs hold its two operands, (batch, rows, inner) and (batch, inner,
    cols): together, one each, or one layer both (x @ x^T). An element-wise layer's inputs
    broadcast over `shape` (each a divisor of its elements, the largest all of them:
    squeeze-and-excitation's (C,1,1) times (C,H,W)), or join to it (with up to `params`
    stored elements: a class token), or it selects or reduces part of one input (a
    Gather, a Slice, a mean). `sizes`: the elements of each input."""
    if isinstance(layer, MatMul):
        operands = [layer.batch * layer.rows * layer.inner,
                    layer.batch * layer.inner * layer.cols]
        want = sum(operands)
        if sum(sizes) != want and sorted(sizes) != sorted(operands) and not (
                len(sizes) == 1 and sizes[0] in operands):
            return (f"multiplies {layer.batch} x ({layer.rows}x{layer.inner} @ "
                    f"{layer.inner}x{layer.cols}) = {want} operand elements, its inputs "
                    f"give {sum(sizes)}")
        return None
    whole = _product(layer.shape)
    broadcast = max(sizes) == whole and not any(whole % s for s in sizes)
    joins = sum(sizes) <= whole <= sum(sizes) + layer.params
    selects = len(sizes) == 1 and sizes[0] > whole
    if not (broadcast or joins or selects):
        return (f"broadcasts inputs of {sorted(sizes)} elements over shape {layer.shape} "
                f"({whole} elements): the largest must equal it, the others divide it (or "
                f"they join to it with its {layer.params} stored elements, or it selects "
                "from one larger input)")
    return None


def dag_from_dict(data: dict, source: str) -> ModelDAG:
    layers = data.get("layers")
    for i, layer in enumerate(layers if isinstance(layers, list) else []):
        name = layer.get("type") if isinstance(layer, dict) else None
        kind = _LAYER_TYPES.get(name) if isinstance(name, str) else None
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


register_family(Family("layer-dag-yaml", "model",
                       matches=lambda text: Path(text).suffix in {".yaml", ".yml"},
                       load=lambda text: load_dag(Path(text)),
                       choices=lambda: ("<layer-DAG YAML>",), order=40))
