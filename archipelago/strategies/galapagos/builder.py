"""The Cluster Builder (seeds/000 §6): from unrolled encoders to a wired, addressed build.

Steps: pack each group of encoders onto FPGAs, cut the FPGAs into Galapagos clusters of at
most 256 kernels, insert the GMI kernels (each on the best-ranked FPGA with room left),
size each cluster's gateway and put it, with its virtual kernels, on the FPGA that takes
most of the inter-cluster bytes, give every cluster its contiguous kernel IDs, then add up
each FPGA's fabric and write the routing tables. If GMI kernels push a cluster past 256
IDs, the whole assembly is redone with fewer compute kernels per cluster.
"""

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence

from archipelago.engines.base import add_resources
from archipelago.errors import PartitionError
from archipelago.hardware.cluster import Cluster
from archipelago.models.spec import ModelSpec
from archipelago.strategies.galapagos.gmi import (
    GMI,
    HOST,
    HOST_CLUSTER,
    MAX_KERNELS_PER_CLUSTER,
    GMIGraph,
    Node,
    Transfer,
    assign_kernel_ids,
    gateway_name,
    gmi_edges,
    insert_gmi,
    rank_fpgas,
    routing_tables,
)
from archipelago.strategies.galapagos.hls_stream import HLSStreamEngine, fabric
from archipelago.strategies.galapagos.kernel_design import KernelDesign, KernelJob, flits
from archipelago.strategies.galapagos.mapping import cut_clusters, first_fit, fpga_address, spread
from archipelago.strategies.galapagos.plan import (
    ComputeKernel,
    DataflowPlan,
    FPGAUse,
    KernelCluster,
)
from archipelago.strategies.galapagos.unroll import LayerKernels, Unroller, output_transfer

_RETRIES = 8  # attempts at a smaller per-cluster budget when GMI kernels overflow one


def build_plan(spec: ModelSpec, cluster: Cluster, engine: HLSStreamEngine,
               row_interval: int) -> DataflowPlan:
    device = cluster.devices[0]
    unroller = Unroller(spec, engine, device, row_interval)
    layers: list[LayerKernels] = []
    for layer in range(spec.layers):
        source = HOST if layer == 0 else f"L{layer - 1}.ln2"
        layers.append(unroller.layer(layer, source))
    transfers = [t for lk in layers for t in lk.transfers]
    transfers.append(output_transfer(f"L{spec.layers - 1}.ln2", spec.hidden))
    compute = {k.name: k for lk in layers for k in lk.kernels}
    budget = MAX_KERNELS_PER_CLUSTER - 1  # the gateway takes ID 0
    for _ in range(_RETRIES):
        assembly = _Assembly(spec, cluster, engine, compute, layers, transfers, budget,
                             row_interval)
        excess = assembly.overflow()
        if excess <= 0:
            return assembly.plan()
        budget -= excess
    raise PartitionError(f"{spec.name}: no cut of its encoders into Galapagos clusters keeps "
                         f"every cluster within {MAX_KERNELS_PER_CLUSTER} kernels")


