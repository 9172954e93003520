"""Intra-layer tensor parallelism over a ring of identical HBM FPGAs (DFX's and LORA's sync
schemes, planning/sync_schemes.py), in pipeline stages across rings (the plan: staged.py).

This module is the kind's registration only: its workload, its hooks and its strategies,
each planner and engine config named as a `module:attribute` path that the registry imports
on first use, so listing strategies or starting `archi` imports none of the kind's code.
"""

from typing import Any

from archipelago.models import features as F
from archipelago.strategies.options import PRECISION_HELP, WorkloadOption, WorkloadType
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
    WorkloadOption("precision", "arithmetic on the emulated ranks: fp32, fp16, or the block "
                   "matrices in w8a8 or w4a16 (FP32 elsewhere)", "fp32",
                   role="job", commands=("emulate",)),
    # The number format of a plan (number_formats.py); left out, the strategy's own (DFX and
    # LORA-F fp16, LORA-Q w8a8). Each engine's config refuses a format it cannot run.
    WorkloadOption("precision", PRECISION_HELP + "; default: the strategy's own", "",
                   commands=("plan", "report", "explore", "build")),
    WorkloadOption("checkpoint", "local Hugging Face checkpoint directory (safetensors) "
                   "instead of seeded weights", "seeded", role="job", commands=("emulate",)),
    WorkloadOption("batch", "concurrent sequences, each with its own KV cache", "1",
                   commands=("plan", "report", "explore")),
    WorkloadOption("split", "tensor x pipeline split: auto, or tp=T,pp=P[,layers=A+B+...]"
                   "[,ep=1|T] (several rings: auto; one ring: tensor parallel over it)", "",
                   role="plan", commands=("plan", "report", "emulate", "serve")),
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

