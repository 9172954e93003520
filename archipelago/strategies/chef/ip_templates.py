"""CHEF accelerator IPs (seeds/004 §III, §VI): templates as data, each with a resource model
(DSP, BRAM, DRAM bytes per layer) and a performance model (compute overlapped with off-chip
traffic, refs [23], [24] for Conv/FC and [26] for LSTM), plus a depthwise IP.

Conv layer of M output / N input channels in G groups, R x C outputs, a Kr x Kc kernel at
strides Sr, Sc on a tn x tm IP with tr x tc output tiles (the loop tiling of ref [23]):
    passes  = ceil(G/p) ceil((M/G)/tm) ceil((N/G)/tn), p = max(1, min(tm // (M/G),
              tn // (N/G))) groups packed side by side in one tile (block-diagonal weights)
    cycles  = passes * ceil(R/tr) ceil(C/tc) * tr tc Kr Kc                      (II = 1)
    traffic = per pass and output tile, an input tile tn x tr' x tc' (tr' = (tr-1)Sr + Kr,
              tc' = (tc-1)Sc + Kc) and a weight tile tm x tn x Kr Kc; outputs written once
    latency = max(cycles / f, traffic / BW_DRAM)                  (double buffering)
G = 1 is ref [23]'s loop nest as published. A grouped conv is G independent convolutions of
N/G -> M/G channels; when a group is narrower than the IP (M/G < tm or N/G < tn) ref [23]'s
datapath is kept and the weight tile is loaded block-diagonal, p groups per pass, the other
tm x tn lanes multiplying zeros: useful MACs per cycle fall to p (M/G)(N/G) of tm tn. A
depthwise conv (G = M = N) on the Conv IP thus runs min(tm, tn) channels per pass, one of a
lane's tn multipliers busy: the Conv IP runs depthwise layers when no depthwise IP is
deployed, at that utilization, instead of refusing them. Padding (symmetric or not) enters
only through the layer's shape: each tile reads a full tr' x tc' input window, border zeros
included.
Depthwise IP (`dwconv`, after the depthwise engines of FPGA MobileNet accelerators, e.g.
L. Bai, Y. Zhao, X. Huang, "A CNN accelerator on FPGA using depthwise separable
convolution", IEEE TCAS-II 65(10), 2018, p. 1415 ff.: one K x K multiplier window per channel fed
by line buffers): tn channel lanes, each a k_max x k_max window of FP32 MACs fed by
k_max - 1 line buffers that take one input pixel per cycle; a kernel wider than k_max runs
as ceil(Kr/k_max) ceil(Kc/k_max) sub-windows accumulated in the output tile:
    cycles  = ceil(N/tn) ceil(R/tr) ceil(C/tc) * subwindows * tr'' tc''
              (tr'' = (tr-1)Sr + min(Kr, k_max): the input pixels a tile streams)
    traffic = per channel step and tile, tn x tr' x tc' inputs and tn Kr Kc weights;
              outputs written once
FC is the Conv formula with R = C = Kr = Kc = 1. A MatMul (batch B of rows x inner @
inner x cols, both operands computed) runs on the FC IP with its second operand in the
weight role, streamed from DRAM instead of stored: each tm x tn tile of it is loaded once
and all `rows` row vectors pass through it (weight-stationary):
    cycles  = B * rows * ceil(cols/tm) ceil(inner/tn)
    traffic = B (ceil(cols/tm) rows inner + inner cols + rows cols)
LSTM and GRU cells (4 and 3 gate matrix-vector products) run on ref [26]'s unified engine,
which executes all gates of a cell at once on one MAC array. A bidirectional layer is two
independent recurrences: ref [26] has one such engine, so they run on it one after the
other (interleaving them cell by cell costs the same cycles at II = 1), both directions'
weights in its one weight buffer when they fit, else streamed per cell.
Pooling (a Kr x Kc window per output), adds and element-wise layers (ops_per_element per
output) run on any IP's output stage at its lanes (tm; tn on the depthwise IP; P/4 on the
LSTM IP), bounded by the DRAM traffic of all their inputs, output and parameters.
"""

from dataclasses import dataclass
from functools import cache, cached_property
from importlib import resources
from math import ceil
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from archipelago.engines.base import memory_blocks
from archipelago.errors import ConfigError
from archipelago.hardware.device import Resources
from archipelago.models.dag import (
    BYTES_PER_ELEMENT,
    FC,
    LSTM,
    Add,
    Conv,
    Elementwise,
    MatMul,
    ModelDAG,
    Pool,
)
from archipelago.safe_read import load_yaml
from archipelago.yaml_loader import load_packaged