class _Assembly:
    """One attempt at clustering with at most `budget` compute kernels per cluster."""

    def __init__(self, spec: ModelSpec, cluster: Cluster, engine: HLSStreamEngine,
                 compute: dict[str, ComputeKernel], layers: Sequence[LayerKernels],
                 transfers: list[Transfer], budget: int, row_interval: int) -> None:
        self.spec, self.cluster, self.engine = spec, cluster, engine
        self.row_interval = row_interval
        self.compute = compute
        self.fpga_kernels: list[list[str]] = []
        self.clusters: list[list[int]] = []
        for bins in _place(cluster, engine, compute, layers):
            base = len(self.fpga_kernels)
            self.fpga_kernels += bins
            self.clusters += [[base + i for i in c] for c in cut_clusters(bins, budget)]
        self.room = _Room(fabric(cluster.devices[0].resources),
                          [_total(compute[k].design for k in b) for b in self.fpga_kernels])
        self._cache: dict[KernelJob, KernelDesign] = {}
        self.graph: GMIGraph = insert_gmi(self._nodes(), transfers, self._place_gmi)
        self.gateways = self._place_gateways()
        self.counts = Counter(n.cluster for n in self.graph.nodes.values()
                              if n.cluster != HOST_CLUSTER)

    def overflow(self) -> int:
        return max(self.counts.values()) - MAX_KERNELS_PER_CLUSTER

    def _nodes(self) -> dict[str, Node]:
        """Compute kernels, the host, and each cluster's gateway (moved once sized)."""
        nodes = {HOST: Node(HOST, "compute", -1, HOST_CLUSTER)}
        for c, fpgas in enumerate(self.clusters):
            nodes[gateway_name(c)] = Node(gateway_name(c), "gateway", fpgas[0], c)
            for f in fpgas:
                for name in self.fpga_kernels[f]:
                    nodes[name] = Node(name, "compute", f, c)
        return nodes

    def _design(self, job: KernelJob) -> KernelDesign:
        if job not in self._cache:
            self._cache[job] = self.engine.design(job, self.row_interval)
        return self._cache[job]

    def _gmi_design(self, t: Transfer) -> KernelDesign:
        """A GMI kernel forwards its row's flits in and out concurrently (§5.3)."""
        scale = self.engine.config.max_seq_len if t.per_key else 1
        return self._design(_forwarding_job(GMI, gmi_edges(t), scale))

    def _place_gmi(self, t: Transfer, cluster: int, fpgas: dict[str, int]) -> int:
        """The best-ranked FPGA of the cluster with room left (up to the whole device),
        or a further FPGA for the cluster when none has."""
        cost = fabric(self._gmi_design(t).resources)
        return self._take(rank_fpgas(fpgas, t, self.clusters[cluster]), cost, cluster)

    def _take(self, ranked: Sequence[int], cost: tuple[int, ...], cluster: int) -> int:
        for f in ranked:
            if self.room.fits(f, cost):
                self.room.take(f, cost)
                return f
        f = self.room.add(cost)
        self.fpga_kernels.append([])
        self.clusters[cluster].append(f)
        return f

    def _place_gateways(self) -> dict[str, KernelDesign]:
        """Size each gateway from the messages it decodes and forwards (Fig. 8) and put it
        on the FPGA that consumes most of them, room permitting; its virtual kernels go
        with it."""
        nodes, m = self.graph.nodes, self.engine.config.max_seq_len
        edges: dict[int, list[tuple[str, str, int]]] = defaultdict(list)
        consumed: dict[int, Counter] = defaultdict(Counter)
        for s in self.graph.streams:
            src, dst = nodes[s.src], nodes[s.dst]
            if s.inter_cluster and s.dst != HOST:
                edges[dst.cluster].append((s.src, "gw", s.bytes_at(m)))
                if dst.role != "virtual":
                    consumed[dst.cluster][dst.fpga] += s.bytes_at(m)
            if src.role == "virtual":
                edges[src.cluster].append(("gw", s.dst, s.bytes_at(m)))
                consumed[src.cluster][dst.fpga] += s.bytes_at(m)
        moving: dict[int, list[Node]] = defaultdict(list)
        for node in nodes.values():
            if node.role in {"gateway", "virtual"}:
                moving[node.cluster].append(node)
        designs = {}
        for c, fpgas in enumerate(self.clusters):
            design = self._design(_forwarding_job("gw", edges[c], 1))
            ranked = sorted(fpgas, key=lambda f, c=c: (-consumed[c][f], f))
            fpga = self._take(ranked, fabric(design.resources), c)
            for node in moving[c]:
                node.fpga = fpga
            designs[gateway_name(c)] = design
        return designs

    def plan(self) -> DataflowPlan:
        nodes = self.graph.nodes
        assign_kernel_ids(nodes)
        designs = {name: k.design for name, k in self.compute.items()}
        designs |= {name: self._gmi_design(t) for name, t in self.graph.collectives.items()
                    if nodes[name].role == "gmi"}
        designs |= self.gateways
        on_fpga: list[list[str]] = [[] for _ in self.fpga_kernels]
        for name, node in nodes.items():
            if node.fpga >= 0:
                on_fpga[node.fpga].append(name)
        addresses = [fpga_address(i) for i in range(len(on_fpga))]
        device = self.cluster.devices[0]
        cluster_of = {f: c for c, fs in enumerate(self.clusters) for f in fs}
        fpgas = [FPGAUse(i, device, cluster_of[i], names,
                         add_resources(*(designs[n].resources for n in names if n in designs)),
                         *addresses[i])
                 for i, names in enumerate(on_fpga)]
        clusters = [KernelCluster(c, tuple(sorted({self.compute[k].layer for f in fs
                                                   for k in self.fpga_kernels[f]})),
                                  tuple(fs), self.counts[c])
                    for c, fs in enumerate(self.clusters)]
        tables = routing_tables(nodes, [ip for ip, _ in addresses])
        return DataflowPlan("galapagos", self.spec, self.cluster, self.engine, self.row_interval,
                            self.compute, nodes, designs, self.graph.streams,
                            self.graph.collectives, clusters, fpgas, tables)


