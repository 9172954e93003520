"""DFX compute core (seeds/001 §IV-V): cycle and resource model.

The core streams weight tiles of d x l FP16 values from 32 HBM channels (32 x 512 bits per
cycle at 200 MHz, §V-B) into a matrix function unit of l adder-tree lanes of depth log2(d)
(§V-C), and runs LayerNorm, Softmax and residuals as sequences of d-wide vector
instructions on the vector function unit. Dependent instructions stall on the scoreboard
(§V-A), so each one pays its pipeline latency; independent units (DMA, router, compute)
run in parallel (§IV-C). WTE/WPE live in DDR (§IV-B), so embedding and LM head stream from
one DDR channel (§V-B).
"""

from dataclasses import dataclass
from math import log2

import numpy as np

from archipelago.engines.base import PhaseArrays, add_resources, ceil_div, memory_blocks
from archipelago.hardware.device import Resources
from archipelago.models.spec import ModelSpec
from archipelago.plan import ComputeStep

# FP16 operator latencies in cycles (seeds/001 §V-C: "The multiplier takes 6 cycles, and the
# adder takes 11 cycles"; VFU exponential 4 cycles).
FP16_MUL_CYCLES = 6
FP16_ADD_CYCLES = 11
FP16_EXP_CYCLES = 4
# Load/store bypass the VFU execution stage: one cycle (seeds/001 §V-C).
BYPASS_CYCLES = 1
# Not stated in seeds/001: reciprocal and reciprocal square root run on the floating-point
# DSP (§V-C, SFU_V); taken at the multiplier's latency. Comparator-tree levels of the
# reduce-max unit (§V-C, SFU_M) taken as one registered cycle each.
RECIP_CYCLES = FP16_MUL_CYCLES
COMPARE_LEVEL_CYCLES = 1

# Calibration (issue #2): the one efficiency constant of this engine, the sustained fraction
# of the ideal one-tile-per-cycle stream (HBM/DDR refresh, page switches at the zig-zag tile
# turns of Fig. 9, DMA arbitration). Fitted so that gpt2-345m on one U280 at 64:64 tokens
# gives DFX's measured 93.1 tokens/s (seeds/001 §VII-B); refit with
# `python -m benchmarks.calibrate_dfx`. Every other configuration is a prediction.
DFX_STREAM_EFFICIENCY = 0.8385


@dataclass(frozen=True)
class DFXConfig:
    """Design parameters of one DFX core."""

    d: int = 64  # tile dimension = adder-tree inputs per lane (seeds/001 §V-B)
    l: int = 16  # noqa: E741  lanes of the MFU (seeds/001 §V-B)
    clock_hz: float = 200e6  # kernel clock (seeds/001 §VI)
    hbm_channels: int = 32  # DMA reads all 32 HBM channels (seeds/001 §V-B)
    channel_bits: int = 512  # per-channel data width at the kernel clock (seeds/001 §V-B)
    data_bits: int = 16  # FP16 (seeds/001 §IV-B)
    ddr_Bps: float = 19e9  # one DDR channel: half of the 38 GB/s of two (seeds/001 §IV-B)
    window_tokens: int = 64  # summarization sliding window held on chip (§IV-C Conv1D);
    #                          taken equal to d, the tile height

    def __post_init__(self) -> None:
        assert self.d >= 2 and self.d & (self.d - 1) == 0, "d must be a power of two"
        assert self.l >= 1 and self.clock_hz > 0

    @property
    def hbm_values_per_cycle(self) -> int:
        return self.hbm_channels * self.channel_bits // self.data_bits

    @property
    def ddr_values_per_cycle(self) -> float:
        return self.ddr_Bps / self.clock_hz / (self.data_bits / 8)

    @property
    def tile_cycles(self) -> float:
        """Cycles per d x l tile: one, unless HBM cannot feed the MFU every cycle."""
        return max(1.0, self.d * self.l / self.hbm_values_per_cycle) / DFX_STREAM_EFFICIENCY

    @property
    def tree_cycles(self) -> int:
        """A d-input FP16 adder tree (MFU lanes and SFU_V accumulation)."""
        return int(log2(self.d)) * FP16_ADD_CYCLES

    @property
    def mfu_latency(self) -> int:
        """Multiplier, adder tree, then the scalar accumulate/bias add (§V-C)."""
        return FP16_MUL_CYCLES + self.tree_cycles + FP16_ADD_CYCLES


