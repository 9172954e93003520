"""Decoder inference on NVIDIA GPUs, the row every FPGA design is compared against (DFX's
and LORA's V100 baselines, seeds/001 §VI and seeds/002 §VI-A f).

A plan is the model graph on N identical GPUs split Megatron-style (plan.py); its estimate
times every op as one kernel on its roofline against the datasheet peaks, plus the
all-reduces over NVLink or PCIe and the cost of issuing the kernels (estimate.py), in the
two ways a user serves a model:

    gpu-eager  a framework running op by op (transformers' generate, Megatron-LM): the host
               issues every kernel, so at batch 1 a step is launch-bound
    gpu-graph  a graph-captured engine (torch.compile "reduce-overhead", TensorRT-LLM,
               vLLM's CUDA graphs): one CUDA graph per decode step, bandwidth-bound
"""

from archipelago.errors import PartitionError
from archipelago.estimate.workload import parse_generation
from archipelago.hardware.machines import Cluster
from archipelago.models.graph import build_graph
from archipelago.models.spec import ModelSpec
from archipelago.strategies.gpu.plan import GPUConfig, GPUPlan, gpu_link
from archipelago.strategies.options import WorkloadOption, WorkloadType
from archipelago.strategies.registry import PlanKind, register, register_kind

GPU_GENERATION = WorkloadType("GPU generation", (
    WorkloadOption("tokens", "IN:OUT prompt and generated token counts", "64:64"),
    WorkloadOption("batch", "concurrent sequences, each with its own KV cache", "1"),
), parse_generation)
register_kind(PlanKind(
    "gpu", GPU_GENERATION,
    estimator="archipelago.strategies.gpu.estimate:estimate",
    report="archipelago.strategies.gpu.report",
    page="archipelago.strategies.gpu.page:page",
    traits="archipelago.strategies.gpu.traits:traits"))


def _check(spec: ModelSpec, cluster: Cluster, strategy: str) -> None:
    device = cluster.require_identical(strategy)
    if device.kind != "gpu" or device.peak_fp16_flops is None or len(device.memories) != 1:
        raise PartitionError(f"strategy '{strategy}' runs on GPUs with one device memory and "
                             f"a tensor peak; '{device.key}' is a {device.kind}")
    if not spec.is_decoder:
        raise PartitionError(f"strategy '{strategy}' generates text with decoders; {spec.name} "
                             "is an encoder")
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


def _plan(strategy: str, spec: ModelSpec, cluster: Cluster, config: GPUConfig) -> GPUPlan:
    _check(spec, cluster, strategy)
    link = gpu_link(cluster.devices[0]) if cluster.size > 1 else None
    return GPUPlan(strategy, spec, build_graph(spec), cluster, config, link)


def plan_eager(spec: ModelSpec, cluster: Cluster, config: GPUConfig, workload: object
               ) -> GPUPlan:
    return _plan("gpu-eager", spec, cluster, config)


def plan_graph(spec: ModelSpec, cluster: Cluster, config: GPUConfig, workload: object
               ) -> GPUPlan:
    return _plan("gpu-graph", spec, cluster, config)


register("gpu-eager", "NVIDIA GPUs, Megatron tensor parallel, a framework issuing every "
                      "kernel from the host (launch-bound at batch 1)", "gpu", GPUConfig,
         default_cluster="1xa100")(plan_eager)
register("gpu-graph", "NVIDIA GPUs, Megatron tensor parallel, one CUDA graph per decode "
                      "step (bandwidth-bound)", "gpu", GPUConfig, {"graph": True},
         default_cluster="1xa100")(plan_graph)
