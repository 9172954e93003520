"""Intra-layer tensor parallelism over rings of identical HBM FPGAs, with two sync schemes
(DFX's and LORA's, sync_schemes.py), split into pipeline stages across rings: the kind's
registration. The planners are in planner.py, the plan in staged.py.
"""

from archipelago.estimate.workload import parse_generation
from archipelago.strategies.options import WorkloadOption, WorkloadType
from archipelago.strategies.registry import PlanKind, register, register_kind
from archipelago.strategies.tensor_parallel.planner import (
    DFXSplitConfig,
    SystolicSplitConfig,
    plan_dfx,
    plan_lora_f,
    plan_lora_q,
)

GENERATION = WorkloadType("generation", (
    WorkloadOption("tokens", "IN:OUT prompt and generated token counts", "64:64",
                   {"emulate": "16:16", "explore": "32:256"}),
    WorkloadOption("precision", "arithmetic on the emulated ranks: fp32 or fp16", "fp32",
                   role="job", commands=("emulate",)),
    WorkloadOption("checkpoint", "local Hugging Face checkpoint directory (safetensors) "
                   "instead of seeded weights", "seeded", role="job", commands=("emulate",)),
    WorkloadOption("batch", "concurrent sequences, each with its own KV cache", "1",
                   commands=("plan", "report", "explore")),
    WorkloadOption("split", "tensor x pipeline split: auto, or tp=T,pp=P[,layers=A+B+...]"
                   "[,ep=1|T] (several rings: auto; one ring: tensor parallel over it)", "",
                   role="plan", commands=("plan", "report", "emulate")),
), parse_generation)
# Stages of SPMD ring programs (`StagedPlan`), costed over a text generation.
register_kind(PlanKind(
    "tensor-parallel", GENERATION,
    estimator="archipelago.strategies.tensor_parallel.estimate:estimate",
    report="archipelago.strategies.tensor_parallel.report",
    emulator="archipelago.strategies.tensor_parallel.emulate:emulate",
    utilization="archipelago.strategies.tensor_parallel.utilization:utilization",
    page="archipelago.strategies.tensor_parallel.page:page",
    writers="archipelago.strategies.tensor_parallel.emit:write_build",
    batch_evaluator="archipelago.strategies.tensor_parallel.variants:evaluate_variants",
    traits="archipelago.strategies.tensor_parallel.traits:traits",
    commands={"simulate": "archipelago.strategies.tensor_parallel.simulate_command:simulate"}))


_SPACE = "archipelago.strategies.tensor_parallel.space"  # the engines' design spaces


# Without --cluster: the four U280s of seeds/001's appliance; one for a design search.
_CLUSTERS = {"default_cluster": "4xu280", "command_clusters": {"explore": "1xu280"}}


# LORA-Q's array grows until HBM bounds it (seeds/002 §V-D, "bounded by the HBM bandwidth"):
# 64 x 64 is the smallest side among the search candidates whose int8 decode demand (one
# byte per PE every 2 cycles, D_sa^2 / 2 bytes per cycle: 512 GB/s at 250 MHz) exceeds the
# U280's 460 GB/s (48 x 48 demands 288 GB/s); two int8 products per DSP (§V-A) make it 2048
# DSPs, leaving the rest to the VFU.
LORA_Q_DEFAULTS = {"precision": "w8a8", "clock_hz": 250e6, "d_sa": 64, "t_m": 64, "t_v": 64}


# Each strategy's planner makes every stage's ring program of its scheme (planner.py).
register("dfx", "tensor parallel, DFX sync scheme: 4 ring all-gathers per block (seeds/001)",
         "tensor-parallel", DFXSplitConfig, design_space=f"{_SPACE}:DFX",
         default_for=("plan", "report", "emulate", "simulate"),
         **_CLUSTERS)(plan_dfx)
register("lora-f", "tensor parallel, LORA sync (4 all-gathers + 2 all-reduces, overlapped), "
                   "FP16 systolic engine at 200 MHz (seeds/002)", "tensor-parallel",
         SystolicSplitConfig, {"precision": "fp16", "clock_hz": 200e6},
         design_space=f"{_SPACE}:LORA_F", **_CLUSTERS)(plan_lora_f)
register("lora-q", "tensor parallel, LORA sync, W8A8 systolic engine with two int8 "
                   "products per DSP at 250 MHz (seeds/002)", "tensor-parallel",
         SystolicSplitConfig, LORA_Q_DEFAULTS, design_space=f"{_SPACE}:LORA_Q",
         default_for=("explore",), **_CLUSTERS)(plan_lora_q)
