"""Galapagos Messaging Interface (seeds/000 §4-5): clusters of clusters, GMI kernels,
kernel IDs, the one-byte inter-cluster header and the per-FPGA routing tables.

A model's data movement starts as `Transfer`s between compute kernels (a broadcast of the
layer input, a scatter of Q into heads, ...). `insert_gmi` turns every collective into a
GMI kernel of the multi-kernel graph (Fig. 6b), placed on the sender's or a receiver's FPGA,
whichever puts fewer bytes on the network (§5.2); a collective fed from another cluster
becomes a virtual kernel inside that cluster's gateway (Fig. 8). `assign_kernel_ids` gives
each cluster the contiguous ID space 0..N-1: gateway, compute, communication, virtual
(§6.1). Inter-cluster messages go to the destination cluster's gateway (kernel 0) with a
one-byte header naming the destination kernel (§4, §5.2).
"""

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from archipelago.errors import PartitionError

# Limits of the enhanced Galapagos (seeds/000 §4): 256 kernels per cluster (8-bit kernel
# IDs in the packet's dest field) and "the maximum number of clusters to 256".
MAX_KERNELS_PER_CLUSTER = 256
MAX_CLUSTERS = 256
# "only a one-byte header for inter-cluster communication, and no header ... for
# intra-cluster communication" (seeds/000 §5.2).
GMI_HEADER_BYTES = 1
# The Network Layer's routing tables hold IPv4 addresses (seeds/000 §4), 4 bytes each.
IP_ENTRY_BYTES = 4
# What each message between FPGAs costs on the wire beyond its payload: Ethernet preamble,
# header, FCS and inter-frame gap (8 + 14 + 4 + 12, IEEE 802.3), IPv4 (20, RFC 791) and
# UDP (8, RFC 768) headers; Galapagos runs over UDP (seeds/000 §2.1).
MESSAGE_OVERHEAD_BYTES = 66
HOST = "host"  # the node that feeds the first encoder and takes the last one's output
HOST_CLUSTER = -1

Collective = Literal["p2p", "broadcast", "scatter", "gather", "reduce", "allgather"]
Role = Literal["gateway", "compute", "gmi", "virtual"]
_ID_ORDER: dict[str, int] = {"gateway": 0, "compute": 1, "gmi": 2, "virtual": 3}


@dataclass
class Node:
    """One Galapagos kernel: where it runs and, once assigned, its ID in its cluster."""

    name: str
    role: Role
    fpga: int
    cluster: int
    collective: Collective | None = None
    kernel_id: int = -1


@dataclass(frozen=True)
class Transfer:
    """Data a model moves each row. `row_bytes[i]` is the part for destination i
    (broadcast: all equal; scatter) or from source i (gather, reduce); `per_key` parts grow
    with the sequence length (softmax rows of M probabilities); `whole` marks an operand
    its compute kernels need entirely before their first row (K and V of attention)."""

    kind: Collective
    sources: tuple[str, ...]
    destinations: tuple[str, ...]
    row_bytes: tuple[int, ...]
    tensor: str
    per_key: bool = False
    whole: bool = False
    origin: str = ""  # role of the compute kernels that produced the data ("input": the
    #                   encoder's input)


@dataclass(frozen=True)
class Stream:
    """An edge of the multi-kernel graph. An inter-cluster stream travels to the
    destination cluster's gateway with the GMI header and is forwarded from there."""

    src: str
    dst: str
    row_bytes: int
    tensor: str
    inter_cluster: bool = False
    per_key: bool = False
    whole: bool = False
    origin: str = ""

    def bytes_at(self, seq_len: int) -> int:
        """Payload bytes per row at sequence length `seq_len` (header included)."""
        payload = self.row_bytes * (seq_len if self.per_key else 1)
        return payload + (GMI_HEADER_BYTES if self.inter_cluster else 0)


@dataclass
class GMIGraph:
    """Kernels and streams after GMI insertion; `collectives` holds the transfer each GMI
    (or virtual) kernel carries out, from which its cost and behaviour follow."""

    nodes: dict[str, Node]
    streams: list[Stream]
    collectives: dict[str, Transfer] = field(default_factory=dict)


def frame(dest_kernel: int, payload: bytes) -> bytes:
    """Attach the GMI header (the destination kernel's ID) to an inter-cluster message."""
    if not 0 <= dest_kernel < MAX_KERNELS_PER_CLUSTER:
        raise PartitionError(f"kernel ID {dest_kernel} does not fit the one-byte GMI header")
    return bytes([dest_kernel]) + payload


def unframe(message: bytes) -> tuple[int, bytes]:
    """The gateway's Packet Decoder: (destination kernel ID, payload without the header)."""
    return message[0], message[GMI_HEADER_BYTES:]


