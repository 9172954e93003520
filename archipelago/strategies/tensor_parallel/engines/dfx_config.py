"""A DFX core's design parameters (seeds/001 §V-B, §VI): one core's (`DFXConfig`), or many
cores' at once (`DFXVariants`: a design search's candidates, which the engine, dfx.py, costs
in one pass). What the engine derives from them (`DFXCore`) is one set of formulas for both:
numbers for one core, arrays with the variants on their first axis for many."""

from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import ClassVar

import numpy as np
from pydantic import Field, field_validator, model_validator

from archipelago.engines.base import (
    FP16_ADD_CYCLES,
    FP16_MUL_CYCLES,
    MAX_BANDWIDTH_BPS,
    MAX_BITS,
    MAX_CHANNELS,
    MAX_CLOCK_HZ,
    MAX_DIM,
    MAX_TOKENS,
    MIN_BANDWIDTH_BPS,
    MIN_CLOCK_HZ,
    EngineConfig,
    Number,
    floor_log2,
    least,
    most,
)
from archipelago.number_formats import NumberFormat, number_format, refuse_unless

# The formats DFX's core runs (number_formats.py): its MFU, VFU and SFUs are FP16 operators
# (seeds/001 §V-C, §IV-B "FP16 model parameters"), so activations stay FP16; INT4 weights
# and an INT8 KV cache can be stored narrower and widened to FP16 in the tile stream
# (widening.py) before the MFU. 8-bit activations would need an integer MFU DFX lacks.
DFX_FORMATS = ("fp16", "fp16-kv8", "w4a16", "w4a16-kv8")
DFX_WHY = "computes in FP16 (seeds/001 §V-C), so its activations stay 16-bit"


# The parameters a design search varies (space.py's genes decode to them): `DFXVariants`
# holds each as an array over the variants, and the engine costs them all in one pass.
VARIED = ("d", "l", "window_tokens", "channel_bits")


