"""The GPU kind's planners: the model graph on N identical GPUs split Megatron-style
(plan.py), the same plan for both ways of serving it (`gpu-eager`, `gpu-graph`)."""

from archipelago.errors import PartitionError
from archipelago.estimate.workload import Generation
from archipelago.hardware.link import Link
from archipelago.hardware.machines import Cluster
from archipelago.models.graph import build_graph
from archipelago.models.spec import ModelSpec
from archipelago.strategies.gpu.formats import format_on
from archipelago.strategies.gpu.plan import GPUConfig, GPUPlan
from archipelago.strategies.registry import feature_refusal


def _check(spec: ModelSpec, cluster: Cluster, strategy: str) -> None:
    device = cluster.require_identical(strategy)
    if device.kind != "gpu" or device.peak_fp16_flops is None or len(device.memories) != 1:
        raise PartitionError(f"strategy '{strategy}' runs on GPUs with one device memory and "
                             f"a tensor peak; '{device.key}' is a {device.kind}")
    if device.gpu is None:
        raise PartitionError(f"strategy '{strategy}': device '{device.key}' needs a `gpu:` "
                             "entry (its SM count and CUDA-core FP32 rate) to time kernels")
    if not spec.is_decoder:
        raise PartitionError(f"strategy '{strategy}' generates text with decoders; {spec.name} "
                             "is an encoder")
    refused = feature_refusal(spec, strategy)
    if refused:
        raise PartitionError(refused)
    if cluster.rings > 1:
        raise PartitionError(f"strategy '{strategy}' splits a model over the GPUs of one node; "
                             f"cluster '{cluster.name}' has {cluster.rings} groups (pipeline "
                             "stages across GPU nodes are not modelled: name NxDEVICE)")
    n = cluster.size
    widths = {"attention heads": spec.heads, "key/value heads": spec.kv_heads,
              "FFN width": spec.ffn}
    for what, count in widths.items():
        if count % n:
            raise PartitionError(f"{spec.name}: {count} {what} do not split evenly over {n} "
                                 f"GPUs (Megatron tensor parallel splits them; try a divisor)")


def _plan(strategy: str, spec: ModelSpec, cluster: Cluster, config: GPUConfig,
          workload: object) -> GPUPlan:
    _check(spec, cluster, strategy)
    precision = (workload.precision if isinstance(workload, Generation) else None) or "fp16"
    fmt, rate = format_on(cluster.devices[0], precision)
    return GPUPlan(strategy, spec, build_graph(spec), cluster, config, _ring_link(cluster),
                   fmt, rate)


def _ring_link(cluster: Cluster) -> Link | None:
    """The link the ranks' ring all-reduce runs at: the cluster's between neighbours
    (NVLink, else the hosts' PCIe), its slowest where a cluster file names pairs; None on
    one GPU."""
    n = cluster.size
    hops = [cluster.link(i, (i + 1) % n) for i in range(n)] if n > 1 else []
    return min(hops, key=lambda link: link.bandwidth_Bps, default=None)


def plan_eager(spec: ModelSpec, cluster: Cluster, config: GPUConfig, workload: object
               ) -> GPUPlan:
    return _plan("gpu-eager", spec, cluster, config, workload)


def plan_graph(spec: ModelSpec, cluster: Cluster, config: GPUConfig, workload: object
               ) -> GPUPlan:
    return _plan("gpu-graph", spec, cluster, config, workload)
