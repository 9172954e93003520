"""Estimate a dataflow plan: per-encoder X, T and I (seeds/000 §8.2.2), the whole-model
latency T + (L - 1)(X + d) (Eq. 1), throughput set by the slowest kernel, padded and
unpadded sequences, and each FPGA's fabric.

The encoder's rows are followed through its kernels in stream order: a kernel starts row r
when the row has arrived on every input (for K and V of attention: when every row has),
no sooner than one row interval after row r - 1, and sends it one row latency later. A hop
costs the row's flits on the stream, plus the one-way network latency between FPGAs, plus
the switch-to-switch latency d between clusters. As in the paper's measurement, the
evaluation node sends the input rows back to back at cycle 0 and takes the output on the
same switch, so d enters only through Eq. 1.
"""

from collections import defaultdict
from dataclasses import dataclass, field
from itertools import pairwise

import numpy as np

from archipelago.estimate.workload import Sequence
from archipelago.hardware.device import FABRIC
from archipelago.strategies.galapagos.gmi import HOST, gateway_name
from archipelago.strategies.galapagos.kernel_design import flits
from archipelago.strategies.galapagos.plan import DataflowPlan


@dataclass(frozen=True)
class EncoderTiming:
    """One encoder at `seq_len` tokens, in kernel clock cycles: the first output row X,
    the last T, the mean packet interval I = (T - X) / M (Table 1's definition), and the
    busiest kernel's cycles per sequence."""

    seq_len: int
    first_output: float
    last_output: float
    bottleneck: float
    bottleneck_kernel: str

    @property
    def interval(self) -> float:
        return (self.last_output - self.first_output) / self.seq_len


@dataclass
class StreamEstimate:
    seq_len: int
    clock_hz: float
    switch_latency_s: float
    timing: EncoderTiming
    padded: EncoderTiming
    layers: int
    kernels: int
    clusters: int
    feasible: bool
    reasons: list[str] = field(default_factory=list)

    def whole_model_s(self, timing: EncoderTiming) -> float:
        """Eq. 1: T + (L - 1)(X + d)."""
        f = self.clock_hz
        return (timing.last_output / f
                + (self.layers - 1) * (timing.first_output / f + self.switch_latency_s))

    @property
    def latency_s(self) -> float:
        return self.whole_model_s(self.timing)

    @property
    def throughput_per_s(self) -> float:
        """Sequences per second: the encoders form one pipeline paced by its busiest kernel."""
        return self.clock_hz / self.timing.bottleneck

    @property
    def tokens_per_s(self) -> float:
        """Tokens a second at that pace (what a design search ranks, as for decoders)."""
        return self.throughput_per_s * self.seq_len


class _LayerGraph:
    """The kernels one encoder's rows pass through, with hop costs, in stream order."""

    def __init__(self, plan: DataflowPlan, layer: int, seq_len: int) -> None:
        self.plan, self.m = plan, seq_len
        nodes = plan.nodes
        members = set(plan.layer_kernels(layer))
        f = plan.engine.config.clock_hz
        link = plan.cluster.ring_link
        self.net = link.latency_s * f if link else 0.0
        self.d = plan.cluster.switch_latency_s * f
        self.flit = plan.engine.config.flit_bytes
        self.edges: dict[str, list[tuple[str, float, bool]]] = defaultdict(list)
        self.entry: list[tuple[str, float]] = []
        self.exit: list[tuple[str, float]] = []
        for s in plan.streams:
            if s.src not in members and s.dst not in members:
                continue
            nbytes = s.bytes_at(seq_len)
            hops = [s.src, s.dst]
            if s.inter_cluster and nodes[s.dst].role != "virtual" and s.dst != HOST:
                hops.insert(1, gateway_name(nodes[s.dst].cluster))
            whole = s.whole and nodes[s.dst].role == "compute"
            for a, b in pairwise(hops):
                if a not in members:
                    self.entry.append((b, flits(nbytes, self.flit) + self.net))
                elif b not in members:
                    self.exit.append((a, flits(nbytes, self.flit) + self.net))
                else:
                    self.edges[b].append((a, self._hop(a, b, nbytes), whole and b == s.dst))
        self.order = self._stream_order(members)
        self.sent: dict[str, np.ndarray] = {}  # each kernel's row send cycles, once run

    def _hop(self, a: str, b: str, nbytes: int) -> float:
        na, nb = self.plan.nodes[a], self.plan.nodes[b]
        cycles = flits(nbytes, self.flit)
        if na.fpga == nb.fpga:
            return 0.0 if "virtual" in (na.role, nb.role) else cycles
        return cycles + self.net + (self.d if na.cluster != nb.cluster else 0.0)

    def _stream_order(self, members: set[str]) -> list[str]:
        """Kahn's order over the layer's edges (the kernel graph is acyclic)."""
        indegree = {n: len(self.edges[n]) for n in members}
        out: dict[str, list[str]] = defaultdict(list)
        for b, ins in self.edges.items():
            for a, _, _ in ins:
                out[a].append(b)
        ready = [n for n in members if indegree[n] == 0]
        order = []
        while ready:
            n = ready.pop()
            order.append(n)
            for b in out[n]:
                indegree[b] -= 1
                if indegree[b] == 0:
                    ready.append(b)
        assert len(order) == len(members), "the kernel graph of an encoder has a cycle"
        return order

    def kernel_cycles(self, name: str) -> tuple[float, float]:
        """(row interval, row latency) of a kernel; virtual kernels cost their gateway."""
        node = self.plan.nodes[name]
        if node.role == "virtual":
            return 0.0, 0.0
        design, engine = self.plan.designs[name], self.plan.engine
        return engine.row_cycles(design, self.m), engine.latency_cycles(design, self.m)

    def run(self) -> EncoderTiming:
        m = self.m
        rows = np.arange(m, dtype=float)
        send = rows * flits(self.plan.spec.hidden, self.flit)  # back to back from cycle 0
        sent: dict[str, np.ndarray] = {}
        busiest, busiest_kernel = 0.0, ""
        for name in self.order:
            ready = np.zeros(m)
            for target, hop in self.entry:
                if target == name:
                    ready = np.maximum(ready, send + hop)
            for src, hop, whole in self.edges[name]:
                arrival = sent[src] + hop
                ready = np.maximum(ready, arrival[-1] if whole else arrival)
            interval, latency = self.kernel_cycles(name)
            start = interval * rows + np.maximum.accumulate(ready - interval * rows)
            sent[name] = start + latency
            if interval * m > busiest:
                busiest, busiest_kernel = interval * m, name
        self.sent = sent
        out = np.max([sent[a] + hop for a, hop in self.exit], axis=0)
        return EncoderTiming(m, float(out[0]), float(out[-1]), busiest, busiest_kernel)


