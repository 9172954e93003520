"""A decoder served on N identical GPUs, Megatron-style tensor parallel (Shoeybi et al. 2019,
arXiv:1909.08053 §3): attention heads and FFN columns split, two all-reduces per layer.

The engine parameters say how kernels reach the GPU and what each costs there
(kernel_time.py: a kernel's floor, its stream at the bandwidth its grid draws, its tensor
tiles); the framework profiles (frameworks.py) set the host's side. Constants marked
"fitted" are fitted by `python -m benchmarks.fit_gpu` to the three calibration points of
issue 33 (one H100 SXM, batch 1, FP16), each within its stated plausible range.
`expert_skew` is the one model-side parameter: how a mixture's tokens spread over its
experts, which sets the distinct experts a batch's step reads (0: uniform routing).
"""

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, model_validator

from archipelago.engines.base import EngineConfig
from archipelago.hardware.device import Device
from archipelago.hardware.link import Link
from archipelago.hardware.machines import Cluster
from archipelago.models.expert_routing import EXPERT_SKEW
from archipelago.models.graph import Graph
from archipelago.models.spec import ModelSpec
from archipelago.strategies.gpu.formats import Format
from archipelago.strategies.gpu.frameworks import PROFILES, PYTORCH_OP_S
from archipelago.strategies.gpu.kernel_time import GPUCore

# The share of the datasheet bandwidth a kernel that keeps every SM streaming reaches: fitted
# (with KERNEL_FLOOR_S) to the graph-mode decode steps of gpt2-345m and llama2-7b on an H100.
# Plausible range 0.80-0.92: STREAM-like copies reach 750 of 900 GB/s on a V100 (Jia,
# Maggioni, Staiger, Scarpazza, arXiv:1804.06826 §3); coalesced weight loads of an LLM's
# kernels reach 2.8 of 3.35 TB/s on an H100 SXM under Nsight Compute (mikamirai.com, "GPU
# Memory Bandwidth: What Your Profiler Isn't Telling You", 2026).
MEMORY_EFFICIENCY = 0.8357
# A kernel's floor on the GPU: its launch (a CUDA-graph node's dispatch), the ramp of its
# first wave (blocks scheduled, the first loads' DRAM latency) and the tail of its last
# wave, paid by every kernel however small: fitted (with MEMORY_EFFICIENCY). Plausible
# range 2-5 us: an empty kernel's launch-to-completion is about 2-4 us on recent GPUs and a
# graph node adds about 1 us between kernels (NVIDIA Technical Blog, A. Gray, "Getting
# Started with CUDA Graphs", 2019); a DRAM round trip (kernel_time.MEMORY_LATENCY_S) is
# part of any kernel that reads memory.
KERNEL_FLOOR_S = 2.910e-6
# NCCL's ring all-reduce latency model for small messages (LL protocol): a base latency and
# one per ring step (NCCL src/graph/tuning.cc, NCCL 2.7: baseLat ring LL 3.6 us); the step's
# is the link's own latency (catalog.yaml: NCCL's hwLat, 0.4 us over NVLink, 1.0 us PCIe).
ALLREDUCE_BASE_S = 3.6e-6


class GPUConfig(EngineConfig):
    """How kernels reach the GPU (module docstring): a named framework profile
    (frameworks.py) sets the host's figures and whether decode steps are captured; each
    parameter may be overridden."""

    framework: Literal["transformers-generate", "cuda-graph"] = "transformers-generate"
    graph: bool = False  # one CUDA graph per decode step (True) or eager ops
    host_op_s: float = Field(default=PYTORCH_OP_S, ge=0, le=1e-3)  # per kernel issued
    token_s: float = Field(default=0.0, ge=0, le=1)  # the host's per generated token
    call_s: float = Field(default=0.0, ge=0, le=10)  # the host's per generation call
    kernel_floor_s: float = Field(default=KERNEL_FLOOR_S, ge=0, le=1e-4)
    memory_efficiency: float = Field(default=MEMORY_EFFICIENCY, gt=0.3, le=1)
    # How a mixture's tokens spread over its experts: 0, uniform; a measured Zipf exponent
    # makes a batch read fewer distinct experts (models/expert_routing.py).
    expert_skew: EXPERT_SKEW = 0.0

    @model_validator(mode="before")
    @classmethod
    def _profile(cls, data: Any) -> Any:
        """The profile's figures where the parameters leave them out."""
        if isinstance(data, dict):
            return {**PROFILES.get(str(data.get("framework", "transformers-generate")), {}),
                    **data}
        return data


@dataclass(frozen=True)
class GPUPlan:
    strategy: str
    spec: ModelSpec
    graph: Graph
    cluster: Cluster
    config: GPUConfig
    link: Link | None  # the cluster's link between two GPUs; None on one GPU
    format: Format  # --precision
    tensor_ops_per_s: float  # the GPU's dense tensor rate in the format

    @property
    def core(self) -> GPUCore:
        """One GPU as the kernel model sees it (the planner checked its `gpu:` entry)."""
        gpu = self.device.gpu
        assert gpu is not None
        return GPUCore(gpu.sms, self.tensor_ops_per_s, gpu.cuda_core_flops, self.memory_Bps,
                       self.config.memory_efficiency)

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
