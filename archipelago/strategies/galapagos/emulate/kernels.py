"""The kernels as threads: compute kernels, GMI kernels, gateways and the host. Each runs
one sequence of `seq_len` rows, one packet per row per stream, and returns."""

import threading
from collections import defaultdict, deque

import numpy as np
import torch

from archipelago.strategies.galapagos.emulate.compute import OPERAND, KernelCompute
from archipelago.strategies.galapagos.emulate.params import LayerParams
from archipelago.strategies.galapagos.emulate.router import Endpoint, Packet
from archipelago.strategies.galapagos.gmi import HOST, Stream, unframe
from archipelago.strategies.galapagos.plan import DataflowPlan

# Element types on the wire, by the role that produced them: int8 activations, 9-bit
# softmax probabilities in int16, int32 accumulators and 22-bit residual sums.
WIRE_TYPES: dict[str, type] = {
    "input": np.int8, "q": np.int8, "k": np.int8, "v": np.int8, "score": np.int16,
    "context": np.int8, "attn_out": np.int32, "ln1": np.int8, "ffn_up": np.int8,
    "ffn_down": np.int32, "ln2": np.int8,
}


def encode(row: np.ndarray | torch.Tensor, role: str) -> bytes:
    values = np.asarray(row, dtype=np.float64)
    wire = WIRE_TYPES[role]
    assert np.all(values == np.round(values)), f"{role} rows must be integers"
    info = np.iinfo(wire)
    assert values.min(initial=0) >= info.min and values.max(initial=0) <= info.max
    return values.astype(wire).tobytes()


def decode(payload: bytes, role: str) -> np.ndarray:
    return np.frombuffer(payload, dtype=WIRE_TYPES[role])


class Wiring:
    """Each kernel's inbound and outbound streams (and the gateway's inbound count)."""

    def __init__(self, plan: DataflowPlan, seq_len: int) -> None:
        self.plan, self.m = plan, seq_len
        self.into: dict[str, list[Stream]] = defaultdict(list)
        self.out: dict[str, list[Stream]] = defaultdict(list)
        for s in plan.streams:
            self.into[s.dst].append(s)
            self.out[s.src].append(s)

    def gateway_messages(self, cluster: int) -> int:
        """Rows that reach `cluster` from other clusters (each one message)."""
        nodes = self.plan.nodes
        return self.m * sum(1 for s in self.plan.streams
                            if s.inter_cluster and s.dst != HOST
                            and nodes[s.dst].cluster == cluster)


def run_compute(w: Wiring, ep: Endpoint, params: list[LayerParams],
                lock: threading.Lock) -> None:
    """Collect every inbound row, compute under the shared lock, send the output rows."""
    name = ep.node.name
    kernel = w.plan.compute[name]
    streams = {s.src: s for s in w.into[name]}
    rows: dict[str, list[np.ndarray]] = defaultdict(list)
    for _ in range(w.m * len(streams)):
        packet = ep.receive()
        stream = streams[packet.origin]
        rows[packet.origin].append(decode(packet.payload, stream.origin))
    operands = {OPERAND[(kernel.role, streams[src].origin)]:
                torch.from_numpy(np.stack(r).astype(np.float32)) for src, r in rows.items()}
    compute = KernelCompute(kernel, params[kernel.layer], w.plan.spec.head_dim)
    with lock:
        result = compute.run(operands)
    for stream in w.out[name]:
        for row in result:
            ep.send(stream, encode(row.numpy(), kernel.role))


def _emit(w: Wiring, ep: Endpoint, name: str, payload: bytes, origin: str,
          parts: list[int] | None = None) -> None:
    """Send a row on every outbound stream of kernel `name` (a scatter sends each
    destination its part, in the transfer's destination order)."""
    outbound = w.out[name]
    if parts is None:
        for stream in outbound:
            ep.send(stream, payload, origin)
        return
    t = w.plan.collectives[name]
    offsets = np.cumsum([0, *t.row_bytes])
    by_dst = {s.dst: s for s in outbound}
    for i, dst in enumerate(t.destinations):
        ep.send(by_dst[dst], payload[offsets[i]:offsets[i + 1]], origin)


class Collective:
    """A GMI kernel's row logic, also run by a gateway for its virtual kernels."""

    def __init__(self, w: Wiring, name: str) -> None:
        self.w, self.name = w, name
        self.t = w.plan.collectives[name]
        self.pending: dict[str, deque[bytes]] = defaultdict(deque)
        self.role = w.into[name][0].origin  # what its rows are (for the reduce's int32)

    def take(self, ep: Endpoint, packet: Packet, payload: bytes) -> None:
        """Handle one inbound row; `ep` sends (a gateway's, for a virtual kernel)."""
        kind, t = self.t.kind, self.t
        if kind in {"broadcast", "scatter"}:
            _emit(self.w, ep, self.name, payload, self.name,
                  None if kind == "broadcast" else list(t.row_bytes))
            return
        self.pending[packet.origin].append(payload)
        if all(self.pending[s] for s in t.sources):
            parts = [self.pending[s].popleft() for s in t.sources]
            if kind == "gather":
                row = b"".join(parts)
            else:  # reduce: int32 partial sums
                row = encode(np.sum([decode(p, self.role).astype(np.int64) for p in parts],
                                    axis=0), self.role)
            _emit(self.w, ep, self.name, row, self.name)

    def rows_in(self) -> int:
        return self.w.m * len(self.w.into[self.name])


def run_gmi(w: Wiring, ep: Endpoint) -> None:
    collective = Collective(w, ep.node.name)
    for _ in range(collective.rows_in()):
        packet = ep.receive()
        collective.take(ep, packet, packet.payload)


def run_gateway(w: Wiring, ep: Endpoint) -> None:
    """Packet Decoder, virtual GMI kernels and forwarding module of Fig. 8."""
    cluster = ep.node.cluster
    by_id = {n.kernel_id: n for n in w.plan.nodes.values() if n.cluster == cluster}
    virtual = {n.name: Collective(w, n.name) for n in by_id.values() if n.role == "virtual"}
    for _ in range(w.gateway_messages(cluster)):
        packet = ep.receive()
        dest, payload = unframe(packet.payload)
        target = by_id[dest]
        if target.name in virtual:
            virtual[target.name].take(ep, packet, payload)
        else:
            stream = next(s for s in w.into[target.name] if s.src == packet.origin)
            ep.send(_local(stream), payload, packet.origin)


def _local(stream: Stream) -> Stream:
    """The last hop of an inter-cluster stream, from the gateway inside the cluster."""
    return Stream(stream.src, stream.dst, stream.row_bytes, stream.tensor, False,
                  stream.per_key, stream.whole, stream.origin)


def run_host(w: Wiring, ep: Endpoint, rows: np.ndarray) -> np.ndarray:
    """Feed the first encoder, collect the last one's rows."""
    for stream in w.out[HOST]:
        for row in rows:
            ep.send(stream, encode(row, "input"))
    inbound = w.into[HOST]
    out = [decode(ep.receive().payload, inbound[0].origin) for _ in range(w.m * len(inbound))]
    return np.stack(out)
