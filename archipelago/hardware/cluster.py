"""Clusters: devices plus the network between them, from shorthand (`4xu280`) or YAML."""

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from archipelago.errors import ArchipelagoError, ConfigError, PartitionError
from archipelago.hardware.catalog import catalog, device_from_dict, get_device
from archipelago.hardware.device import Device, Link
from archipelago.hardware.hetero import (
    HeteroCluster,
    builtin_hetero_clusters,
    is_hetero_file,
    resolve_hetero_cluster,
)
from archipelago.names import Name
from archipelago.safe_read import load_mapping, probe

Topology = Literal["ring", "switch", "host_star"]

# Aurora 64b/66b carries 64 payload bits in every 66 line bits (seeds/001 §V-E: "only 3%
# transmission overhead").
AURORA_64B66B_EFFICIENCY = 64 / 66
# Aurora 64b/66b link latency, simulated on U280 by LORA (seeds/002 §V: "approximately 300 ns").
AURORA_LINK_LATENCY_S = 300e-9
# Galapagos' 100G UDP network (seeds/000): "FPGA-to-FPGA round-trip latency of 0.17us through
# a 100 Gbps switch" (§9.4), so 85 ns one way; "the latency between the 100G switches, d, to
# be about 1.1us" (§8.2.2), paid where traffic crosses from one switch to the next (Fig. 17).
SWITCHED_LINK_LATENCY_S = 0.17e-6 / 2
SWITCH_TO_SWITCH_LATENCY_S = 1.1e-6
# The largest cluster in the seeds is Galapagos' 72 FPGAs (seeds/000 §8.1); a bound far above
# it keeps a typo (`100000000000000000000xu280`) from exhausting memory in the planner.
MAX_DEVICES = 4096


