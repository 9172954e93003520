"""One description of a user's machines, for every strategy: a `Cluster` of `Node`s (a
catalog device at a clock, with its fabric `Resources` and its DRAM banks) and the network
between them: a topology, one link (hardware/link.Link) shared by every hop of a ring, and
optionally a bandwidth per pair of nodes (CHEF's BW_inter, seeds/004 (3)), halved where a
host relays the traffic (seeds/004 §III: "using half of the BW parameter in (3) as the P2P
communication BW"). `Cluster.link(i, j)` answers the hop between two nodes and
`Cluster.host_link(i)` a node's PCIe link to its host; every kind reads its links there.

Rings of identical cards (DFX, LORA), switched FPGAs (Galapagos), host-attached cards (host
offload) and heterogeneous boards (CHEF) are all this one type; a strategy that cannot use a
cluster's shape says why when it plans. The forms a user names one in (`4xu280`, a built-in
name, a YAML file) are in hardware/cluster.py and hardware/cluster_file.py.
"""

from pathlib import Path
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from archipelago.errors import ArchipelagoError, PartitionError
from archipelago.hardware.catalog import catalog_links, get_switch
from archipelago.hardware.device import Device, Resources
from archipelago.hardware.link import Link

Topology = Literal["ring", "switch", "host_star"]

GB = 1e9
# Galapagos' 100G UDP network (seeds/000 §8.1, Fig. 17): boards hang off Dell Z9100-ON
# switches (catalog.yaml `z9100`, one way through it FPGA to FPGA); "the latency between the
# 100G switches, d, to be about 1.1us" (§8.2.2), paid where traffic crosses from one switch
# to the next.
GALAPAGOS_SWITCH = "z9100"
SWITCH_TO_SWITCH_LATENCY_S = 1.1e-6
# Rings of `RxNxDEVICE` meet on the same 100 Gb/s switch: one port per ring at its line rate.
RING_SWITCH = GALAPAGOS_SWITCH
# The link of a board whose ports name none (a custom device): Aurora 64B/66B, the ring link
# of DFX and LORA, at the ports' own rate; of a slot naming no PCIe generation: Gen3 x16,
# the Alveo cards' (every PCIe entry has the same latency; the bandwidth is the device's).
DEFAULT_PORT_LINK = "aurora-qsfp28"
DEFAULT_HOST_LINK = "pcie3-x16"
# The largest cluster in the seeds is Galapagos' 72 FPGAs (seeds/000 §8.1); a bound far above
# it keeps a typo (`100000000000000000000xu280`) from exhausting memory in the planner.
MAX_DEVICES = 4096
# The range of a link's bandwidth a user may give: from 1 MB/s (the slowest link in the seeds
# is CHEF's 0.125 GB/s, seeds/004 §VII-A; at 1 MB/s a 100 MB model already takes minutes to
# cross) to 10 TB/s, over five times the fastest link there is (NVLink 5: 1.8 TB/s per GPU;
# the catalog's H200 has 900 GB/s). Outside it is a typo, or a denormal like 5e-324 GB/s
# that makes every transfer time infinite. A DRAM bank gets the same floor and a ceiling
# ten times higher: on-package memory reaches 32 TB/s (s10-2100-tr in catalog.yaml).
MIN_LINK_Bps = 1e6
MAX_LINK_Bps = 1e13
MAX_BANK_Bps = 1e14
# Clock of a node whose device has none in the catalog: seeds/004 §VII-B runs its U280
# kernels at 200 MHz.
DEFAULT_KERNEL_HZ = 200e6
# A kernel reaches a DRAM bank through one 512-bit AXI port (the width Vitis gives HBM and
# DDR ports on Alveo cards, UG1393), so a bank gives an accelerator at most 64 B per cycle.
AXI_PORT_BYTES = 64


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class DramBank(_Frozen):
    """One off-chip memory bank an accelerator is wired to (a U280 has 32 HBM banks)."""

    size_bytes: int = Field(gt=0)
    bandwidth_Bps: float = Field(gt=0)


