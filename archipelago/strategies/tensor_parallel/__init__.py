"""Intra-layer tensor parallelism over a ring of identical HBM FPGAs (DFX's and LORA's sync
schemes, planning/sync_schemes.py), in pipeline stages across rings (the plan: staged.py).

This module is the kind's registration only: its workload, its hooks and its strategies,
each planner and engine config named as a `module:attribute` path that the registry imports
on first use, so listing strategies or starting `archi` imports none of the kind's code.
"""

from archipelago.models import features as F
from archipelago.strategies.options import WorkloadOption, WorkloadType
from archipelago.strategies.registry import PlanKind, register, register_kind

# The model features the plans split, and the fewer the emulator runs (PlanKind.supports /
# emulates). Left out of the plans: norms over a split width or after each sublayer (where
# would DFX's and LORA's syncs go?) and sliding and full layers mixed. A mixture of
# experts splits like any FFN (planning/experts.py places whole experts instead), dense
# layers beside MoE ones each run their own block (Plan.other_blocks); parallel blocks'
# sublayers each split as their sequential twin; latent attention's up projections split
# by heads, its down projections whole on every board (planning/shards.py), decode in the
# absorbed form (graph.absorbed_block).
SPLITS = F.BUILTIN - {F.WIDTH_QK_NORMS, F.OUTPUT_NORMS, F.BOTH_NORMS, F.MIXED_SLIDING}
# What the emulator's handlers compute (emulate/compute.py) for the families whose
# checkpoints it reads: the plain GPT-2/OPT/LLaMA blocks, and Mistral's, Qwen's,
# Mixtral's and DeepSeek-V3's additions (emulate/latent.py, emulate/routing.py).
EMULATES = frozenset({F.GATED_MLP, F.BIASES, F.RMSNORM, F.POST_NORM, F.GROUPED_QUERY,
                      F.EXPLICIT_HEAD_DIM, F.UNEVEN_OUT_BIAS, F.SLIDING_WINDOW,
                      F.HEAD_QK_NORMS, F.EXPERTS, F.SHARED_EXPERTS, F.LATENT_ATTENTION,
                      F.MIXED_DENSE_MOE})

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
), "archipelago.estimate.workload:parse_generation")
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
    floors="archipelago.strategies.tensor_parallel.floors:floors",
    serving="archipelago.strategies.tensor_parallel.serving:serving",
    commands={"simulate":
              "archipelago.strategies.tensor_parallel.dfx_program.simulate_command:simulate"},
    supports=SPLITS, emulates=EMULATES))

_PLANNER = "archipelago.strategies.tensor_parallel.planner"  # planners, engine configs
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
         "tensor-parallel", f"{_PLANNER}:DFXSplitConfig", design_space=f"{_SPACE}:DFX",
         default_for=("plan", "report", "emulate", "simulate"),
         **_CLUSTERS)(f"{_PLANNER}:plan_dfx")
register("lora-f", "tensor parallel, LORA sync (4 all-gathers + 2 all-reduces, overlapped), "
                   "FP16 systolic engine at 200 MHz (seeds/002)", "tensor-parallel",
         f"{_PLANNER}:SystolicSplitConfig", {"precision": "fp16", "clock_hz": 200e6},
         design_space=f"{_SPACE}:LORA_F", **_CLUSTERS)(f"{_PLANNER}:plan_lora_f")
register("lora-q", "tensor parallel, LORA sync, W8A8 systolic engine with two int8 "
                   "products per DSP at 250 MHz (seeds/002)", "tensor-parallel",
         f"{_PLANNER}:SystolicSplitConfig", LORA_Q_DEFAULTS, design_space=f"{_SPACE}:LORA_Q",
         default_for=("explore",), **_CLUSTERS)(f"{_PLANNER}:plan_lora_q")