class DFXCore:
    """The figures a core's parameters set, for `DFXConfig` (numbers) and `DFXVariants`
    (arrays over variants where it varies them): its attributes `d`, `l`, `clock_hz`,
    `hbm_channels`, `channel_bits`, `data_bits` and `precision` are the parameters."""

    @property
    def format(self) -> NumberFormat:
        return number_format(self.precision)

    @property
    def hbm_values_per_cycle(self) -> Number:
        return self.hbm_channels * self.channel_bits // self.data_bits

    def stream_values_per_cycle(self, stored_bytes: float) -> Number:
        """Values of `stored_bytes` each the 32 x 512-bit stream brings a cycle: the FP16
        values of §V-B, or a narrower format's more."""
        if stored_bytes * 8 == self.data_bits:
            return self.hbm_values_per_cycle
        return self.hbm_channels * self.channel_bits / (8 * stored_bytes)

    def row_values_per_cycle(self, memory_Bps: float) -> Number:
        """Table rows reach the DMA through one channel-wide port (§V-B), from one DDR
        channel or one HBM pseudo-channel at `memory_Bps`."""
        port = self.channel_bits / self.data_bits
        return least(memory_Bps / self.clock_hz / (self.data_bits / 8), port)

    @property
    def tile_feed_cycles(self) -> Number:
        """Cycles to bring one d x l weight tile from HBM: one, unless the tile is wider
        than the 32 x 512-bit stream."""
        return self.feed_cycles(self.format.weight_bytes)

    def feed_cycles(self, stored_bytes: float) -> Number:
        """Cycles to bring one d x l tile of `stored_bytes` values from HBM."""
        return most(1.0, self.d * self.l / self.stream_values_per_cycle(stored_bytes))

    @property
    def zigzag_tiles(self) -> Number:
        """Tiles across one row of a d x d zigzag block (§V-B, Fig. 9)."""
        return most(1, self.d // self.l)

    @property
    def tree_cycles(self) -> Number:
        """A d-input FP16 adder tree (MFU lanes and SFU_V accumulation)."""
        return floor_log2(self.d) * FP16_ADD_CYCLES

    @property
    def mfu_latency(self) -> Number:
        """Multiplier, adder tree, then the scalar accumulate/bias add (§V-C)."""
        return FP16_MUL_CYCLES + self.tree_cycles + FP16_ADD_CYCLES


class DFXConfig(DFXCore, EngineConfig):
    """Design parameters of one DFX core."""

    # compute, dma and router instructions (§IV-C): `archi build` compiles programs
    # (dfx_program/), `archi simulate` runs them.
    instruction_set: ClassVar[str | None] = "seeds/001 §IV-C"

    # tile dimension = adder-tree inputs per lane (seeds/001 §V-B)
    d: int = Field(64, ge=2, le=MAX_DIM)
    l: int = Field(16, ge=1, le=MAX_DIM)  # noqa: E741  lanes of the MFU (seeds/001 §V-B)
    clock_hz: float = Field(200e6, ge=MIN_CLOCK_HZ, le=MAX_CLOCK_HZ)  # kernel clock (seeds/001 §VI)
    # DMA reads all 32 HBM channels (seeds/001 §V-B)
    hbm_channels: int = Field(32, ge=1, le=MAX_CHANNELS)
    # per-channel data width at the kernel clock (§V-B)
    channel_bits: int = Field(512, ge=1, le=MAX_BITS)
    data_bits: int = Field(16, ge=1, le=64)  # FP16 (seeds/001 §IV-B)
    # the stored format of weights and KV cache (`--precision`): one of DFX_FORMATS
    precision: str = Field("fp16", max_length=40)
    # one DDR channel: half of the 38 GB/s of two (§IV-B)
    ddr_Bps: float = Field(19e9, ge=MIN_BANDWIDTH_BPS, le=MAX_BANDWIDTH_BPS)
    # summarization sliding window held on chip (§IV-C Conv1D); taken equal to d, the tile height
    window_tokens: int = Field(64, ge=1, le=MAX_TOKENS)
    # What designs costed together may differ in (`DFXEngine.variants`).
    varied: ClassVar[tuple[str, ...]] = VARIED

    @field_validator("d")
    @classmethod
    def _power_of_two(cls, d: int) -> int:
        if d & (d - 1):
            raise ValueError("must be a power of two")
        return d

    @field_validator("precision")
    @classmethod
    def _runs(cls, name: str) -> str:
        return refuse_unless(name, DFX_FORMATS, "DFX", DFX_WHY).name

    @model_validator(mode="after")
    def _a_channel_carries_a_value(self) -> "DFXConfig":
        if self.channel_bits < self.data_bits:
            raise ValueError(f"channel_bits {self.channel_bits} must be at least data_bits "
                             f"{self.data_bits}: a channel carries one value per cycle or more")
        return self


@dataclass(frozen=True)
class DFXVariants(DFXCore):
    """N DFX cores alike but for the VARIED parameters, each an (N, 1) array so that the
    engine's figures come out with the variants on their first axis."""

    d: np.ndarray
    l: np.ndarray  # noqa: E741
    window_tokens: np.ndarray
    channel_bits: np.ndarray
    clock_hz: float
    hbm_channels: int
    data_bits: int
    precision: str
    ddr_Bps: float

    @classmethod
    def of(cls, configs: Sequence[DFXConfig]) -> "DFXVariants":
        """The variants `configs` (validated, alike in every other parameter) describe."""
        shared = [name for name in DFXConfig.model_fields if name not in VARIED]
        assert len(set(map(attrgetter(*shared), configs))) == 1, \
            "variants differ in the VARIED parameters only"
        columns = zip(*map(attrgetter(*VARIED), configs), strict=True)
        return cls(**{name: np.array(column)[:, None]
                      for name, column in zip(VARIED, columns, strict=True)},
                   **{name: getattr(configs[0], name) for name in shared})