GMI = "<gmi>"  # stands for the GMI kernel itself in `gmi_edges`


def gmi_edges(t: Transfer) -> list[tuple[str, str, int]]:
    """(from, to, bytes per row) of the streams into and out of the GMI kernel of `t`."""
    if t.kind in {"gather", "reduce"}:
        out = t.row_bytes[0] if t.kind == "reduce" else sum(t.row_bytes)
        return [*((s, GMI, b) for s, b in zip(t.sources, t.row_bytes, strict=True)),
                (GMI, t.destinations[0], out)]
    parts = t.row_bytes * len(t.destinations) if t.kind == "broadcast" else t.row_bytes
    into = t.row_bytes[0] if t.kind == "broadcast" else sum(t.row_bytes)
    return [(t.sources[0], GMI, into),
            *((GMI, d, b) for d, b in zip(t.destinations, parts, strict=True))]


def rank_fpgas(fpgas: dict[str, int], t: Transfer, allowed: Iterable[int]) -> list[int]:
    """FPGAs of `allowed` to host the GMI kernel of `t`, best first: the sender's and the
    receivers' by the bytes they would put on the network (one message overhead per
    crossing), ties to the sender side (seeds/000 §5.2); then the cluster's other FPGAs."""
    edges = gmi_edges(t)
    ends = [fpgas[n] for a, b, _ in edges for n in (a, b) if n != GMI]

    def network_bytes(at: int) -> int:
        where = [(at if a == GMI else fpgas[a], at if b == GMI else fpgas[b], n)
                 for a, b, n in edges]
        return sum(n + MESSAGE_OVERHEAD_BYTES for a, b, n in where if a != b)

    allowed = set(allowed)
    near = [f for f in dict.fromkeys(ends) if f in allowed]
    near.sort(key=lambda f: (network_bytes(f), f != ends[0], f))
    return near + sorted(allowed - set(near))


def place_gmi(fpgas: dict[str, int], t: Transfer, allowed: Iterable[int]) -> int:
    """The best FPGA of `rank_fpgas`, ignoring how full it is."""
    ranked = rank_fpgas(fpgas, t, allowed)
    if not ranked:
        raise PartitionError(f"no FPGA of its cluster can host the GMI kernel of '{t.tensor}'")
    return ranked[0]


Placer = Callable[[Transfer, int, dict[str, int]], int]


def gateway_name(cluster: int) -> str:
    return f"C{cluster}.gateway"


class _Builder:
    """Accumulates GMI kernels and streams for `insert_gmi`."""

    def __init__(self, nodes: dict[str, Node], placer: Placer) -> None:
        self.nodes, self.placer = nodes, placer
        self.fpgas = {n.name: n.fpga for n in nodes.values()}
        self.streams: list[Stream] = []
        self.collectives: dict[str, Transfer] = {}

    def stream(self, src: str, dst: str, row_bytes: int, t: Transfer) -> None:
        inter = self.nodes[src].cluster != self.nodes[dst].cluster
        self.streams.append(Stream(src, dst, row_bytes, t.tensor, inter, t.per_key, t.whole,
                                   t.origin))

    def collective(self, t: Transfer, cluster: int, virtual: bool) -> None:
        """Add the GMI (or, fed from another cluster, virtual) kernel of `t` and its streams."""
        name = f"{t.tensor}.{t.kind}"
        fpga = (self.nodes[gateway_name(cluster)].fpga if virtual
                else self.placer(t, cluster, self.fpgas))
        self.nodes[name] = Node(name, "virtual" if virtual else "gmi", fpga, cluster, t.kind)
        self.fpgas[name] = fpga
        self.collectives[name] = t
        for a, b, nbytes in gmi_edges(t):
            self.stream(name if a == GMI else a, name if b == GMI else b, nbytes, t)

    def fan_out(self, t: Transfer) -> None:
        """Broadcast / scatter: one GMI kernel per destination cluster."""
        src = t.sources[0]
        by_cluster: dict[int, list[int]] = defaultdict(list)
        for i, d in enumerate(t.destinations):
            by_cluster[self.nodes[d].cluster].append(i)
        for cluster, picks in by_cluster.items():
            dests = tuple(t.destinations[i] for i in picks)
            parts = t.row_bytes if t.kind == "broadcast" else tuple(t.row_bytes[i] for i in picks)
            if len(dests) == 1:
                self.stream(src, dests[0], parts[0], t)
                continue
            tensor = t.tensor if len(by_cluster) == 1 else f"{t.tensor}.c{cluster}"
            part = replace(t, destinations=dests, row_bytes=parts, tensor=tensor)
            self.collective(part, cluster, virtual=self.nodes[src].cluster != cluster)