class DFXEngine:
    """Cycles per plan step and resources of one core; stateless apart from its config."""

    name = "dfx"

    def __init__(self, config: DFXConfig | None = None) -> None:
        self.config = config or DFXConfig()

    @property
    def hbm_bytes_per_cycle(self) -> float:
        """Bytes the tile stream pulls from HBM each cycle (at most the 32 x 512 bits)."""
        c = self.config
        return min(c.d * c.l, c.hbm_values_per_cycle) * c.data_bits / 8

    def seconds(self, step: ComputeStep, phase: PhaseArrays) -> np.ndarray:
        return self.cycles(step, phase) / self.config.clock_hz

    def cycles(self, step: ComputeStep, phase: PhaseArrays) -> np.ndarray:
        c, op, m, t = self.config, step.op, phase.new_tokens, phase.context
        zeros = np.zeros_like(t, dtype=float)
        if op.kind == "linear":
            tiles = ceil_div(op.fan_in, c.d) * ceil_div(step.local_out, c.l)
            return zeros + m * tiles * c.tile_cycles + c.mfu_latency
        if op.kind == "attn_score":  # MaskedMM: Key^T (head_dim x t) tiles, then ReduMax
            tiles = ceil_div(op.fan_in, c.d) * ceil_div(t, c.l)
            per_head = m * tiles * c.tile_cycles + c.mfu_latency + self._reduce_max_cycles
            return step.local_heads * per_head
        if op.kind == "softmax":  # sub max, exp, accumulate, reciprocal, multiply (§IV-C)
            passes = 4 * m * ceil_div(t, c.d)
            latency = (FP16_ADD_CYCLES + FP16_EXP_CYCLES + c.tree_cycles + FP16_ADD_CYCLES
                       + RECIP_CYCLES + FP16_MUL_CYCLES)
            return step.local_heads * (passes + latency)
        if op.kind == "attn_context":  # MM: Score x Value, Value stored transposed (§V-B)
            tiles = ceil_div(t, c.d) * ceil_div(op.fan_in, c.l)
            return step.local_heads * (m * tiles * c.tile_cycles + c.mfu_latency)
        if op.kind == "norm":
            return zeros + self._norm_cycles(m, op.fan_out)
        if op.kind == "residual":
            return zeros + BYPASS_CYCLES + m * ceil_div(op.fan_out, c.d) + FP16_ADD_CYCLES
        if op.kind == "activation":  # GELU by lookup + linear interpolation in SFU_M, on
            return zeros + FP16_MUL_CYCLES + FP16_ADD_CYCLES  # the MFU output stream
        if op.kind == "gated_activation":  # SFU_M activation, then a VFU multiply pass
            return zeros + (FP16_MUL_CYCLES + FP16_ADD_CYCLES + m * ceil_div(step.local_out, c.d)
                            + FP16_MUL_CYCLES)
        if op.kind == "embedding":  # WTE and WPE rows from DDR, then one add pass
            row_cycles = 2 * op.fan_out / c.ddr_values_per_cycle
            return zeros + m * (row_cycles + ceil_div(op.fan_out, c.d)) + FP16_ADD_CYCLES
        if op.kind == "lm_head":  # MM with the local WTE slice streamed from DDR, argmax
            stream = op.fan_in * step.local_out / min(c.ddr_values_per_cycle, c.d * c.l)
            return zeros + stream / DFX_STREAM_EFFICIENCY + c.mfu_latency + self._reduce_max_cycles
        raise AssertionError(f"DFX has no instruction for op kind {op.kind}")

    @property
    def _reduce_max_cycles(self) -> int:
        return int(log2(self.config.l)) * COMPARE_LEVEL_CYCLES

    def _norm_cycles(self, rows: int, width: int) -> int:
        """LayerNorm as the vector-instruction sequence of §IV-C: accum, mul(1/W), sub, mul
        (square), accum, mul(1/W), add(eps), recip_sqrt, mul, mul(gamma), add(beta), with
        gamma and beta loaded into the register file."""
        c = self.config
        pass_cycles = rows * ceil_div(width, c.d)
        accum = pass_cycles + c.tree_cycles + FP16_ADD_CYCLES
        elementwise = 5 * pass_cycles + 2 * FP16_ADD_CYCLES + 3 * FP16_MUL_CYCLES
        scalars = rows + 2 * FP16_MUL_CYCLES + FP16_ADD_CYCLES + RECIP_CYCLES  # one row/cycle
        loads = 2 * (ceil_div(width, c.d) + BYPASS_CYCLES)
        return 2 * accum + elementwise + scalars + loads

    def resources(self, spec: ModelSpec) -> dict[str, Resources]:
        """DSP from §V-C's operator mapping; BRAM/URAM from the buffers the core needs."""
        c = self.config
        d, l = c.d, c.l  # noqa: E741
        # MFU: d*l multipliers (1 DSP), (d-1)*l tree adders (2 DSP), l scalar adders (2 DSP).
        mfu = Resources(dsp=d * l + 2 * (d - 1) * l + 2 * l)
        # VFU: d lanes of add, sub, mul (1 DSP each) and exp (2 DSP) (§V-C).
        vfu = Resources(dsp=d * (1 + 1 + 1 + 2))
        # SFU_V: d-input adder tree (2 DSP per adder) and scalar recip, mul, rsqrt (1 DSP)
        # and add (2 DSP); SFU_M: GELU linear interpolation (mul + add) and the head-scale
        # multiplier on each of l lanes; masking and reduce-max are comparators in LUTs.
        sfu = Resources(dsp=2 * (d - 1) + 3 + 2 + l * (1 + 2 + 1))
        word = d * c.data_bits  # one d-vector per register-file access
        live_values = 7 * spec.hidden + spec.ffn  # activations of one token in a block
        buffers = add_resources(
            # DMA: one burst FIFO per HBM channel and one for DDR (assumed 512 deep).
            *[memory_blocks(c.channel_bits, 512)] * (c.hbm_channels + 1),
            # Vector register file: the window of tokens' live activations (§V-D).
            memory_blocks(word, c.window_tokens * live_values // d),
            # Score row double buffer for Softmax over the longest context.
            memory_blocks(word, 2 * ceil_div(spec.max_positions, d)),
            # Router TX and RX buffers of 64 x 16-bit beats for the widest sync (§V-E).
            *[memory_blocks(word, c.window_tokens * spec.ffn // d)] * 2,
            # Value transpose unit: a double-buffered d x d tile (§V-B).
            memory_blocks(word, 2 * d),
            # GELU table: 2048 (slope, intercept) FP16 pairs per lane (§V-C).
            *[memory_blocks(2 * c.data_bits, 2048)] * l,
            # Instruction buffer and scalar register file.
            memory_blocks(64, 1024), memory_blocks(c.data_bits, 1024),
        )
        return {"mfu": mfu, "vfu": vfu, "sfu": sfu, "buffers": buffers}
