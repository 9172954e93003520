"""Devices, memories and links: the resources an engine and a plan are checked against."""

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from archipelago.errors import ArchipelagoError
from archipelago.hardware.link import Link, line_Bps


class _Frozen(BaseModel):
    # Catalog entries and a user's `custom_devices` alike: no NaN or infinite figure.
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class Resources(_Frozen):
    """Fabric resources; BRAM counts blocks of `Device.bram_block_kbit` kilobits."""

    dsp: int = Field(default=0, ge=0)
    bram: int = Field(default=0, ge=0)
    uram: int = Field(default=0, ge=0)
    lut: int = Field(default=0, ge=0)
    ff: int = Field(default=0, ge=0)
    aie: int = Field(default=0, ge=0)

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


# Channels of one memory: a node gets a DRAM bank object per channel, so a typo of 10^12
# channels was a MemoryError; HBM3 has 16 channels (32 pseudo-channels) a stack (JESD238)
# and the catalog's most is 32 (U280, seeds/001 §V-B), so 1,024 is far past any board (the
# cluster files' bank count has the same bound).
MAX_CHANNELS = 1024
# Bytes of one memory: 1 EiB, a million times an 80 GB GPU's (catalog: h100), stops a typo
# before it is printed or divided as a capacity.
MAX_CAPACITY_BYTES = 2**60


class Memory(_Frozen):
    """An off-chip memory: HBM, DDR or GDDR."""

    capacity_bytes: int = Field(gt=0, le=MAX_CAPACITY_BYTES)
    bandwidth_Bps: float = Field(ge=1e6)  # 1 MB/s: slower is a typo
    channels: int = Field(default=1, gt=0, le=MAX_CHANNELS)


class NetworkPorts(_Frozen):
    """Device-to-device ports (QSFP on FPGA cards, NVLink on GPUs)."""

    kind: str
    ports: int = Field(ge=0, le=64)
    gbps: float = Field(ge=1e-3)
    # The catalog link two such boards' ports form (catalog.yaml `links:`); None: Aurora
    # 64B/66B at the ports' own rate (hardware/machines.ports_link).
    link: str | None = None


class GPUCores(_Frozen):
    """A GPU's streaming multiprocessors and its rates beyond FP16 (`Device.peak_fp16_flops`):
    the dense tensor-core rate of each further number format it has (a format it lacks is
    absent) and its CUDA cores' FP32 rate, which dequantizes weight-only formats."""

    sms: int = Field(gt=0, le=1024)
    tensor_ops_per_s: dict[Literal["bf16", "fp8", "int8"], Annotated[float, Field(gt=0)]] = Field(
        default_factory=dict)
    cuda_core_flops: float = Field(gt=0)


# The DSP slice an FPGA's fabric has, which sets how many integer products it packs a cycle
# (engines/dsp_packing.py): DSP48E1 (7 series, UG479), DSP48E2 (UltraScale and UltraScale+,
# UG579), DSP58 (Versal, AM004), Intel's variable-precision block (UG-S10-DSP).
DSPKind = Literal["dsp48e1", "dsp48e2", "dsp58", "intel-vp"]


class Device(_Frozen):
    """A catalog entry. `key` is the name used in cluster shorthand such as `4xu280`."""

    key: str
    name: str
    kind: Literal["fpga", "gpu", "cpu"]
    vendor: str
    resources: Resources = Resources()
    dsp_kind: DSPKind | None = None  # an FPGA's DSP slice; None: not stated
    part: str | None = None  # an FPGA's part number, as vendor tools take it (hls4ml, Vitis)
    bram_block_kbit: float = Field(default=36.0, gt=0)
    uram_block_kbit: float = Field(default=288.0, gt=0)
    memories: dict[str, Memory] = Field(default_factory=dict)
    network: NetworkPorts | None = None
    host_link_Bps: float | None = Field(default=None, ge=1e6)  # as the datasheet quotes it
    host_link: str | None = None  # the catalog PCIe link of its slot (`pcie3-x16`)
    clock_hz: float | None = Field(default=None, ge=1e6)
    peak_fp16_flops: float | None = Field(default=None, gt=0)
    gpu: GPUCores | None = None  # a GPU's SMs and further tensor formats
    power_w: float | None = Field(default=None, gt=0)  # board TDP / maximum total power
    measured_power_w: float | None = Field(default=None, gt=0)  # a paper's measured average
    price_usd: float | None = Field(default=None, gt=0)
    host: str | None = None  # the catalog host server it sits in (`pcie-4u-8`)
    compare_default: bool = False  # one of `archi compare`'s devices when none are named

    def memory(self, kind: str) -> Memory | None:
        return self.memories.get(kind)


class Host(_Frozen):
    """A server boards sit in, priced and powered WITHOUT them: a deployment of N boards
    needs ceil(N / cards) of these (serving/cost.py)."""

    key: str
    name: str
    cards: int = Field(ge=1, le=64)
    price_usd: float = Field(gt=0)
    power_w: float = Field(gt=0)


class Switch(_Frozen):
    """An Ethernet switch boards hang off: its port speed and its published port-to-port
    (forwarding) latency. One hop through it, board port to board port, is a `Link`; the
    boards' own MAC/PHY time is not included where the datasheet quotes the switch alone."""

    key: str
    name: str
    port_kind: str
    ports: int = Field(gt=0, le=1024)
    port_gbps: float = Field(gt=0)
    latency_s: float = Field(ge=0)

    def link(self) -> Link:
        """One hop at the switch's line rate (bits on the wire / 8)."""
        return Link(latency_s=self.latency_s, bandwidth_Bps=line_Bps(self.port_gbps),
                    kind="ethernet")

    def link_for(self, device: Device) -> Link:
        """One hop for `device`'s boards: the slower of the board's port and the switch's
        (a 100G QSFP28 card on a 400G switch runs at 100G)."""
        if device.network is None or device.network.ports == 0:
            raise ArchipelagoError(f"device '{device.key}' has no network ports to plug into "
                                   f"switch '{self.key}'")
        gbps = min(self.port_gbps, device.network.gbps)
        return Link(latency_s=self.latency_s, bandwidth_Bps=line_Bps(gbps), kind="ethernet")
