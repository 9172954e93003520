"""CHEF accelerator IPs (seeds/004 §III, §VI): templates as data, each with a resource model
(DSP, BRAM, DRAM bytes per layer) and a performance model (compute overlapped with off-chip
traffic, refs [23], [24] for Conv/FC and [26] for LSTM).

Conv layer of M output / N input channels, R x C outputs, kernel K, stride S on a tn x tm IP
with tr x tc output tiles (the loop tiling of ref [23]):
    cycles  = ceil(M/tm) ceil(N/tn) ceil(R/tr) ceil(C/tc) * tr tc K^2        (II = 1)
    traffic = per output tile and input-channel step, an input tile tn x tr' x tc'
              (tr' = (tr-1)S + K) and a weight tile tm x tn x K^2; outputs written once
    latency = max(cycles / f, traffic / BW_DRAM)                  (double buffering)
FC is the same with R = C = K = 1. Pooling and element-wise layers run on any IP's output
stage at tm lanes (P/4 lanes on the LSTM IP), also bounded by their DRAM traffic.
"""

from dataclasses import dataclass
from functools import cache, cached_property
from importlib import resources
from math import ceil
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from archipelago.engines.base import memory_blocks
from archipelago.errors import ConfigError
from archipelago.hardware.device import Resources
from archipelago.models.dag import BYTES_PER_ELEMENT, FC, LSTM, Add, Conv, ModelDAG, Pool
from archipelago.safe_read import load_yaml

DSP_PER_FP32_MAC = 5  # seeds/004 §I: "five DSPs conduct a multiply-accumulate operation"
WORD_BITS = 32  # FP32 features and weights
# A buffer this shallow is built from LUTs by Vivado, not BRAM (UG573/UG901 ram_style
# "distributed" is chosen for small arrays); the Conv IP's per-(tm, tn) weight banks hold
# k_max^2 words and are taken as LUTRAM.
LUTRAM_MAX_WORDS = 64
BRAM36_BITS = 36 * 1024  # UG573: a RAMB36E2 holds 36 Kb


class IPTemplate(BaseModel):
    """One candidate IP: its type and parallelism; resources follow from them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    type: Literal["conv", "fc", "lstm"]
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
        return self.parallel if self.type == "lstm" else self.tn * self.tm

    @cached_property
    def resources(self) -> Resources:
        """Five DSPs per MAC lane; BRAM36 blocks as `_bram` counts them."""
        return Resources(dsp=DSP_PER_FP32_MAC * self.macs_per_cycle, bram=self._bram())

    def _bram(self) -> int:
        """BRAM36 blocks: double-buffered input (tn banks), output (tm banks) tiles for
        Conv/FC; the weight buffer and h/c state vectors for LSTM."""
        if self.type == "lstm":  # weights packed into full 36 Kb blocks, plus h and c
            return ceil(self.weight_buffer_words * WORD_BITS / BRAM36_BITS) + 2
        in_depth = ((self.tr - 1) + self.k_max) * ((self.tc - 1) + self.k_max)
        banks = (self.tn * memory_blocks(WORD_BITS, in_depth).bram
                 + self.tm * memory_blocks(WORD_BITS, self.tr * self.tc).bram)
        weights = 0 if self.k_max ** 2 <= LUTRAM_MAX_WORDS else \
            self.tn * self.tm * memory_blocks(WORD_BITS, self.k_max ** 2).bram
        return 2 * (banks + weights)

    def runs(self, layer) -> bool:
        """Compute layers need an IP of their type; pooling and adds run on any IP."""
        return layer.type == self.type or not layer.is_compute

    @property
    def lanes(self) -> int:
        return max(1, self.parallel // 4) if self.type == "lstm" else self.tm


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


def _conv_cost(ip: IPTemplate, layer: Conv, freq_hz: float, dram_Bps: float) -> LayerCost:
    m, n, k, s = ip.tm, ip.tn, layer.kernel, layer.stride
    m_steps, n_steps = ceil(layer.out_ch / m), ceil(layer.in_ch / n)
    tiles = ceil(layer.out_rows / ip.tr) * ceil(layer.out_cols / ip.tc)
    cycles = m_steps * n_steps * tiles * ip.tr * ip.tc * k * k
    in_tile = n * ((ip.tr - 1) * s + k) * ((ip.tc - 1) * s + k)
    words = (m_steps * n_steps * tiles * (in_tile + m * n * k * k)
             + layer.out_ch * layer.out_rows * layer.out_cols)
    return LayerCost(cycles / freq_hz, words * BYTES_PER_ELEMENT / dram_Bps)


def _fc_cost(ip: IPTemplate, layer: FC, freq_hz: float, dram_Bps: float) -> LayerCost:
    m_steps, n_steps = ceil(layer.out_features / ip.tm), ceil(layer.in_features / ip.tn)
    words = m_steps * layer.in_features + layer.weight_elements + layer.out_features
    return LayerCost(m_steps * n_steps / freq_hz, words * BYTES_PER_ELEMENT / dram_Bps)


def _lstm_cost(ip: IPTemplate, layer: LSTM, freq_hz: float, dram_Bps: float) -> LayerCost:
    """Ref [26]: the four gate matrix-vector products of a cell run on `parallel` MACs;
    cells are sequential (h_t feeds cell t+1). Weights stay on chip when the buffer holds
    them, else they stream from DRAM for every cell."""
    cell_macs = 4 * layer.hidden * (layer.embed + layer.hidden)
    cycles = layer.cells * ceil(cell_macs / ip.parallel)
    weight_reads = 1 if layer.weight_elements <= ip.weight_buffer_words else layer.cells
    words = (weight_reads * layer.weight_elements
             + layer.cells * (layer.embed + layer.hidden))
    return LayerCost(cycles / freq_hz, words * BYTES_PER_ELEMENT / dram_Bps)


def _light_cost(ip: IPTemplate, dag: ModelDAG, layer: Pool | Add, freq_hz: float,
                dram_Bps: float) -> LayerCost:
    window = layer.kernel ** 2 if isinstance(layer, Pool) else max(1, len(layer.deps))
    cycles = ceil(layer.out_elements / ip.lanes) * window
    words = dag.in_elements(layer) + layer.out_elements
    return LayerCost(cycles / freq_hz, words * BYTES_PER_ELEMENT / dram_Bps)


def layer_cost(ip: IPTemplate, dag: ModelDAG, layer, freq_hz: float,
               dram_Bps: float) -> LayerCost:
    """Latency of `layer` on `ip` clocked at `freq_hz` with `dram_Bps` of DRAM bandwidth,
    its inputs already in its DRAM bank (transfers are the scheduler's)."""
    assert ip.runs(layer), (ip.name, layer.name)
    if isinstance(layer, Conv):
        return _conv_cost(ip, layer, freq_hz, dram_Bps)
    if isinstance(layer, FC):
        return _fc_cost(ip, layer, freq_hz, dram_Bps)
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
    return parse_ips(yaml.safe_load(text), "ip_templates.yaml")


def load_ips(path: Path) -> dict[str, IPTemplate]:
    return parse_ips(load_yaml(path, "ips"), str(path))
