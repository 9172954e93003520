"""The layers of a layer DAG (seeds/004 §VI, *Definition of the MMMT model*): Conv, FC
and LSTM layers, plus the pooling, element-wise and operand-by-operand layers backbones and
attention blocks need; each knows its MACs, weights and output shape. The DAG that joins
them, its checks and its files are dag.py's.

All data is FP32 (§I: five DSPs per FP32 MAC), so every byte count is four bytes per
element.
"""

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from archipelago.names import Name

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


class BaseLayer(BaseModel):
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


class _Window(BaseLayer):
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


class FC(BaseLayer):
    """A fully connected layer; with `rows` > 1 the same weights apply to each of `rows`
    input vectors (a transformer's tokens, an LSTM's time steps: torch's Linear on a
    (T, E) input), the output holding `rows` x `out_features` values."""

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


class LSTM(BaseLayer):
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


class Add(BaseLayer):
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


class Elementwise(BaseLayer):
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


class MatMul(BaseLayer):
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
LAYER_TYPES: dict[str, type[BaseLayer]] = {"conv": Conv, "fc": FC, "lstm": LSTM, "pool": Pool,
                                         "add": Add, "elementwise": Elementwise,
                                         "matmul": MatMul}


def product(shape: tuple[int, ...]) -> int:
    total = 1
    for dim in shape:
        total *= dim
    return total


def conv_out(size: int, kernel: int, stride: int, padding: int) -> int:
    """Output size of a convolution or pooling window (floor, as torch computes it)."""
    return (size + 2 * padding - kernel) // stride + 1


def implied_input(layer: BaseLayer) -> tuple[int, ...]:
    """The smallest input a layer without dependencies reads, as its parameters imply."""
    if isinstance(layer, Conv):
        return (layer.in_ch, layer.in_rows, layer.in_cols)
    if isinstance(layer, Pool):
        return (layer.channels, layer.in_rows, layer.in_cols)
    if isinstance(layer, FC):
        return (layer.rows * layer.in_features,)
    if isinstance(layer, LSTM):
        return (layer.cells * layer.embed,)
    if isinstance(layer, MatMul):  # both operands, flattened
        return (layer.batch * layer.inner * (layer.rows + layer.cols),)
    return tuple(layer.out_shape)
