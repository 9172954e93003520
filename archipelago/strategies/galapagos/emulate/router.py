"""A libGalapagos-style software router (seeds/000 §2.1): kernels exchange packets with a
(dest, id, size) header; the router looks the destination kernel up in the kernel-to-node
table (the map file) and delivers it, counting what crosses each FPGA-to-FPGA link.
Inter-cluster packets are addressed to the destination cluster's gateway (kernel 0) and
carry the one-byte GMI header (seeds/000 §4-5)."""

import queue
import threading
import time
from collections import Counter
from dataclasses import dataclass

from archipelago.errors import ArchipelagoError
from archipelago.strategies.galapagos.gmi import HOST, Node, Stream, frame
from archipelago.strategies.galapagos.plan import DataflowPlan

_POLL_S = 0.05


@dataclass(frozen=True)
class Packet:
    """`dest`: kernel ID in `cluster`; `id`: the sender's kernel ID; `size`: payload bytes;
    `inter`: TUSER bit 16 (an inter-cluster message for the gateway). `origin` names the
    kernel that produced the payload, which a forwarding gateway keeps."""

    dest: int
    id: int
    size: int
    payload: bytes
    cluster: int
    inter: bool
    origin: str


class Router:
    def __init__(self, plan: DataflowPlan, failed: threading.Event, deadline: float) -> None:
        self.failed, self.deadline = failed, deadline
        self.node_of = {(n.cluster, n.kernel_id): n for n in plan.nodes.values()}
        self.inbox: dict[tuple[int, int], queue.Queue[Packet]] = {
            key: queue.Queue() for key in self.node_of}
        self.packets: Counter[str] = Counter()
        self.bytes: Counter[str] = Counter()
        self._lock = threading.Lock()

    def send(self, sender: Node, packet: Packet) -> None:
        target = self.node_of[(packet.cluster, packet.dest)]
        link = _link(sender.fpga, target.fpga)
        with self._lock:
            self.packets[link] += 1
            self.bytes[link] += packet.size
        self.inbox[(packet.cluster, packet.dest)].put(packet)

    def receive(self, node: Node) -> Packet:
        box = self.inbox[(node.cluster, node.kernel_id)]
        while True:
            try:
                return box.get(timeout=_POLL_S)
            except queue.Empty:
                if self.failed.is_set():
                    raise ArchipelagoError("another kernel failed") from None
                if time.monotonic() > self.deadline:
                    raise ArchipelagoError(
                        f"emulation stalled: kernel {node.name} waited past the time limit"
                    ) from None


def _link(src: int, dst: int) -> str:
    if src == dst:
        return "local"
    return f"{'host' if src < 0 else f'fpga{src}'}->{'host' if dst < 0 else f'fpga{dst}'}"


class Endpoint:
    """One kernel's view of the network: send a row on a stream, receive the next packet."""

    def __init__(self, plan: DataflowPlan, router: Router, name: str) -> None:
        self.plan, self.router = plan, router
        self.node = plan.nodes[name]

    def send(self, stream: Stream, payload: bytes, origin: str | None = None) -> None:
        dst = self.plan.nodes[stream.dst]
        origin = origin or self.node.name
        if stream.inter_cluster and stream.dst != HOST:
            message = frame(dst.kernel_id, payload)
            packet = Packet(0, self.node.kernel_id, len(message), message, dst.cluster, True,
                            origin)
        else:
            packet = Packet(dst.kernel_id, self.node.kernel_id, len(payload), payload,
                            dst.cluster, False, origin)
        self.router.send(self.node, packet)

    def receive(self) -> Packet:
        return self.router.receive(self.node)