# The two LORA prototypes seeds/002 builds on one Alveo U280 (§VI-A-d, Table IV), as the
# engine parameters `lora-f` and `lora-q` run by default: the published designs, not the
# project's searched ones (`archi explore` finds those, and labels them so). Plain data in
# the registration, so that listing the strategies imports no engine; space.py's baselines
# are these designs.
#
# How the text fixes each parameter (the U280 of §VI-A-c: 9,024 DSPs, 2,016 BRAMs, 960 URAMs,
# 460 GB/s of HBM over 32 pseudo-channels):
#
# - clock_hz, precision: Table IV, "LORA-F 200 MHz FP16", "LORA-Q 250 MHz W8A8".
# - kv_uram: §VI-A-d, "All 864 URAMs are dedicated to KV Cache buffering".
# - d_sa: §VI-A-d, "In LORA-F, the degree of parallelism is constrained by DSP availability,
#   while in LORA-Q, it is bounded by the HBM bandwidth". The side is a multiple of the values
#   one 256-bit beat of the communication IP's stream port carries (§VI-C-a: "the 256-bit
#   data width of the communication IP"; Eq. 11 moves a T_m x T_m tile through it): 16 FP16
#   or 32 int8 values.
#   LORA-F: an FP16 PE is a multiplier (1 DSP) and an adder (2 DSPs) (seeds/001 §V-C, the
#   same board's FP16 mapping), 3 DSPs. 64 x 64 x 3 = 12,288 > 9,024, so the DSPs stop the
#   array at 48: 48 x 48 x 3 = 6,912 DSPs. (§V-C's 32 x 32 at 200 MHz is its bandwidth
#   example, not the prototype: it would use 3,072 DSPs, 34% of the board, which no DSP
#   bound constrains.)
#   LORA-Q: two int8 products per DSP48E2 (§V-A), D_sa^2 / 2 DSPs. Decode reads one byte per
#   PE every 2 cycles (systolic.py's DECODE_WAVEFRONT_PASSES, from §V-C's "around 190
#   GB/s"): 32 x 32 / 2 x 250 MHz = 128 GB/s, 64 x 64 / 2 x 250 MHz = 512 GB/s > 460 GB/s,
#   so 64 is the first side HBM bounds: 2,048 DSPs. §VI-C-b agrees: 32 x 1024 x 1024 MACs
#   take "about 9208 cycles", at least 3,644 MACs per cycle (D_sa >= 61); 64 x 64 = 4,096
#   gives 8,192 cycles plus fill and drain.
# - t_m = d_sa: §V-C's prefill figure moves one T_m^2 tile per T_m^3 / D_sa^2 cycles, 2 KB
#   per 32 cycles = 12.8 GB/s ("approximately 11 GB/s", in GiB) with T_m = D_sa = 32.
# - t_v = d_sa^2 / t_m: §IV-B-a reinterprets the 2D array "as multiple one-dimensional SAs of
#   length T_m", each taking one of the T_v matrices: D_sa^2 / T_m of them, every PE busy.
# - n_acc: §V-D, "the remaining DSPs can be allocated to the VPU". The VFU costs
#   (Psi_exp + Psi_square) N + Psi_add (3N - 1) (Eq. 7) plus the Scaling module's multiplier
#   and adder per lane, 2 (1 + 2) N: 15N - 2 DSPs; N a power of two, the input size of the
#   accumulation binary tree (§IV-B-b). LORA-F: (9,024 - 6,912 + 2) / 15 = 140.9 -> 128
#   (1,918 DSPs, 8,830 in all, 98%). LORA-Q: (9,024 - 2,048 + 2) / 15 = 465.2 -> 256
#   (3,838 DSPs, 5,886 in all).
# - hbm_channels: the U280's 32 HBM pseudo-channels (seeds/001 §V-B), all used: §V-C keeps
#   "the weights for the Decode stage" in HBM.
# - hbm_axi_bits: not given by the text, whose §IV-B-c bounds the INT8 array by "the width of
#   the HBM interface": LORA-Q's 64 x 64 decode reads 64 x 64 / 2 B per cycle over 32
#   channels, 64 B = 512 bits per channel per cycle, so the interface is 512 bits wide, as
#   the same board's DFX DMA ("all 32 HBM channels ... 512 bits at 200 MHz", seeds/001
#   §V-B). LORA-F the same: at 200 MHz a 512-bit port carries 12.8 GB/s, more than a
#   pseudo-channel sustains after HBM_EFFICIENCY (systolic.py), so the port is not the bound.
# - token_window: not given by the text; kept at the project's earlier 64 rows, which hold
#   Table IV's 32-token prompt whole. It sizes BRAM only (the intermediate-activation buffer,
#   systolic.py): 1,439 of the 2,016 BRAMs for LORA-F on gpt2-345m on one board.
LORA_F: dict[str, Any] = {
    "precision": "fp16", "clock_hz": 200e6, "d_sa": 48, "t_m": 48, "t_v": 48, "n_acc": 128,
    "hbm_channels": 32, "hbm_axi_bits": 512, "kv_uram": 864, "token_window": 64}
LORA_Q: dict[str, Any] = {
    "precision": "w8a8", "clock_hz": 250e6, "d_sa": 64, "t_m": 64, "t_v": 64, "n_acc": 256,
    "hbm_channels": 32, "hbm_axi_bits": 512, "kv_uram": 864, "token_window": 64}

# Each strategy's planner makes every stage's ring program of its scheme (planner.py).
register("dfx", "tensor parallel, DFX sync scheme: 4 ring all-gathers per block (seeds/001)",
         "tensor-parallel", f"{_PLANNER}:DFXSplitConfig", design_space=f"{_SPACE}:DFX",
         default_for=("plan", "report", "emulate", "simulate"),
         **_CLUSTERS)(f"{_PLANNER}:plan_dfx")
register("lora-f", "tensor parallel, LORA sync (4 all-gathers + 2 all-reduces, overlapped), "
                   "FP16 systolic engine at 200 MHz (seeds/002)", "tensor-parallel",
         f"{_PLANNER}:SystolicSplitConfig", LORA_F,
         design_space=f"{_SPACE}:LORA_F", **_CLUSTERS)(f"{_PLANNER}:plan_lora_f")
register("lora-q", "tensor parallel, LORA sync, W8A8 systolic engine with two int8 "
                   "products per DSP at 250 MHz (seeds/002)", "tensor-parallel",
         f"{_PLANNER}:SystolicSplitConfig", LORA_Q, design_space=f"{_SPACE}:LORA_Q",
         default_for=("explore",), **_CLUSTERS)(f"{_PLANNER}:plan_lora_q")