DSP_PER_FP32_MAC = 5  # seeds/004 §I: "five DSPs conduct a multiply-accumulate operation"
WORD_BITS = 32  # FP32 features and weights
# A buffer this shallow is built from LUTs by Vivado, not BRAM (UG573/UG901 ram_style
# "distributed" is chosen for small arrays); the Conv IP's per-(tm, tn) weight banks hold
# k_max^2 words and are taken as LUTRAM, as are the depthwise IP's short line buffers.
LUTRAM_MAX_WORDS = 64
BRAM36_BITS = 36 * 1024  # UG573: a RAMB36E2 holds 36 Kb
# The depthwise IP's tiles are sized for stride 2: the depthwise layers of MobileNetV1-V3
# and EfficientNet use stride 1 or 2 (their papers' architecture tables).
DW_MAX_STRIDE = 2


def is_depthwise(layer) -> bool:
    """One input and one output channel per group (G = N = M > 1)."""
    return isinstance(layer, Conv) and 1 < layer.groups == layer.in_ch == layer.out_ch


def ip_types(layer) -> tuple[str, ...]:
    """The IP types that run a compute layer, the one built for it first: a depthwise conv
    prefers the depthwise IP and falls back to the Conv IP; a MatMul runs on the FC IP."""
    if is_depthwise(layer):
        return ("dwconv", "conv")
    if isinstance(layer, MatMul):
        return ("fc",)
    return (layer.type,)


def ip_type(layer, have: set[str]) -> str:
    """The IP type a compute layer counts under when the candidates' types are `have`: the
    one built for it, or the first fallback among `have` (else the one built for it)."""
    types = ip_types(layer)
    return next((t for t in types if t in have), types[0])