class Node(_Frozen):
    """One device of a cluster as the planners see it: a catalog device running at
    `clock_hz`, with the fabric `resources` a design may use and its DRAM `banks` (none
    where the device has no HBM or DDR)."""

    name: str
    device: Device
    clock_hz: float = Field(gt=0)
    resources: Resources
    banks: tuple[DramBank, ...] = ()
    host_link: Link | None = None  # a cluster file's; None: the device's own (host_link_of)

    @property
    def dram_bytes(self) -> int:
        return sum(b.size_bytes for b in self.banks)


def make_node(device: Device, name: str, clock_hz: float | None = None,
              resources: dict[str, int] | None = None, bank_count: int | None = None,
              bank_size: int | None = None, bank_Bps: float | None = None) -> Node:
    """`device` as a node: the catalog's clock (else DEFAULT_KERNEL_HZ) and resources unless
    given; banks as given, else one per channel of its HBM (else DDR), each the channel's
    share of the datasheet peak capped by one AXI port at the node's clock. Raises
    ValueError for banks asked of a device without DRAM but not fully described."""
    clock = clock_hz or device.clock_hz or DEFAULT_KERNEL_HZ
    fabric = Resources(**{**device.resources.model_dump(), **(resources or {})})
    memory = device.memory("hbm") or device.memory("ddr")
    if memory is None:
        given = (bank_count, bank_size, bank_Bps)
        if any(v is not None for v in given) and None in given:
            raise ValueError(f"device '{device.key}' has no HBM or DDR to default from: give "
                             f"the banks' count, size_bytes and bandwidth")
        if bank_count is None or bank_size is None or bank_Bps is None:
            return Node(name=name, device=device, clock_hz=clock, resources=fabric)
        count, size, bandwidth = bank_count, bank_size, bank_Bps
    else:
        count = bank_count or memory.channels
        size = bank_size or memory.capacity_bytes // count
        bandwidth = bank_Bps or min(memory.bandwidth_Bps / memory.channels,
                                    AXI_PORT_BYTES * clock)
    return Node(name=name, device=device, clock_hz=clock, resources=fabric,
                banks=(DramBank(size_bytes=size, bandwidth_Bps=bandwidth),) * count)


def repeated(node: Node, count: int) -> tuple[Node, ...]:
    """`count` copies of `node`, named DEVICE_i as `NxDEVICE` names them."""
    return tuple(node.model_copy(update={"name": f"{node.device.key}_{i}"})
                 for i in range(count))


