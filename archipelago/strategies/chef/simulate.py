"""CHEF's simulator (seeds/004 §VI): the cost tables of one deployment, and the schedule a
layer-to-accelerator mapping gives (the recurrence itself is schedule.run).

Every accelerator runs its layers in the DAG's wave order (the order CHEF-M2A maps them
in). Transfers (§V-A, Features 3-4): same accelerator or same DRAM bank: none; same FPGA,
other bank: through the chip at the slower bank's bandwidth; other FPGA: BW_inter.
Accelerators sharing a bank divide its bandwidth.
"""

from collections import Counter
from dataclasses import dataclass

from archipelago.hardware.machines import Cluster
from archipelago.models.dag import ModelDAG
from archipelago.strategies.chef.deployment import Deployment
from archipelago.strategies.chef.ip_templates import IPTemplate, dram_bytes, layer_cost
from archipelago.strategies.chef.schedule import INF, Reads, run


class Tables:
    """Everything the mapping loops read, as plain lists indexed by wave-order position."""

    def __init__(self, costs: "LayerCosts", cluster: Cluster,
                 deployment: Deployment) -> None:
        dag, layout = costs.dag, costs.layout
        self.dag, self.cluster, self.deployment = dag, cluster, deployment
        # the DAG's own tables, shared by every deployment of a search (read, never written)
        self.names, self.preds, self.succs = layout.names, layout.preds, layout.succs
        self.wave_of, self.type_of = layout.wave_of, layout.type_of
        self.compute, self.dram, self.reads = layout.compute, layout.dram, layout.reads
        accs = deployment.accs
        self.fpga_of = [a.fpga for a in accs]
        sharers = Counter((a.fpga, a.bank) for a in accs)
        self.dram_Bps = [cluster.nodes[a.fpga].banks[a.bank].bandwidth_Bps
                         / sharers[(a.fpga, a.bank)] for a in accs]
        columns = [costs.column(a.ip, cluster.nodes[a.fpga].clock_hz, bw)
                   for a, bw in zip(accs, self.dram_Bps, strict=True)]
        self.cost = [list(row) for row in zip(*columns, strict=True)]
        self.per_byte = _per_byte(cluster, [(a.fpga, a.bank) for a in accs])
        self.capacity = [f.dram_bytes for f in cluster.nodes]
        self.accs_on = [[a for a, f in enumerate(self.fpga_of) if f == i]
                        for i in range(len(cluster.nodes))]
        self.runs_on = [[a for a, c in enumerate(row) if c < INF] for row in self.cost]

    @property
    def n_layers(self) -> int:
        return len(self.names)

    @property
    def n_accs(self) -> int:
        return len(self.deployment.accs)


class DagLayout:
    """The deployment-independent tables of a DAG, by wave-order position: built once per
    search, since A2F builds hundreds of Tables of the same DAG."""

    def __init__(self, dag: ModelDAG) -> None:
        self.names = dag.order
        pos = {name: i for i, name in enumerate(self.names)}
        layers = [dag.by_name[n] for n in self.names]
        self.preds = [[(pos[d], dag.by_name[d].out_elements * 4) for d in la.deps]
                      for la in layers]
        self.succs = [[pos[s] for s in dag.successors[n]] for n in self.names]
        self.wave_of = [0] * len(layers)
        for w, wave in enumerate(dag.levels):
            for name in wave:
                self.wave_of[pos[name]] = w
        self.type_of = [la.type for la in layers]
        self.compute = [la.is_compute for la in layers]
        self.dram = [dram_bytes(dag, la) for la in layers]
        self.reads = Reads(self.preds)


class LayerCosts:
    """Each layer's latency on an IP at a clock and bandwidth, computed once per search
    (A2F builds hundreds of deployments out of the same few columns), and the DAG's
    layout."""

    def __init__(self, dag: ModelDAG) -> None:
        self.dag = dag
        self.layout = DagLayout(dag)
        self._columns: dict[tuple[str, float, float], tuple[float, ...]] = {}

    def column(self, ip: IPTemplate, freq_hz: float, dram_Bps: float) -> tuple[float, ...]:
        key = (ip.name, freq_hz, dram_Bps)
        if key not in self._columns:
            layers = [self.dag.by_name[n] for n in self.dag.order]
            self._columns[key] = tuple(
                layer_cost(ip, self.dag, la, freq_hz, dram_Bps).latency_s if ip.runs(la)
                else INF for la in layers)
        return self._columns[key]


def _per_byte(cluster: Cluster, places: list[tuple[int, int]]) -> list[list[float]]:
    """Transfer seconds per byte between accelerators at (FPGA, bank) `places`, row a
    column b meaning from b to a. BW_inter is looked up once per pair of FPGAs, not of
    accelerators: A2F builds hundreds of deployments of dozens of accelerators."""
    fpgas = sorted({f for f, _ in places})
    inter = {(f, g): 1.0 / cluster.pair_Bps(f, g) for f in fpgas for g in fpgas if f != g}
    rows = []
    for fa, ba in places:
        banks = cluster.nodes[fa].banks
        rows.append([
            (0.0 if ba == bb else 1.0 / min(banks[ba].bandwidth_Bps, banks[bb].bandwidth_Bps))
            if fa == fb else inter[fa, fb] for fb, bb in places])
    return rows


def makespan(t: Tables, mapping: list[int], bound: float = INF) -> float:
    """The latency of `mapping` (layer position -> accelerator); the hot loop of M2A. Stops
    early, returning INF, once a layer ends at or after `bound`."""
    return run(t.cost, t.preds, t.per_byte, mapping, range(t.n_layers), [0.0] * t.n_accs,
               [0.0] * t.n_layers, bound)


@dataclass(frozen=True)
class Schedule:
    """Start and end of every layer on its accelerator; `comm_s` is each layer's transfer."""

    mapping: tuple[int, ...]
    start: tuple[float, ...]
    end: tuple[float, ...]
    comm_s: tuple[float, ...]

    @property
    def latency_s(self) -> float:
        return max(self.end)

    @property
    def comm_ratio(self) -> float:
        """Table V: accelerator-to-accelerator transfer time over all layer boxes."""
        busy = sum(e - s for s, e in zip(self.start, self.end, strict=True))
        return sum(self.comm_s) / busy if busy else 0.0

    def duty_cycles(self, n_accs: int) -> list[float]:
        busy = [0.0] * n_accs
        for acc, s, e in zip(self.mapping, self.start, self.end, strict=True):
            busy[acc] += e - s
        return [b / self.latency_s for b in busy]


def simulate(t: Tables, mapping: list[int]) -> Schedule:
    start, end, comm = [0.0] * t.n_layers, [0.0] * t.n_layers, [0.0] * t.n_layers
    latency = run(t.cost, t.preds, t.per_byte, mapping, range(t.n_layers), [0.0] * t.n_accs,
                  end, start=start, comm=comm)
    assert latency < INF, "a layer was mapped to an accelerator that cannot run it"
    # a layer without inputs transfers nothing: the integer 0 that --json has always shown
    comm = [c if t.preds[i] else 0 for i, c in enumerate(comm)]
    return Schedule(tuple(mapping), tuple(start), tuple(end), tuple(comm))


def dram_use(t: Tables, mapping: list[int]) -> list[int]:
    use = [0] * len(t.capacity)
    for i, acc in enumerate(mapping):
        use[t.fpga_of[acc]] += t.dram[i]
    return use