class IPTemplate(BaseModel):
    """One candidate IP: its type and parallelism; resources follow from them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    type: Literal["conv", "dwconv", "fc", "lstm"]
    # Upper bounds far past any FPGA (a U250 has 12,288 DSPs, 2,688 BRAM36: DS962, XMP103,
    # as in hardware/catalog.yaml): typos, not designs; they keep the resource model small.
    tn: int = Field(default=1, gt=0, le=4096)
    tm: int = Field(default=1, gt=0, le=4096)
    tr: int = Field(default=1, gt=0, le=4096)
    tc: int = Field(default=1, gt=0, le=4096)
    k_max: int = Field(default=1, gt=0, le=256)
    parallel: int = Field(default=1, gt=0, le=2**16)
    weight_buffer_words: int = Field(default=0, ge=0, le=2**32)

    @property
    def macs_per_cycle(self) -> int:
        if self.type == "lstm":
            return self.parallel
        if self.type == "dwconv":  # a k_max x k_max window per channel lane
            return self.tn * self.k_max ** 2
        return self.tn * self.tm

    @cached_property
    def resources(self) -> Resources:
        """Five DSPs per MAC lane; BRAM36 blocks as `_bram` counts them."""
        return Resources(dsp=DSP_PER_FP32_MAC * self.macs_per_cycle, bram=self._bram())

    def _bram(self) -> int:
        """BRAM36 blocks: double-buffered input (tn banks), output (tm banks) tiles for
        Conv/FC; the weight buffer and h/c state vectors for LSTM; for the depthwise IP,
        double-buffered input and output tiles per channel lane plus its k_max - 1 line
        buffers, one input-tile row each (UG573 block counts)."""
        if self.type == "lstm":  # weights packed into full 36 Kb blocks, plus h and c
            return ceil(self.weight_buffer_words * WORD_BITS / BRAM36_BITS) + 2
        if self.type == "dwconv":
            width = (self.tc - 1) * DW_MAX_STRIDE + self.k_max
            in_depth = ((self.tr - 1) * DW_MAX_STRIDE + self.k_max) * width
            tiles = self.tn * (memory_blocks(WORD_BITS, in_depth).bram
                               + memory_blocks(WORD_BITS, self.tr * self.tc).bram)
            line = 0 if width <= LUTRAM_MAX_WORDS else memory_blocks(WORD_BITS, width).bram
            return 2 * (tiles + self._weight_blocks(self.tn)) + self.tn * (self.k_max - 1) * line
        in_depth = ((self.tr - 1) + self.k_max) * ((self.tc - 1) + self.k_max)
        banks = (self.tn * memory_blocks(WORD_BITS, in_depth).bram
                 + self.tm * memory_blocks(WORD_BITS, self.tr * self.tc).bram)
        return 2 * (banks + self._weight_blocks(self.tn * self.tm))

    def _weight_blocks(self, banks: int) -> int:
        """`banks` weight banks of k_max^2 words: LUTRAM when that shallow, else BRAM."""
        if self.k_max ** 2 <= LUTRAM_MAX_WORDS:
            return 0
        return banks * memory_blocks(WORD_BITS, self.k_max ** 2).bram

    def runs(self, layer) -> bool:
        """Compute layers need an IP of a type that runs them (`ip_types`); pooling, adds
        and element-wise layers run on any IP."""
        return not layer.is_compute or self.type in ip_types(layer)

    @property
    def lanes(self) -> int:
        if self.type == "lstm":
            return max(1, self.parallel // 4)
        return self.tn if self.type == "dwconv" else self.tm


@dataclass(frozen=True)
class LayerCost:
    compute_s: float
    memory_s: float

    @property
    def latency_s(self) -> float:
        return max(self.compute_s, self.memory_s)


def dram_bytes(dag: ModelDAG, layer) -> int:
    """What a layer keeps in its FPGA's DRAM: its weights and its output features (CHEF
    stores all data in local DRAM, §V-A)."""
    return (layer.weight_elements + layer.out_elements) * BYTES_PER_ELEMENT


def _input_tile(layer: Conv, tr: int, tc: int) -> tuple[int, int]:
    """Rows and columns of input one tr x tc output tile reads: (t-1)S + K per axis."""
    (kr, kc), (sr, sc) = layer.window, layer.strides
    return (tr - 1) * sr + kr, (tc - 1) * sc + kc


def _conv_cost(ip: IPTemplate, layer: Conv, freq_hz: float, dram_Bps: float) -> LayerCost:
    m, n, (kr, kc) = ip.tm, ip.tn, layer.window
    group_m, group_n = layer.out_ch // layer.groups, layer.in_ch // layer.groups
    packed = max(1, min(m // group_m, n // group_n))  # groups side by side in one pass
    passes = (ceil(layer.groups / packed) * ceil(group_m / m) * ceil(group_n / n))
    tiles = ceil(layer.out_rows / ip.tr) * ceil(layer.out_cols / ip.tc)
    cycles = passes * tiles * ip.tr * ip.tc * kr * kc
    rows, cols = _input_tile(layer, ip.tr, ip.tc)
    words = (passes * tiles * (n * rows * cols + m * n * kr * kc)
             + layer.out_ch * layer.out_rows * layer.out_cols)
    return LayerCost(cycles / freq_hz, words * BYTES_PER_ELEMENT / dram_Bps)


def _dwconv_cost(ip: IPTemplate, layer: Conv, freq_hz: float, dram_Bps: float) -> LayerCost:
    k, (kr, kc), (sr, sc) = ip.k_max, layer.window, layer.strides
    steps = ceil(layer.in_ch / ip.tn)
    tiles = ceil(layer.out_rows / ip.tr) * ceil(layer.out_cols / ip.tc)
    streamed = ((ip.tr - 1) * sr + min(kr, k)) * ((ip.tc - 1) * sc + min(kc, k))
    cycles = steps * tiles * ceil(kr / k) * ceil(kc / k) * streamed
    rows, cols = _input_tile(layer, ip.tr, ip.tc)
    words = (steps * tiles * ip.tn * (rows * cols + kr * kc)
             + layer.out_ch * layer.out_rows * layer.out_cols)
    return LayerCost(cycles / freq_hz, words * BYTES_PER_ELEMENT / dram_Bps)


def _fc_cost(ip: IPTemplate, layer: FC, freq_hz: float, dram_Bps: float) -> LayerCost:
    """Each tm x tn weight tile, loaded once, serves all `rows` token vectors (a Linear
    applied per token); the input rows are re-read for every block of tm outputs."""
    m_steps, n_steps = ceil(layer.out_features / ip.tm), ceil(layer.in_features / ip.tn)
    words = (m_steps * layer.rows * layer.in_features + layer.weight_elements
             + layer.rows * layer.out_features)
    cycles = layer.rows * m_steps * n_steps
    return LayerCost(cycles / freq_hz, words * BYTES_PER_ELEMENT / dram_Bps)


def _matmul_cost(ip: IPTemplate, layer: MatMul, freq_hz: float,
                 dram_Bps: float) -> LayerCost:
    """The FC engine with the right operand streamed in the weight role (module doc)."""
    m_steps, n_steps = ceil(layer.cols / ip.tm), ceil(layer.inner / ip.tn)
    cycles = layer.batch * layer.rows * m_steps * n_steps
    words = layer.batch * (m_steps * layer.rows * layer.inner + layer.inner * layer.cols
                           + layer.rows * layer.cols)
    return LayerCost(cycles / freq_hz, words * BYTES_PER_ELEMENT / dram_Bps)


def _lstm_cost(ip: IPTemplate, layer: LSTM, freq_hz: float, dram_Bps: float) -> LayerCost:
    """Ref [26]: the gate matrix-vector products of a cell (4 LSTM, 3 GRU) run on
    `parallel` MACs; cells are sequential (h_t feeds cell t+1), and so are the two
    directions of a bidirectional layer. Weights stay on chip when the buffer holds them
    (both directions), else they stream from DRAM for every cell."""
    cell_macs = layer.gates * layer.hidden * (layer.embed + layer.hidden)
    cells = layer.directions * layer.cells
    cycles = cells * ceil(cell_macs / ip.parallel)
    weight_reads = 1 if layer.weight_elements <= ip.weight_buffer_words else layer.cells
    words = weight_reads * layer.weight_elements + cells * (layer.embed + layer.hidden)
    return LayerCost(cycles / freq_hz, words * BYTES_PER_ELEMENT / dram_Bps)


def _light_cost(ip: IPTemplate, dag: ModelDAG, layer: Pool | Add | Elementwise,
                freq_hz: float, dram_Bps: float) -> LayerCost:
    if isinstance(layer, Pool):
        rows, cols = layer.window
        per_output = rows * cols
    elif isinstance(layer, Elementwise):
        per_output = layer.ops_per_element
    else:
        per_output = max(1, len(layer.deps))
    cycles = ceil(layer.out_elements / ip.lanes) * per_output
    words = dag.in_elements(layer) + layer.out_elements + layer.weight_elements
    return LayerCost(cycles / freq_hz, words * BYTES_PER_ELEMENT / dram_Bps)


def layer_cost(ip: IPTemplate, dag: ModelDAG, layer, freq_hz: float,
               dram_Bps: float) -> LayerCost:
    """Latency of `layer` on `ip` clocked at `freq_hz` with `dram_Bps` of DRAM bandwidth,
    its inputs already in its DRAM bank (transfers are the scheduler's)."""
    assert ip.runs(layer), (ip.name, layer.name)
    if isinstance(layer, Conv):
        cost = _dwconv_cost if ip.type == "dwconv" else _conv_cost
        return cost(ip, layer, freq_hz, dram_Bps)
    if isinstance(layer, FC):
        return _fc_cost(ip, layer, freq_hz, dram_Bps)
    if isinstance(layer, MatMul):
        return _matmul_cost(ip, layer, freq_hz, dram_Bps)
    if isinstance(layer, LSTM):
        return _lstm_cost(ip, layer, freq_hz, dram_Bps)
    return _light_cost(ip, dag, layer, freq_hz, dram_Bps)


class _IPFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    ips: dict[str, dict] = Field(min_length=1)


def parse_ips(data: object, source: str) -> dict[str, IPTemplate]:
    """The `ips` table of an IP file; an error names the IP and field (`ips.c.k_max`)."""
    if not isinstance(data, dict):
        raise ConfigError(source, "ips", "top level must be a mapping with an 'ips' table")
    try:
        table = _IPFile.model_validate(data).ips
    except ValidationError as err:
        raise ConfigError.from_validation(source, err) from None
    ips = {}
    for name, spec in table.items():
        try:
            # strict: `tm: true` or `tm: "16"` is an error naming the field, not 1 or 16
            ips[name] = IPTemplate.model_validate({**spec, "name": name}, strict=True)
        except ValidationError as err:
            raise ConfigError.from_validation(source, err, prefix=f"ips.{name}") from None
    return ips


@cache
def builtin_ips() -> dict[str, IPTemplate]:
    text = resources.files("archipelago.strategies.chef").joinpath("ip_templates.yaml").read_text()
    return parse_ips(load_packaged(text), "ip_templates.yaml")


def load_ips(path: Path) -> dict[str, IPTemplate]:
    return parse_ips(load_yaml(path, "ips"), str(path))
