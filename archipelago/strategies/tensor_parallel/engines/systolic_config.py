"""A LORA core's design parameters (seeds/002 §V-D's search variables), one core's
(`SystolicConfig`) or many cores' at once (`SystolicVariants`); the engine that costs them
is systolic.py."""

from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import ClassVar

import numpy as np
from pydantic import Field, field_validator, model_validator

from archipelago.engines.base import (
    MAX_BITS,
    MAX_CHANNELS,
    MAX_CLOCK_HZ,
    MAX_DIM,
    MAX_TOKENS,
    MIN_CLOCK_HZ,
    EngineConfig,
)
from archipelago.models.expert_routing import EXPERT_SKEW
from archipelago.number_formats import NumberFormat, number_format, refuse_unless

# The formats LORA's core runs (number_formats.py): FP16 on the FP16 array (seeds/002 §V),
# INT8 products on the packed INT8 array (§V-A); INT4 weights widened in the stream, before
# the array (systolic.py); an INT8 KV cache beside FP16 activations widened at the URAM's
# read port. No BF16 or FP8 datapath is described.
LORA_FORMATS = ("fp16", "fp16-kv8", "w8a8", "w4a16", "w4a16-kv8", "w4a8")
LORA_WHY = "has an FP16 or a packed INT8 systolic array (seeds/002 §V-A)"

# Aurora stream port width that packs d rows per transfer (seeds/002 §VI-C: "Given the
# 256-bit data width of the communication IP, up to 16 input rows can be packed").
LINK_PORT_BITS = 256
# The hardware parameters a design search varies together (§V-D's "candidate values for
# each hardware parameter"): `SystolicVariants` holds each as an array over the variants.
VARIED = ("clock_hz", "d_sa", "t_m", "t_v", "n_acc", "hbm_axi_bits", "hbm_channels",
          "kv_uram", "token_window")


class SystolicConfig(EngineConfig):
    """Design parameters of one LORA core (the variables the §V-D search explores)."""

    # the number format (`--precision`, number_formats.py): one of LORA_FORMATS
    precision: str = Field("fp16", max_length=40)
    # LORA-F 200 MHz, LORA-Q 250 MHz (seeds/002 Table IV)
    clock_hz: float = Field(200e6, ge=MIN_CLOCK_HZ, le=MAX_CLOCK_HZ)
    d_sa: int = Field(32, ge=1, le=MAX_DIM)  # systolic array side (seeds/002 §V-C example: 32 x 32)
    t_m: int = Field(32, ge=1, le=MAX_DIM)  # matrix tile side (Fig. 3b)
    t_v: int = Field(32, ge=1, le=MAX_DIM)  # tiles per vector-matrix iteration (Fig. 8)
    n_acc: int = Field(64, ge=1, le=MAX_DIM)  # VFU accumulators (Eq. 2, 7)
    hbm_axi_bits: int = Field(512, ge=8, le=MAX_BITS)  # per-channel AXI width at the kernel clock
    # U280 HBM pseudo-channels (seeds/001 §V-B)
    hbm_channels: int = Field(32, ge=1, le=MAX_CHANNELS)
    # URAMs for the KV cache (seeds/002 §VI-A-d: "All 864")
    kv_uram: int = Field(864, ge=0, le=MAX_DIM)
    # rows of activations buffered on chip for prefill
    token_window: int = Field(64, ge=1, le=MAX_TOKENS)
    # How a mixture's tokens spread over its experts, which sets the distinct experts a
    # batch's step streams: 0, uniform routing (models/expert_routing.py). Not a hardware
    # parameter: variants share it.
    expert_skew: EXPERT_SKEW = 0.0
    # What designs costed together may differ in (`SystolicEngine.variants`).
    varied: ClassVar[tuple[str, ...]] = VARIED

    @field_validator("precision")
    @classmethod
    def _runs(cls, name: str) -> str:
        return refuse_unless(name, LORA_FORMATS, "LORA", LORA_WHY).name

    @model_validator(mode="after")
    def _tiles_fit_the_array(self) -> "SystolicConfig":
        if self.t_m < self.d_sa or self.t_m % self.d_sa:
            raise ValueError(f"t_m must be a positive multiple of d_sa (t_m {self.t_m}, "
                             f"d_sa {self.d_sa})")
        if self.t_v * self.t_m > self.d_sa ** 2:
            raise ValueError(f"t_v x t_m ({self.t_v} x {self.t_m}) must not exceed the "
                             f"d_sa^2 = {self.d_sa ** 2} processing elements")
        return self

    @property
    def format(self) -> NumberFormat:
        return number_format(self.precision)

    @property
    def weight_bytes(self) -> float:
        """Bytes of a stored weight (its group's scale share included)."""
        return self.format.weight_bytes

    @property
    def pack_rows(self) -> int:
        """Rows packed per transfer: the link port width over the activation width (§III-B)."""
        return LINK_PORT_BITS // self.format.activation_bits


@dataclass(frozen=True)
class SystolicVariants:
    """N LORA cores of one precision and routing skew differing in the VARIED parameters,
    each an (N, 1) array so that the engine's figures come out with the variants on their
    first axis."""

    precision: str
    expert_skew: float
    clock_hz: np.ndarray
    d_sa: np.ndarray
    t_m: np.ndarray
    t_v: np.ndarray
    n_acc: np.ndarray
    hbm_axi_bits: np.ndarray
    hbm_channels: np.ndarray
    kv_uram: np.ndarray
    token_window: np.ndarray

    @classmethod
    def of(cls, configs: Sequence[SystolicConfig]) -> "SystolicVariants":
        """The variants `configs` (validated, all of one precision and skew) describe."""
        assert len({(c.precision, c.expert_skew) for c in configs}) == 1, \
            "variants share their precision and routing skew"
        columns = zip(*map(attrgetter(*VARIED), configs), strict=True)
        return cls(configs[0].precision, configs[0].expert_skew,
                   **{name: np.array(column)[:, None]
                      for name, column in zip(VARIED, columns, strict=True)})

    @property
    def format(self) -> NumberFormat:
        return number_format(self.precision)

    @property
    def weight_bytes(self) -> float:
        return self.format.weight_bytes