def insert_gmi(nodes: dict[str, Node], transfers: Iterable[Transfer],
               placer: Placer) -> GMIGraph:
    """Replace collectives by GMI kernels. `nodes` holds the compute kernels, one gateway
    per cluster and the host; `placer(transfer, cluster, kernel FPGAs)` picks the FPGA of
    a GMI kernel (`place_gmi` over the cluster's FPGAs when fabric is no concern). Gather
    and reduce sit in the destination's cluster; allgather is a gather then a broadcast
    (§5.1); a collective fed from another cluster runs in its gateway."""
    b = _Builder(dict(nodes), placer)
    for t in transfers:
        single = len(t.sources) == 1 and len(t.destinations) == 1
        if t.kind == "p2p" or (single and t.kind != "allgather"):
            b.stream(t.sources[0], t.destinations[0], sum(t.row_bytes), t)
        elif t.kind in {"broadcast", "scatter"}:
            b.fan_out(t)
        elif t.kind in {"gather", "reduce"}:
            b.collective(t, b.nodes[t.destinations[0]].cluster, virtual=False)
        else:  # allgather: gather in the first destination's cluster, then broadcast
            gather = replace(t, kind="gather", destinations=t.destinations[:1])
            b.collective(gather, b.nodes[t.destinations[0]].cluster, virtual=False)
            b.streams.pop()  # the gather feeds the broadcast, not the first destination
            root, first = f"{t.tensor}.gather", len(b.streams)
            b.fan_out(replace(t, kind="broadcast", sources=(root,),
                              row_bytes=(sum(t.row_bytes),)))
            fed = tuple(s.dst for s in b.streams[first:] if s.src == root)
            b.collectives[root] = replace(gather, destinations=fed)
    return GMIGraph(b.nodes, b.streams, b.collectives)


def assign_kernel_ids(nodes: dict[str, Node]) -> dict[int, int]:
    """Contiguous IDs per cluster in the order gateway (0), compute, communication,
    virtual (seeds/000 §6.1); returns the kernel count of each cluster."""
    by_cluster: dict[int, list[Node]] = defaultdict(list)
    for node in nodes.values():
        if node.cluster != HOST_CLUSTER:
            by_cluster[node.cluster].append(node)
    counts = {}
    for cluster, members in sorted(by_cluster.items()):
        members.sort(key=lambda n: _ID_ORDER[n.role])  # stable: keeps graph order inside
        for kernel_id, node in enumerate(members):
            node.kernel_id = kernel_id
        counts[cluster] = len(members)
    check_limits(counts)
    return counts


def check_limits(kernels_per_cluster: dict[int, int]) -> None:
    """The 256 x 256 limits of clusters of clusters, with the numbers that break them."""
    if len(kernels_per_cluster) > MAX_CLUSTERS:
        raise PartitionError(
            f"the build needs {len(kernels_per_cluster)} Galapagos clusters; at most "
            f"{MAX_CLUSTERS} are addressable (seeds/000 §4)")
    for cluster, count in kernels_per_cluster.items():
        if count > MAX_KERNELS_PER_CLUSTER:
            raise PartitionError(
                f"Galapagos cluster {cluster} needs {count} kernels; a cluster holds at most "
                f"{MAX_KERNELS_PER_CLUSTER} (seeds/000 §4)")


@dataclass(frozen=True)
class RoutingTables:
    """What every FPGA of one cluster stores (seeds/000 §4, Fig. 4): the IP of each kernel
    of its own cluster (TUSER bit 16 = 0) and the IP of every other cluster's gateway
    (bit 16 = 1): N + (C - 1) entries, 2N - 1 when there are N clusters of N kernels."""

    cluster: int
    intra: tuple[str, ...]  # index = kernel ID
    inter: dict[int, str]  # cluster -> its gateway FPGA's IP

    @property
    def entries(self) -> int:
        return len(self.intra) + len(self.inter)

    @property
    def bytes(self) -> int:
        return self.entries * IP_ENTRY_BYTES


def routing_tables(nodes: dict[str, Node], fpga_ip: Sequence[str]) -> dict[int, RoutingTables]:
    """One pair of tables per cluster (all its FPGAs hold the same pair)."""
    by_cluster: dict[int, list[Node]] = defaultdict(list)
    for node in nodes.values():
        if node.cluster != HOST_CLUSTER:
            by_cluster[node.cluster].append(node)
    gateways = {c: fpga_ip[nodes[gateway_name(c)].fpga] for c in by_cluster}
    tables = {}
    for cluster, members in by_cluster.items():
        intra = [""] * len(members)
        for node in members:
            intra[node.kernel_id] = fpga_ip[node.fpga]
        inter = {c: ip for c, ip in gateways.items() if c != cluster}
        tables[cluster] = RoutingTables(cluster, tuple(intra), inter)
    return tables
