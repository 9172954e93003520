"""A decoder served on N identical GPUs, Megatron-style tensor parallel (Shoeybi et al. 2019,
arXiv:1909.08053 §3): attention heads and FFN columns split, two all-reduces per layer.

The engine parameters say how kernels reach the GPU. `host_op_s` is the host's cost to
issue one op (a framework running eagerly pays it for every op, overlapped with the GPU's
work; a CUDA graph pays it once per step); `kernel_gap_s` is the GPU-side time between two
kernels of one stream; `memory_efficiency` the share of the datasheet bandwidth a streaming
kernel reaches. `expert_skew` is the one model-side parameter: how a mixture's tokens spread
over its experts, which sets the distinct experts a batch's step reads (0: uniform routing).
"""

from dataclasses import dataclass

from pydantic import Field

from archipelago.engines.base import EngineConfig
from archipelago.hardware.device import Device
from archipelago.hardware.link import Link
from archipelago.hardware.machines import Cluster
from archipelago.models.expert_routing import EXPERT_SKEW
from archipelago.models.graph import Graph
from archipelago.models.spec import ModelSpec

# Measured STREAM-like copy bandwidth of a V100: 750 of 900 GB/s (Jia, Maggioni, Staiger,
# Scarpazza, "Dissecting the NVIDIA Volta GPU Architecture via Microbenchmarking",
# arXiv:1804.06826, 2018, §3 "global memory"). Taken for every part: HBM and GDDR
# controllers lose a similar share to refresh and bank turnarounds.
MEMORY_EFFICIENCY = 750 / 900
# PyTorch's CPU path from a Python op to cudaLaunchKernel: Python, pybind11, the ATen
# dispatcher, the backend's kernel choice and the driver's launch, about 5-25 us per op
# (J. Lin, "From PyTorch op to kernel launch", GPU kernel serving lesson 18; the CUDA
# driver's own cudaLaunchKernel, 1-3 us, is part of it). The middle of that range.
EAGER_HOST_OP_S = 10e-6
# A captured graph launches all its kernels with one call; the GPU still starts each kernel
# node after the previous one drains (NVIDIA Technical Blog, A. Gray, "Getting Started with
# CUDA Graphs", 2019: graph launch removes the CPU's per-kernel launch, a microsecond-scale
# gap per kernel remains on the GPU).
KERNEL_GAP_S = 1e-6
# NCCL's ring all-reduce latency model for small messages (LL protocol): a base latency and
# one per ring step (NCCL src/graph/tuning.cc, NCCL 2.7: baseLat ring LL 3.6 us); the step's
# is the link's own latency (catalog.yaml: NCCL's hwLat, 0.4 us over NVLink, 1.0 us PCIe).
ALLREDUCE_BASE_S = 3.6e-6
FP16_BYTES = 2


class GPUConfig(EngineConfig):
    """How kernels reach the GPU (module docstring); each parameter may be overridden."""

    graph: bool = False  # one CUDA graph per decode step (True) or eager ops
    host_op_s: float = Field(default=EAGER_HOST_OP_S, ge=0, le=1e-3)
    kernel_gap_s: float = Field(default=KERNEL_GAP_S, ge=0, le=1e-4)
    memory_efficiency: float = Field(default=MEMORY_EFFICIENCY, gt=0.3, le=1)
    # How a mixture's tokens spread over its experts: 0, uniform; a measured Zipf exponent
    # makes a batch read fewer distinct experts (models/expert_routing.py).
    expert_skew: EXPERT_SKEW = 0.0


@dataclass(frozen=True)
class GPUPlan:
    strategy: str
    spec: ModelSpec
    graph: Graph
    cluster: Cluster
    config: GPUConfig
    link: Link | None  # the cluster's link between two GPUs; None on one GPU

    @property
    def device(self) -> Device:
        return self.cluster.devices[0]

    @property
    def ranks(self) -> int:
        return self.cluster.size

    @property
    def memory_Bps(self) -> float:
        """The datasheet bandwidth of the GPU's one memory (HBM or GDDR)."""
        return next(iter(self.device.memories.values())).bandwidth_Bps

    @property
    def capacity_bytes(self) -> int:
        return next(iter(self.device.memories.values())).capacity_bytes


def ring_s(link: Link, ranks: int, nbytes: float, gather: bool = False) -> float:
    """A ring all-reduce of `nbytes`: 2(N-1) steps of bytes/N each (Patarasuk & Yuan,
    "Bandwidth optimal all-reduce algorithms for clusters of workstations", JPDC 2009;
    Thakur, Rabenseifner & Gropp, IJHPCA 2005 §4.5), 2(N-1)/N x bytes / bandwidth plus
    NCCL's latency terms; an all-gather of `nbytes` in all is its second half, N-1 steps."""
    steps = (ranks - 1) * (1 if gather else 2)
    return (ALLREDUCE_BASE_S + steps * link.latency_s
            + steps / ranks * nbytes / link.bandwidth_Bps)
