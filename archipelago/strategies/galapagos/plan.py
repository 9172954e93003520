"""The dataflow plan: the one description of a Galapagos build that the estimator, the
emulator and the build-file writers read. It never re-derives anything they need."""

from dataclasses import dataclass
from typing import Literal

from archipelago.hardware.cluster import Cluster
from archipelago.hardware.device import Device, Resources
from archipelago.models.spec import ModelSpec
from archipelago.strategies.galapagos.gmi import HOST, Node, RoutingTables, Stream, Transfer
from archipelago.strategies.galapagos.hls_stream import HLSStreamEngine
from archipelago.strategies.galapagos.kernel_design import KernelDesign

Role = Literal["q", "k", "v", "score", "context", "attn_out", "ln1", "ffn_up", "ffn_down",
               "ln2"]


@dataclass(frozen=True)
class ComputeKernel:
    """One compute kernel: which I-BERT modules of which encoder it runs, on which slice.
    `lo:hi` are the output columns of a column-split Linear, the input rows of a row-split
    one, or the head range of an attention kernel; `residual` marks the kernel that adds
    the residual branch in its Quant (I-BERT's ln_input_act)."""

    name: str
    layer: int
    role: Role
    design: KernelDesign
    lo: int = 0
    hi: int = 0
    split: Literal["none", "column", "row", "head"] = "none"
    residual: bool = False


@dataclass(frozen=True)
class KernelCluster:
    """A Galapagos cluster: its encoders, FPGAs (indices into the plan's FPGA list) and
    gateway kernel."""

    index: int
    layers: tuple[int, ...]
    fpgas: tuple[int, ...]
    kernels: int


@dataclass
class FPGAUse:
    """One FPGA of the build: its cluster, its kernels and the fabric they take."""

    index: int
    device: Device
    cluster: int
    kernels: list[str]
    resources: Resources
    ip: str
    mac: str


@dataclass
class DataflowPlan:
    """A model unrolled into streaming kernels, mapped to FPGAs, grouped into clusters and
    wired with GMI kernels. `nodes` holds every Galapagos kernel (and the host) with its
    kernel ID; `designs` the parallelism of each non-host kernel."""

    strategy: str
    spec: ModelSpec
    cluster: Cluster
    engine: HLSStreamEngine
    row_interval: int
    compute: dict[str, ComputeKernel]
    nodes: dict[str, Node]
    designs: dict[str, KernelDesign]
    streams: list[Stream]
    collectives: dict[str, Transfer]
    clusters: list[KernelCluster]
    fpgas: list[FPGAUse]
    tables: dict[int, RoutingTables]

    @property
    def kernel_count(self) -> int:
        return sum(1 for n in self.nodes if n != HOST)

    @property
    def fpgas_needed(self) -> int:
        return len(self.fpgas)

    def layer_kernels(self, layer: int) -> list[str]:
        """Every kernel an encoder's rows pass through (its compute, GMI and gateways)."""
        clusters = {c.index for c in self.clusters if layer in c.layers}
        own = {n for n, k in self.compute.items() if k.layer == layer}
        return [n for n, node in self.nodes.items()
                if n in own or (node.role != "compute" and node.cluster in clusters
                                and _layer_of(n) in (layer, None))]


def _layer_of(name: str) -> int | None:
    """The encoder a GMI kernel serves, from its `L<n>.` prefix (None for gateways)."""
    head = name.split(".", 1)[0]
    return int(head[1:]) if head.startswith("L") and head[1:].isdigit() else None