def encoder_timing(plan: DataflowPlan, seq_len: int, layer: int = 0) -> EncoderTiming:
    """X, T, I of one encoder at `seq_len` tokens (every encoder is built the same)."""
    return _LayerGraph(plan, layer, seq_len).run()


def kernel_outputs(plan: DataflowPlan, seq_len: int, layer: int = 0
                   ) -> dict[str, tuple[float, float]]:
    """Cycle at which each kernel of one encoder sends its first and its last row, in
    stream order (the schedule behind X and T)."""
    graph = _LayerGraph(plan, layer, seq_len)
    graph.run()
    return {n: (float(graph.sent[n][0]), float(graph.sent[n][-1])) for n in graph.order}


def feasibility(plan: DataflowPlan, seq_len: int) -> list[str]:
    reasons = []
    have = plan.cluster.size
    if plan.fpgas_needed > have:
        reasons.append(f"the unrolled {plan.spec.name} needs {plan.fpgas_needed} "
                       f"{plan.fpgas[0].device.key} FPGAs; the cluster has {have}")
    if seq_len > plan.engine.config.max_seq_len:
        reasons.append(f"sequence of {seq_len} tokens exceeds the {plan.engine.config.max_seq_len}"
                       " the FIFOs are built for (engine parameter max_seq_len)")
    if seq_len > plan.spec.max_positions:
        reasons.append(f"sequence of {seq_len} tokens exceeds the model's "
                       f"{plan.spec.max_positions} positions")
    for res in FABRIC:
        over = [u for u in plan.fpgas if res in u.resources.exceeding(u.device.resources)]
        if over:
            worst = max(over, key=lambda u: getattr(u.resources, res))
            reasons.append(f"{len(over)} FPGA(s) exceed their {res.upper()}, e.g. FPGA "
                           f"{worst.index} ({worst.device.key}) needs "
                           f"{getattr(worst.resources, res)}, has "
                           f"{getattr(worst.device.resources, res)}")
    return reasons


def estimate_stream(plan: DataflowPlan, seq_len: int) -> StreamEstimate:
    if seq_len < 1:
        raise ValueError("seq_len must be >= 1")
    padded_len = plan.engine.config.max_seq_len
    return StreamEstimate(
        seq_len=seq_len,
        clock_hz=plan.engine.config.clock_hz,
        switch_latency_s=plan.cluster.switch_latency_s,
        timing=encoder_timing(plan, seq_len),
        padded=encoder_timing(plan, max(seq_len, padded_len)),
        layers=plan.spec.layers,
        kernels=plan.kernel_count,
        clusters=len(plan.clusters),
        feasible=not (reasons := feasibility(plan, seq_len)),
        reasons=reasons,
    )


def estimate(plan: DataflowPlan, workload: Sequence) -> StreamEstimate:
    """The dataflow kind's estimator: one encoder pass over `workload.seq_len` tokens."""
    return estimate_stream(plan, workload.seq_len)