class Cluster(_Frozen):
    """Nodes and the network between them. Every hop runs `ring_link`; a pair of nodes named
    in `pair_bandwidth_Bps` ((i, j) with i < j) gets its own bandwidth instead, and
    `host_relay` halves every pair's (traffic is stored to and loaded from host memory);
    `link(i, j)` answers the hop with all of that applied, `host_link(i)` a node's PCIe.
    `host_profile` is the host CPU of PCIe cards (a CPU proxy profile, `archi proxies`
    writes one); None means the machine Archipelago runs on.

    `rings` > 1 cuts the nodes, in order, into that many equal groups, each wired by
    `topology` and `ring_link` as above, the groups joined by `inter_ring_link` (a switch port):
    tensor parallel runs inside a group, pipeline stages across them."""

    name: str
    nodes: tuple[Node, ...] = Field(min_length=1, max_length=MAX_DEVICES)
    topology: Topology = "ring"
    ring_link: Link | None = None
    switch_latency_s: float = Field(default=0.0, ge=0)
    host_relay: bool = False
    pair_bandwidth_Bps: dict[tuple[int, int], float] = Field(default_factory=dict)
    host_profile: Path | None = None
    rings: int = Field(default=1, ge=1, le=MAX_DEVICES)
    inter_ring_link: Link | None = None

    @model_validator(mode="after")
    def _consistent(self) -> "Cluster":
        if len(self.nodes) > 1 and self.ring_link is None:
            raise ValueError("a cluster of more than one device needs a link")
        if len(self.nodes) % self.rings:
            raise ValueError(f"{len(self.nodes)} devices do not form {self.rings} equal rings")
        if self.rings > 1 and self.inter_ring_link is None:
            raise ValueError("a cluster of several rings needs a link between them")
        for (i, j), bandwidth in self.pair_bandwidth_Bps.items():
            if not 0 <= i < j < len(self.nodes) or bandwidth <= 0:
                raise ValueError(f"pair ({i}, {j}) at {bandwidth} B/s: a pair is two "
                                 f"different nodes (i < j) at a positive bandwidth")
        return self

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        """A one-ring cluster dumps as it did before rings existed (a study's digest of
        its cluster stays the same)."""
        data = handler(self)
        if self.rings == 1 and self.inter_ring_link is None:
            data.pop("rings", None)
            data.pop("inter_ring_link", None)
        return data

    @property
    def devices(self) -> tuple[Device, ...]:
        """Each node's catalog device, in node order."""
        return tuple(n.device for n in self.nodes)

    @property
    def size(self) -> int:
        return len(self.nodes)

    @property
    def homogeneous(self) -> bool:
        return len({n.device.key for n in self.nodes}) == 1

    @property
    def ring_size(self) -> int:
        return len(self.nodes) // self.rings

    def group(self, start: int, count: int) -> "Cluster":
        """Nodes [start, start + count) of one ring as a cluster of their own, wired as the
        ring is (a stage's tensor-parallel group; `count` boards re-cabled as a ring)."""
        stop = start + count
        if not (0 <= start < stop <= self.size and start // self.ring_size
                == (stop - 1) // self.ring_size):
            raise ValueError(f"nodes {start}..{stop - 1} are not inside one ring")
        pairs = {(i - start, j - start): b for (i, j), b in self.pair_bandwidth_Bps.items()
                 if start <= i < j < stop}
        return self.replaced(name=f"{self.name}[{start}:{stop}]",
                             nodes=self.nodes[start:stop], pair_bandwidth_Bps=pairs,
                             ring_link=self.ring_link if count > 1 else None, rings=1,
                             inter_ring_link=None)

    def link(self, i: int, j: int) -> Link:
        """The hop a transfer from node i to node j (two nodes) crosses: between rings the
        switch port; inside one, the ring's link at the pair's own bandwidth where one is
        given, halved where the host relays (BW_inter, `pair_Bps`)."""
        if i == j or not (0 <= i < self.size and 0 <= j < self.size):
            raise ValueError(f"a hop joins two different nodes of {self.size}; got {i}, {j}")
        if i // self.ring_size != j // self.ring_size:
            assert self.inter_ring_link is not None  # the validator's: rings > 1 have one
            return self.inter_ring_link
        assert self.ring_link is not None  # the validator's: more than one node has a link
        bandwidth = self.pair_Bps(i, j)
        same = bandwidth == self.ring_link.bandwidth_Bps
        return self.ring_link if same else self.ring_link.at_bandwidth(bandwidth)

    def host_link(self, i: int) -> Link:
        """Node i's link to its host: the cluster file's, else its device's PCIe slot."""
        node = self.nodes[i]
        return node.host_link if node.host_link is not None else host_link_of(node.device)

    def require_identical(self, strategy: str) -> Device:
        """The one device type of a homogeneous cluster; a PartitionError otherwise."""
        if not self.homogeneous:
            kinds = sorted({n.device.key for n in self.nodes})
            raise PartitionError(f"strategy '{strategy}' needs identical devices; cluster "
                                 f"'{self.name}' mixes {kinds}")
        return self.nodes[0].device

    def pair_Bps(self, i: int, j: int) -> float:
        """BW_inter between nodes i != j (seeds/004 (3)), `link(i, j)`'s bandwidth without
        building the link (CHEF's tables ask it of every pair): the switch port's between
        rings; inside one the pair's own, else the ring link's, halved where the host relays
        (§III)."""
        if i // self.ring_size != j // self.ring_size:
            assert self.inter_ring_link is not None  # the validator's: rings > 1 have one
            return self.inter_ring_link.bandwidth_Bps
        assert self.ring_link is not None  # the validator's: more than one node has a link
        raw = self.pair_bandwidth_Bps.get((min(i, j), max(i, j)), self.ring_link.bandwidth_Bps)
        return raw * 0.5 if self.host_relay else raw

    def replaced(self, **changes: object) -> "Cluster":
        """A copy with `changes`, validated again (model_copy would not be)."""
        return Cluster.model_validate({**{k: getattr(self, k) for k in Cluster.model_fields},
                                       **changes})

    def with_bandwidth(self, gbps: float, written: str | None = None) -> "Cluster":
        """The cluster's links overridden: every pair of nodes at `gbps` GB/s, latency kept
        (CHEF's `--bandwidth`, the 0.125 / 3 / 15 GB/s presets of seeds/004 §VII-A);
        `written` is the figure as the user gave it, for the error."""
        if not MIN_LINK_Bps <= gbps * GB <= MAX_LINK_Bps:
            raise ArchipelagoError(f"--bandwidth {written or f'{gbps:g}'}: give "
                                   f"{MIN_LINK_Bps / GB:g}..{MAX_LINK_Bps / GB:g} GB/s "
                                   "(1 MB/s to 10 TB/s)")
        ring = self.ring_link or Link(latency_s=0.0, bandwidth_Bps=gbps * GB)
        return self.replaced(ring_link=ring.at_bandwidth(gbps * GB), host_relay=False,
                             pair_bandwidth_Bps={})

    def resized(self, count: int) -> "Cluster":
        """`count` copies of the first node on the same network (a device-count sweep)."""
        key = self.nodes[0].device.key
        return self.replaced(name=f"{count}x{key}", nodes=repeated(self.nodes[0], count),
                             pair_bandwidth_Bps={}, rings=1, inter_ring_link=None)


def ports_link(device: Device) -> Link:
    """The hop two of these boards' ports form cabled directly (a ring's): the catalog link
    the ports name, else Aurora 64B/66B at their own rate (DEFAULT_PORT_LINK)."""
    net = device.network
    if net is None:
        raise ArchipelagoError(f"device '{device.key}' has no network ports for a ring")
    if net.link is not None:
        return catalog_links()[net.link.lower()].link()
    return catalog_links()[DEFAULT_PORT_LINK].link(net.gbps)


def host_link_of(device: Device) -> Link:
    """The device's PCIe slot (its `host_link`, else DEFAULT_HOST_LINK) at the bandwidth
    its datasheet quotes where it quotes one."""
    if device.host_link is None and device.host_link_Bps is None:
        raise ArchipelagoError(f"device '{device.key}' has no host link")
    slot = catalog_links()[(device.host_link or DEFAULT_HOST_LINK).lower()].link()
    return slot if device.host_link_Bps is None else slot.at_bandwidth(device.host_link_Bps)


def switched_link(device: Device) -> Link:
    """One port into a Galapagos 100G switch (seeds/000 §8.1), at the slower of the
    board's port and the switch's."""
    return get_switch(GALAPAGOS_SWITCH).link_for(device)


def switch_port_link() -> Link:
    """The link between rings: one port of RING_SWITCH at its line rate."""
    return get_switch(RING_SWITCH).link()


def default_link(device: Device) -> Link:
    """The link of a cluster file that gives none: the device's own ports, else its host's."""
    return ports_link(device) if device.network else host_link_of(device)
