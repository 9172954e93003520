"""Decoder inference on NVIDIA GPUs, the row every FPGA design is compared against (DFX's
and LORA's V100 baselines, seeds/001 §VI and seeds/002 §VI-A f).

A plan is the model graph on N identical GPUs split Megatron-style (plan.py); its estimate
times every op as one kernel on its roofline against the datasheet peaks, plus the
all-reduces over NVLink or PCIe and the cost of issuing the kernels (estimate.py), in the
two ways a user serves a model:

    gpu-eager  transformers' `generate` as a user runs it (frameworks.py's
               "transformers-generate"): the host issues every kernel and runs its loop,
               so at batch 1 a step is launch-bound
    gpu-graph  a graph-captured engine (TensorRT-LLM, vLLM's CUDA graphs, torch.compile
               "reduce-overhead"; "cuda-graph"): one CUDA graph per decode step

This module is the kind's registration; its planners (planner.py) and engine config
(plan.py) are named as paths, imported when a strategy plans.
"""

from archipelago.models.features import BUILTIN
from archipelago.strategies.options import PRECISION, WorkloadOption, WorkloadType
from archipelago.strategies.registry import PlanKind, register, register_kind

GPU_GENERATION = WorkloadType("GPU generation", (
    WorkloadOption("tokens", "IN:OUT prompt and generated token counts", "64:64"),
    WorkloadOption("batch", "concurrent sequences, each with its own KV cache", "1"),
    PRECISION,
), "archipelago.estimate.workload:parse_generation")
register_kind(PlanKind(
    "gpu", GPU_GENERATION,
    estimator="archipelago.strategies.gpu.estimate:estimate",
    report="archipelago.strategies.gpu.report",
    page="archipelago.strategies.gpu.page:page",
    traits="archipelago.strategies.gpu.traits:traits",
    floors="archipelago.strategies.gpu.floors:floors",
    serving="archipelago.strategies.gpu.serving:serving",
    supports=BUILTIN))  # the graph's ops run as kernels whatever the block's structure

_HERE = "archipelago.strategies.gpu"
_CONFIG = f"{_HERE}.plan:GPUConfig"
register("gpu-eager", "NVIDIA GPUs, Megatron tensor parallel, transformers' generate "
                      "issuing every kernel from the host (launch-bound at batch 1)", "gpu",
         _CONFIG, {"framework": "transformers-generate"},
         default_cluster="1xa100")(f"{_HERE}.planner:plan_eager")
register("gpu-graph", "NVIDIA GPUs, Megatron tensor parallel, one CUDA graph per decode "
                      "step (bandwidth-bound)", "gpu", _CONFIG, {"framework": "cuda-graph"},
         default_cluster="1xa100")(f"{_HERE}.planner:plan_graph")
