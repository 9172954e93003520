"""Heterogeneous FPGA clusters as CHEF describes them (seeds/004 §VI *Configuration of the
cluster*): per FPGA its clock, DSPs, BRAMs and DRAM banks (size, bandwidth); per pair of
FPGAs a P2P bandwidth BW_inter, or a host relaying between them at half its bandwidth (§III:
"using half of the BW parameter in (3) as the P2P communication BW").

Cluster files are YAML; numbers may be written `{value, source}` like the catalog. Unset
DSP/BRAM/bank counts come from the catalog device.
"""

from functools import cached_property
from importlib import resources
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from archipelago.errors import ArchipelagoError, ConfigError, UnknownNameError
from archipelago.hardware.catalog import catalog, get_device, unwrap_sourced
from archipelago.names import Name
from archipelago.safe_read import load_mapping, load_yaml, probe

GB = 1e9
# A kernel reaches a DRAM bank through one 512-bit AXI port (the width Vitis gives HBM and
# DDR ports on Alveo cards, UG1393), so a bank gives an accelerator at most 64 B per cycle.
AXI_PORT_BYTES = 64


class DramBank(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    size_bytes: int = Field(gt=0)
    bandwidth_Bps: float = Field(gt=0)


class FPGANode(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str
    device: str
    freq_hz: float = Field(gt=0)
    dsp: int = Field(gt=0)
    bram: int = Field(gt=0)
    banks: tuple[DramBank, ...] = Field(min_length=1)

    @property
    def dram_bytes(self) -> int:
        return sum(b.size_bytes for b in self.banks)


class HeteroCluster(BaseModel):
    """FPGAs and the bandwidth between every pair (bytes/s, the effective BW_inter)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str
    fpgas: tuple[FPGANode, ...] = Field(min_length=1)
    inter_Bps: tuple[tuple[float, ...], ...]

    @cached_property
    def index(self) -> dict[str, int]:
        return {f.name: i for i, f in enumerate(self.fpgas)}

    def with_bandwidth(self, gbps: float) -> "HeteroCluster":
        """Every FPGA pair at `gbps` GB/s: the 0.125 / 3 / 15 GB/s presets of §VII-A."""
        if gbps <= 0:
            raise ArchipelagoError(f"--bandwidth {gbps}: a bandwidth must be positive (GB/s)")
        n = len(self.fpgas)
        return self.model_copy(update={"inter_Bps": tuple(
            tuple(0.0 if i == j else gbps * GB for j in range(n)) for i in range(n))})


# Bounds of a user's cluster file, far past any board (a U280 has 32 HBM banks at 14 GB/s,
# 9,024 DSPs): they stop typos before a bank count of 10^30 becomes zero-sized banks.
_MAX_BANKS = 1024
_MAX_GBPS = 1e6
_MAX_BLOCKS = 2**24
# Mapping a DAG keeps an FPGA-by-FPGA bandwidth table and an accelerator-by-accelerator
# transfer table; at 4,096 FPGAs those are 16 million entries each and H2H alone runs 6 s.
# The paper's clusters hold 2 to 6 FPGAs (seeds/004 Table II); 256 keeps any plan near 1 s.
MAX_FPGAS = 256


class _Banks(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    count: int | None = Field(default=None, gt=0, le=_MAX_BANKS)
    size_bytes: int | None = Field(default=None, gt=0, le=2**50)
    bandwidth_gbps: float | None = Field(default=None, ge=1e-3, le=_MAX_GBPS)


class _FPGAEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    name: Name | None = None
    device: str
    freq_mhz: float = Field(ge=1, le=2000)
    dsp: int | None = Field(default=None, gt=0, le=_MAX_BLOCKS)
    bram: int | None = Field(default=None, gt=0, le=_MAX_BLOCKS)
    banks: _Banks = _Banks()


class _Pair(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    a: str
    b: str
    gbps: float = Field(ge=1e-3, le=_MAX_GBPS)


class _ClusterFile(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    name: Name
    fpgas: list[_FPGAEntry] = Field(min_length=1, max_length=MAX_FPGAS)
    p2p_gbps: float = Field(ge=1e-3, le=_MAX_GBPS)
    host_relay: bool = False
    pairs: list[_Pair] = Field(default_factory=list)


def _node(entry: _FPGAEntry, index: int, source: str) -> FPGANode:
    device = get_device(entry.device)
    if device.kind != "fpga" or device.resources.dsp < 1:
        fpgas = sorted(k for k, d in catalog().items() if d.kind == "fpga" and d.resources.dsp)
        raise ConfigError(source, f"fpgas.{index}.device", f"'{entry.device}' is a "
                          f"{device.kind} without DSP slices; CHEF places accelerators on "
                          f"FPGAs: {', '.join(fpgas)}")
    memory = device.memory("hbm") or device.memory("ddr")
    if memory is None:
        raise ConfigError(source, f"fpgas.{index}.device", f"'{entry.device}' has no DRAM")
    count = entry.banks.count or memory.channels
    size = entry.banks.size_bytes or memory.capacity_bytes // count
    freq = entry.freq_mhz * 1e6
    # Default bank bandwidth: the bank's share of the datasheet peak, capped by one port.
    bandwidth = (entry.banks.bandwidth_gbps * GB if entry.banks.bandwidth_gbps
                 else min(memory.bandwidth_Bps / memory.channels, AXI_PORT_BYTES * freq))
    return FPGANode(name=entry.name or f"{entry.device}_{index}", device=device.key,
                    freq_hz=freq, dsp=entry.dsp or device.resources.dsp,
                    bram=entry.bram or device.resources.bram,
                    banks=(DramBank(size_bytes=size, bandwidth_Bps=bandwidth),) * count)


def cluster_from_dict(data: object, source: str) -> HeteroCluster:
    if not isinstance(data, dict):
        raise ConfigError(source, "cluster", "top level must be a mapping")
    try:
        spec = _ClusterFile.model_validate(unwrap_sourced(data))
    except ValidationError as err:
        first = err.errors()[0]
        raise ConfigError(source, ".".join(str(p) for p in first["loc"]), first["msg"]) from None
    try:
        nodes = tuple(_node(e, i, source) for i, e in enumerate(spec.fpgas))
    except UnknownNameError as err:
        raise ConfigError(source, "fpgas.device", str(err)) from None
    names = [n.name for n in nodes]
    if len(set(names)) != len(names):
        raise ConfigError(source, "fpgas.name", f"FPGA names must be unique, got {names}")
    factor = 0.5 if spec.host_relay else 1.0
    table = [[0.0 if i == j else spec.p2p_gbps * GB * factor for j in range(len(nodes))]
             for i in range(len(nodes))]
    for k, pair in enumerate(spec.pairs):
        for end in (pair.a, pair.b):
            if end not in names:
                raise ConfigError(source, f"pairs.{k}", f"unknown FPGA '{end}'; FPGAs: "
                                  f"{', '.join(names)}")
        i, j = names.index(pair.a), names.index(pair.b)
        table[i][j] = table[j][i] = pair.gbps * GB * factor
    return HeteroCluster(name=spec.name, fpgas=nodes,
                         inter_Bps=tuple(tuple(row) for row in table))


def is_hetero_file(path: Path) -> bool:
    """A cluster YAML in this module's format lists `fpgas` (the other format `devices`)."""
    try:
        data = load_yaml(path, "cluster")
    except ConfigError:
        return False  # the loader of the other format reports it
    return isinstance(data, dict) and "fpgas" in data


# Clock for a catalog FPGA without one: seeds/004 §VII-B runs its U280 kernels at 200 MHz.
DEFAULT_KERNEL_HZ = 200e6


def hetero_from_devices(name: str, devices: list, link_Bps: float) -> HeteroCluster:
    """A cluster of catalog devices (e.g. `2xu280`) in CHEF's terms: each at its catalog
    clock (else 200 MHz), banks from its memory, every pair at the cluster link's bandwidth."""
    if len(devices) > MAX_FPGAS:
        raise ConfigError(name, "devices", f"{len(devices)} FPGAs; a heterogeneous cluster "
                          f"maps layers over at most {MAX_FPGAS}")
    entries = [_FPGAEntry(name=f"{d.key}_{i}", device=d.key,
                          freq_mhz=(d.clock_hz or DEFAULT_KERNEL_HZ) / 1e6)
               for i, d in enumerate(devices)]
    nodes = tuple(_node(e, i, name) for i, e in enumerate(entries))
    n = len(nodes)
    return HeteroCluster(name=name, fpgas=nodes, inter_Bps=tuple(
        tuple(0.0 if i == j else link_Bps for j in range(n)) for i in range(n)))


def builtin_hetero_clusters() -> list[str]:
    folder = resources.files("archipelago.hardware").joinpath("clusters")
    return sorted(p.name.removesuffix(".yaml") for p in folder.iterdir()
                  if p.name.endswith(".yaml"))


def resolve_hetero_cluster(text: str, bandwidth_gbps: float | None = None) -> HeteroCluster:
    """A built-in cluster name (`hacc`, `chef-cluster1`..3) or a cluster YAML path."""
    if text in builtin_hetero_clusters():
        source = f"clusters/{text}.yaml"
        data = yaml.safe_load(
            resources.files("archipelago.hardware").joinpath(source).read_text())
    else:
        path = Path(text)
        if probe(path, "cluster") is None:
            raise UnknownNameError("heterogeneous cluster", text,
                                   [*builtin_hetero_clusters(), "<cluster YAML path>"])
        source, data = str(path), load_mapping(path, "cluster")
    cluster = cluster_from_dict(data, source)
    return cluster if bandwidth_gbps is None else cluster.with_bandwidth(bandwidth_gbps)