class Cluster(BaseModel):
    """Devices and one link model shared by every hop of the topology."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    devices: tuple[Device, ...] = Field(min_length=1)
    topology: Topology = "ring"
    link: Link | None = None
    switch_latency_s: float = Field(default=0.0, ge=0)
    # The host CPU of PCIe cards: a CPU proxy profile file (`archi proxies` writes one);
    # None means the machine Archipelago runs on.
    host_profile: Path | None = None

    @model_validator(mode="after")
    def _needs_link(self) -> "Cluster":
        if len(self.devices) > 1 and self.link is None:
            raise ValueError("a cluster of more than one device needs a link")
        return self

    @property
    def size(self) -> int:
        return len(self.devices)

    @property
    def homogeneous(self) -> bool:
        return len({d.key for d in self.devices}) == 1

    def require_identical(self, strategy: str) -> Device:
        """The one device type of a homogeneous cluster; a PartitionError otherwise."""
        if not self.homogeneous:
            kinds = sorted({d.key for d in self.devices})
            raise PartitionError(f"strategy '{strategy}' needs identical devices; cluster "
                                 f"'{self.name}' mixes {kinds}")
        return self.devices[0]


def aurora_ring_link(device: Device) -> Link:
    """The DFX/LORA inter-FPGA link: one QSFP port running Aurora 64b/66b."""
    if device.network is None:
        raise ArchipelagoError(f"device '{device.key}' has no network ports for a ring")
    payload_gbps = device.network.gbps * AURORA_64B66B_EFFICIENCY
    return Link(latency_s=AURORA_LINK_LATENCY_S, bandwidth_Bps=payload_gbps * 1e9 / 8)


def host_link(device: Device) -> Link:
    """Devices without direct ports talk through the host over PCIe."""
    if device.host_link_Bps is None:
        raise ArchipelagoError(f"device '{device.key}' has neither network ports nor a host link")
    return Link(latency_s=2e-6, bandwidth_Bps=device.host_link_Bps)


_SHORTHAND = re.compile(r"^([0-9]+)x([a-z0-9_.-]+)$", re.IGNORECASE)


def parse_shorthand(text: str) -> Cluster | None:
    """`NxDEVICE`: N identical devices. FPGAs with two ports form an Aurora ring as in DFX;
    with one port they hang off 100G switches, chained switch to switch, as Galapagos
    deploys them (seeds/000 §8.1, Fig. 17)."""
    match = _SHORTHAND.match(text.strip())
    if not match:
        return None
    digits, key = match.group(1).lstrip("0") or "0", match.group(2).lower()
    if not 1 <= len(digits) <= len(str(MAX_DEVICES)) or not 1 <= int(digits) <= MAX_DEVICES:
        raise ArchipelagoError(f"cluster '{text}': device count {digits[:24]} is out of range "
                               f"1..{MAX_DEVICES}")
    count = int(digits)
    device = get_device(key)
    ports = device.network.ports if device.network is not None else 0
    if ports == 1:
        return Cluster(name=text, devices=(device,) * count, topology="switch",
                       link=switched_link(device), switch_latency_s=SWITCH_TO_SWITCH_LATENCY_S)
    link = aurora_ring_link(device) if ports else host_link(device)
    topology: Topology = "ring" if ports else "host_star"
    return Cluster(name=text, devices=(device,) * count, topology=topology, link=link)


def switched_link(device: Device) -> Link:
    """One port into a 100G switch, as on the Galapagos testbed (seeds/000 §8.1)."""
    assert device.network is not None
    return Link(latency_s=SWITCHED_LINK_LATENCY_S, bandwidth_Bps=device.network.gbps * 1e9 / 8)


class _LinkSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    latency_ns: float = Field(ge=0, le=1e9)  # up to a second
    bandwidth_gbps: float = Field(ge=1e-3, le=1e6)  # 1 Mb/s to a petabit per second
    encoding: Literal["none", "64b66b"] = "none"

    def to_link(self) -> Link:
        efficiency = AURORA_64B66B_EFFICIENCY if self.encoding == "64b66b" else 1.0
        return Link(latency_s=self.latency_ns * 1e-9,
                    bandwidth_Bps=self.bandwidth_gbps * efficiency * 1e9 / 8)


class _DeviceGroup(BaseModel):
    model_config = ConfigDict(extra="forbid")
    device: str
    count: int = Field(default=1, ge=1, le=MAX_DEVICES)


class _ClusterFile(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    name: Name | None = None
    devices: list[_DeviceGroup] = Field(min_length=1, max_length=MAX_DEVICES)
    topology: Topology = "ring"
    link: _LinkSpec | None = None
    switch_latency_ns: float = Field(default=0.0, ge=0, le=1e9)
    custom_devices: dict[str, dict[str, Any]] = Field(default_factory=dict)
    host_profile: str | None = None  # relative to the YAML file


def load_cluster_file(path: Path) -> Cluster:
    """A YAML cluster: device groups (catalog keys or `custom_devices`), topology, link."""
    source = str(path)
    raw = load_mapping(path, "cluster")
    try:
        spec = _ClusterFile.model_validate(raw)
    except ValidationError as err:
        raise ConfigError.from_validation(source, err, whole="cluster") from None
    known = dict(catalog())
    for key, entry in spec.custom_devices.items():
        known[key] = device_from_dict(key, entry, source)
    total = sum(group.count for group in spec.devices)
    if total > MAX_DEVICES:
        raise ConfigError(source, "devices", f"{total} devices in all; the limit is "
                          f"{MAX_DEVICES}")
    devices: list[Device] = []
    for i, group in enumerate(spec.devices):
        if group.device.lower() not in known:
            raise ConfigError(source, f"devices.{i}.device",
                              f"unknown device '{group.device}'; valid: {', '.join(sorted(known))}")
        devices.extend([known[group.device.lower()]] * group.count)
    link = spec.link.to_link() if spec.link else None
    if link is None and len(devices) > 1:
        first = devices[0]
        link = aurora_ring_link(first) if first.network else host_link(first)
    try:
        return Cluster(name=spec.name or path.stem, devices=tuple(devices),
                       topology=spec.topology, link=link,
                       switch_latency_s=spec.switch_latency_ns * 1e-9,
                       host_profile=(path.parent / spec.host_profile
                                     if spec.host_profile else None))
    except ValidationError as err:
        raise ConfigError(source, "cluster", err.errors()[0]["msg"]) from None


def resolve_cluster(text: str) -> Cluster | HeteroCluster:
    """Shorthand (`4xu280`), a built-in heterogeneous cluster (`hacc`, `chef-cluster1`..3),
    or a path to a cluster YAML file (one listing `fpgas` is a heterogeneous cluster)."""
    cluster = parse_shorthand(text)
    if cluster is not None:
        return cluster
    if text in builtin_hetero_clusters():
        return resolve_hetero_cluster(text)
    path = Path(text)
    # an empty name is no path: Path("") is the working directory
    if text.strip() and (path.suffix in {".yaml", ".yml"} or probe(path, "cluster") is not None):
        return resolve_hetero_cluster(text) if is_hetero_file(path) else load_cluster_file(path)
    raise ArchipelagoError(
        f"cluster '{text}' is neither NxDEVICE shorthand (e.g. 4xu280), a built-in "
        f"heterogeneous cluster (hacc, chef-cluster1, chef-cluster2, chef-cluster3) nor a "
        f"YAML file; devices: {', '.join(sorted(catalog()))}"
    )
