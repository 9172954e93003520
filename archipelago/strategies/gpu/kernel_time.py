"""The GPU-side time of one kernel: a floor, its memory stream at the bandwidth its grid can
draw, and its tensor-core products in waves of output tiles.

    t = floor + max(bytes / stream_Bps(grid), tensor products, CUDA-core work)

(the floor, plan.KERNEL_FLOOR_S, is charged per kernel launched by estimate.step_s; this
module gives the rest.)

- Wave quantization: a grid of B thread blocks on S SMs runs in ceil(B / S) waves, so on
  average B / ceil(B / S) SMs are busy (NVIDIA, "Matrix Multiplication Background User's
  Guide", Deep Learning Performance documentation, §"Wave quantization"; a grid smaller
  than the GPU leaves SMs idle for its whole run).
- Achieved bandwidth by shape (Little's law, bandwidth = bytes in flight / latency: Little
  1961; applied to GPU memory by Volkov, "Understanding Latency Hiding on GPUs", UC
  Berkeley PhD thesis, 2016): each busy SM keeps `BYTES_IN_FLIGHT_PER_SM` of loads
  outstanding against the DRAM latency, so a kernel streams at
      min(memory_efficiency x datasheet bandwidth, busy SMs x bytes in flight / latency).
  A large GEMV fills every SM and reaches the first term; a batch-1 attention over a long
  context (one block per head, FlashAttention-2's grid: Dao 2023, arXiv:2307.08691 §3.2)
  or a small matrix is held to the second.
- Tensor-core products: a GEMM's M x N output in tiles of `TILE_N` columns and the
  smallest of `TILE_M` rows that covers M (CUTLASS's threadblock tiles; cuBLAS picks among
  such kernels), each tile one SM's work of 2 x tile_m x TILE_N x K operations at the SM's
  share of the tensor peak times `TENSOR_EFFICIENCY`, in waves over the SMs.
"""

import math
from dataclasses import dataclass

import numpy as np

# Loaded DRAM latency. Chips and Cheese, "Nvidia's H100: Funny L2, and Tons of Bandwidth"
# (2023) measures several hundred ns from an SM to HBM on H100 under a pointer chase, more
# when the memory is busy; A100's and V100's are of the same order (Jia et al.,
# arXiv:1804.06826 §3). Plausible range 400-800 ns; taken for every GPU.
MEMORY_LATENCY_S = 600e-9
# Bytes of loads one SM keeps in flight while streaming: a GEMV or attention block issues
# 16-byte vector loads from every thread, several deep (e.g. 8 warps x 32 threads x 16 B x 8
# outstanding = 32 KiB; FlashAttention-2's double-buffered 64 x 128 K/V tiles are the
# same). Plausible range 16-64 KiB; at 32 KiB / 600 ns an SM draws 55 GB/s, so about 52 busy
# SMs reach an H100's 2.85 TB/s.
BYTES_IN_FLIGHT_PER_SM = 32 * 1024
# CUTLASS threadblock tiles (CUTLASS docs, "Efficient GEMM in CUDA": 128 x 128 and smaller
# tiles for small problems; the tensor cores' mma.sync m16n8k16 sets the smallest, 16 rows).
TILE_M = (16, 32, 64, 128)
TILE_N = 128
# cuBLAS's split-K: a skinny product whose tiles leave SMs idle is split along K into
# slices of at least `SPLIT_K_DEPTH` (two 64-deep K tiles of a pipelined mainloop), enough
# to cover the SMs (cuBLASLt `CUBLASLT_ALGO_CONFIG_SPLITK_NUM`).
SPLIT_K_DEPTH = 128
# The share of the dense tensor peak a full wave of large tiles reaches: cuBLAS 12 on H100
# SXM runs large FP16 and FP8 GEMMs at about 0.7 of the dense peak (NVIDIA Technical Blog,
# "New cuBLAS 12.0 Features and Matrix Multiplication Performance on NVIDIA Hopper GPUs",
# 2023). Plausible range 0.6-0.8; not fitted (the calibration prompts are host-bound).
TENSOR_EFFICIENCY = 0.7
# Threads of an element-wise kernel's block, each on 4 values (vectorized loads).
ELEMENTS_PER_BLOCK = 1024


@dataclass(frozen=True)
class GPUCore:
    """What the kernel model needs of one GPU at the plan's number format."""

    sms: int
    tensor_ops_per_s: float  # dense, at the format's tensor-core rate
    cuda_core_flops: float
    memory_Bps: float  # datasheet
    memory_efficiency: float  # of the datasheet, a full GPU's streaming share


def busy_sms(blocks: float | np.ndarray, sms: int) -> float | np.ndarray:
    """The mean SMs busy over a grid's waves: blocks / ceil(blocks / SMs)."""
    blocks = np.maximum(blocks, 1)
    return blocks / np.ceil(blocks / sms)


def stream_Bps(blocks: float | np.ndarray, core: GPUCore) -> float | np.ndarray:
    """The bandwidth a grid of `blocks` draws (Little's law over its busy SMs)."""
    drawn = busy_sms(blocks, core.sms) * BYTES_IN_FLIGHT_PER_SM / MEMORY_LATENCY_S
    return np.minimum(core.memory_efficiency * core.memory_Bps, drawn)


def tile_m(m: int) -> int:
    """The smallest tile height covering `m` rows (the largest for taller products)."""
    return next((t for t in TILE_M if t >= m), TILE_M[-1])


def gemm_tiles(m: int, n: float) -> int:
    return math.ceil(m / tile_m(m)) * math.ceil(n / TILE_N)


def gemm_blocks(m: int, n: float, k: int, sms: int) -> int:
    """A product's grid: its output tiles, split along K to cover the SMs where the tiles
    alone leave them idle."""
    tiles = gemm_tiles(m, n)
    split = max(1, min(sms // tiles, k // SPLIT_K_DEPTH))
    return tiles * split


def gemm_s(m: int, n: float, k: int, core: GPUCore) -> float:
    """Tensor-core time of an (m x k) by (k x n) product: whole tiles in waves over the SMs,
    each at one SM's share of the peak (split-K slices share a tile's work)."""
    tm = tile_m(m)
    tiles = gemm_tiles(m, n)
    blocks = gemm_blocks(m, n, k, core.sms)
    per_block = 2 * tm * TILE_N * k * tiles / blocks
    per_sm = TENSOR_EFFICIENCY * core.tensor_ops_per_s / core.sms
    return math.ceil(blocks / core.sms) * per_block / per_sm


def spread_s(flops: float | np.ndarray, blocks: float | np.ndarray, rate: float,
             sms: int) -> float | np.ndarray:
    """`flops` at `rate` over the SMs a grid of `blocks` keeps busy."""
    return flops / (rate * busy_sms(blocks, sms) / sms)


def kernel_s(moved: float | np.ndarray, blocks: float | np.ndarray,
             compute_s: float | np.ndarray, core: GPUCore) -> float | np.ndarray:
    """One kernel past its floor: the slower of its stream and its arithmetic."""
    return np.maximum(moved / stream_Bps(blocks, core), compute_s)