class _Room:
    """Fabric left on each FPGA, up to the whole device (communication kernels may use
    the headroom the packing cap leaves)."""

    def __init__(self, device: tuple[int, ...], used: list[tuple[int, ...]]) -> None:
        self.device, self.used = device, [list(u) for u in used]

    def fits(self, f: int, cost: Sequence[int]) -> bool:
        return all(u + c <= d for u, c, d in zip(self.used[f], cost, self.device, strict=True))

    def take(self, f: int, cost: Sequence[int]) -> None:
        self.used[f] = [u + c for u, c in zip(self.used[f], cost, strict=True)]

    def add(self, cost: Sequence[int]) -> int:
        self.used.append(list(cost))
        return len(self.used) - 1


def _place(cluster: Cluster, engine: HLSStreamEngine, compute: dict[str, ComputeKernel],
           layers: Sequence[LayerKernels]) -> list[list[list[str]]]:
    """Kernel names per FPGA for each group of `layers_per_cluster` encoders: first fit
    under the cap, then spread over an equal share of any FPGAs the cluster has to spare."""
    device = cluster.devices[0]
    per = engine.config.layers_per_cluster
    chunks = [[g for lk in layers[i:i + per] for g in lk.groups]
              for i in range(0, len(layers), per)]
    capacity = engine.capacity(device)
    costs = []
    for groups in chunks:
        cost = tuple(_total(compute[k].design for k in g) for g in groups)
        for g, c in zip(groups, cost, strict=True):
            if any(n > limit for n, limit in zip(c, capacity, strict=True)):
                raise PartitionError(
                    f"kernels {', '.join(g)} do not fit one {device.key} under the "
                    f"{engine.config.utilization:.0%} utilization cap")
        costs.append(cost)
    minimal = [first_fit(c, capacity) for c in costs]
    spare = max(0, cluster.size - sum(map(len, minimal))) // len(chunks)
    placed = []
    for groups, cost, bins in zip(chunks, costs, minimal, strict=True):
        if spare:
            bins = spread(cost, fabric(device.resources), engine.config.utilization,
                          len(bins) + spare)
        placed.append([[k for g in b for k in groups[g]] for b in bins])
    return placed


def _total(designs: Iterable[KernelDesign]) -> tuple[int, ...]:
    """Summed fabric of some kernels, as the packers count it."""
    return tuple(map(sum, zip(*(fabric(d.resources) for d in designs), strict=True)))


def _forwarding_job(kernel: str, edges: Sequence[tuple[str, str, int]],
                    scale: int) -> KernelJob:
    """A kernel that only moves data; `edges` are (from, to, bytes per row) in and out of
    `kernel`, scaled by `scale` (the sequence length for per-key rows)."""
    ins = tuple(b * scale for a, _, b in edges if a != kernel)
    outs = [b * scale for a, _, b in edges if a == kernel]
    return KernelJob("gmi", 0, 0, ins, max(outs, default=0),
                     flits_per_row=max(sum(map(flits, ins)), sum(map(flits, outs))))
