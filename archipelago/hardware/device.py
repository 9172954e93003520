"""Devices, memories and links: the resources an engine and a plan are checked against."""

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Resources(_Frozen):
    """Fabric resources; BRAM counts blocks of `Device.bram_block_kbit` kilobits."""

    dsp: int = 0
    bram: int = 0
    uram: int = 0
    lut: int = 0
    ff: int = 0
    aie: int = 0

    def exceeding(self, have: "Resources") -> list[str]:
        """The fabric resources (of FABRIC) this needs more of than `have` offers."""
        return [r for r in FABRIC if getattr(self, r) > getattr(have, r)]

    def fractions_of(self, have: "Resources") -> dict[str, float]:
        """Share of each of `have`'s fabric resources this uses (an absent one counts as 1
        unit, so any use of it reads as over the limit)."""
        return {r: getattr(self, r) / max(getattr(have, r), 1) for r in FABRIC}


# The fabric resources every limit check and packer compares (LUTs and FFs are not modelled
# as limits: no engine here is LUT-bound in its paper).
FABRIC = ("dsp", "bram", "uram", "aie")


class Memory(_Frozen):
    """An off-chip memory: HBM, DDR or GDDR."""

    capacity_bytes: int = Field(gt=0)
    bandwidth_Bps: float = Field(gt=0)
    channels: int = Field(default=1, gt=0)


class NetworkPorts(_Frozen):
    """Device-to-device ports (QSFP on FPGA cards, NVLink on GPUs)."""

    kind: str
    ports: int = Field(ge=0)
    gbps: float = Field(gt=0)


class Device(_Frozen):
    """A catalog entry. `key` is the name used in cluster shorthand such as `4xu280`."""

    key: str
    name: str
    kind: Literal["fpga", "gpu", "cpu"]
    vendor: str
    resources: Resources = Resources()
    bram_block_kbit: float = 36.0
    uram_block_kbit: float = 288.0
    memories: dict[str, Memory] = Field(default_factory=dict)
    network: NetworkPorts | None = None
    host_link_Bps: float | None = None
    clock_hz: float | None = None
    peak_fp16_flops: float | None = None
    power_w: float | None = None
    price_usd: float | None = None

    def memory(self, kind: str) -> Memory | None:
        return self.memories.get(kind)


class Link(_Frozen):
    """A point-to-point (or through-switch) path: alpha-beta parameters of one hop."""

    latency_s: float = Field(ge=0)
    bandwidth_Bps: float = Field(gt=0)
