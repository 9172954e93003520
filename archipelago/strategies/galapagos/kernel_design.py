"""What a Galapagos HLS streaming kernel (seeds/000 §7-8) is asked to do and the build it
belongs to: the job (op, row sizes, fused I-BERT stages), its chosen parallelism, the design
parameters every kernel shares, and the arithmetic constants of UltraScale+ DSPs and the
I-BERT integer stages the kernel rules (hls_stream.py) size and time kernels with.

Every kernel streams one matrix row (one token) at a time. Quant, GELU, Softmax and LayerNorm
are I-BERT's integer modules (§2.4) fused into the kernel as dataflow stages.
"""

from dataclasses import dataclass, field
from math import ceil
from typing import Literal

from pydantic import Field

from archipelago.engines.base import (
    MAX_BITS,
    MAX_CLOCK_HZ,
    MAX_DIM,
    MAX_TOKENS,
    MIN_CLOCK_HZ,
    MIN_UTILIZATION,
    EngineConfig,
)
from archipelago.engines.dsp_packing import PRODUCTS_PER_DSP
from archipelago.hardware.device import Resources

OpKind = Literal["linear", "score", "context", "layernorm", "gmi"]  # gmi: GMI and gateways
Stage = Literal["quant8", "residual_quant", "gelu", "softmax"]

# Kernel clock: seeds/000 does not print it, but Table 2's latencies are Table 1's
# T + 11 X cycles at exactly 200 MHz (e.g. 128 tokens: 1,438,577 cycles = 7.193 ms).
KERNEL_CLOCK_HZ = 200e6
# The 100G Galapagos stream carries 512-bit flits: a 768-byte row is "12 flits" sent in
# "12 cycles" (seeds/000 §8.2.2).
FLIT_BYTES = 64
# Hardware built for sequences of up to 128 tokens (seeds/000 §2.3, §8.2.1 "128 x 768").
MAX_SEQ_LEN = 128
# DSP48E2 multiplier is 27 x 18 bits; wider products cascade slices (UG579).
DSP_A_BITS, DSP_B_BITS = 27, 18
# Two int8 products per DSP48E2 when they share one operand (Xilinx WP486; the packing LORA
# uses, seeds/002 §V-A, engines/dsp_packing.py). In a Linear every tile multiplies the same
# input element by its own weight column, so tiles pair up on DSPs. seeds/000 needs this:
# it builds each FFN Linear as one kernel (§7.2) on a 1,968-DSP XCZU19EG, yet its packets
# leave every ~H = 768 cycles (Table 1, I), i.e. 3,072 int8 MACs per cycle.
INT8_MACS_PER_DSP = PRODUCTS_PER_DSP
# A fully pipelined DSP48E2 multiply-accumulate: A/B, M and P registers (UG579).
MAC_LATENCY = 4
# Integer square root (LayerNorm, 32-bit radicand: one bit per cycle) and the integer
# divisions of Softmax and LayerNorm (2^32 / sum, 2^31 / std: one quotient bit per cycle),
# as sequential LUT circuits beside the row pipeline.
ISQRT_CYCLES, DIVIDE_CYCLES = 16, 32
# I-BERT LayerNorm passes over a row: mean, variance, normalize (transformers'
# IntLayerNorm; seeds/000 §7.1 implements it "the same way as the software").
LAYERNORM_PASSES = 3
# Softmax passes over a score row: max, exponent and sum, normalize (IntSoftmax).
SOFTMAX_PASSES = 3


def multiplier_dsp(a_bits: int, b_bits: int) -> int:
    """DSP48E2 slices of one a x b multiplier (UG579: 27 x 18 per slice, cascaded)."""
    return ceil(a_bits / DSP_A_BITS) * ceil(b_bits / DSP_B_BITS)


# DSPs per lane of each fused I-BERT stage, from its multipliers (transformers' quant modules):
# a requantization is a 32-bit value times a 32-bit fixed-point multiplier (FixedPointMul),
# the residual form does two of them; GELU squares a 16-bit value and scales by a 32-bit
# factor; Softmax's exponent polynomial is 16 x 16, its normalization 32 x 32, then a 16-bit
# requantization; LayerNorm squares, then scales by a 32-bit factor.
_REQUANT = multiplier_dsp(32, 32)
STAGE_DSP: dict[str, int] = {
    "quant8": _REQUANT,
    "residual_quant": 2 * _REQUANT,
    "gelu": multiplier_dsp(16, 16) + multiplier_dsp(32, 32),
    "softmax": multiplier_dsp(16, 16) + multiplier_dsp(32, 32) + _REQUANT,
}
LAYERNORM_DSP = multiplier_dsp(16, 16) + multiplier_dsp(32, 32)
# Pipeline depth of each fused stage: its multiplier cascade plus rounding and clamping.
STAGE_DEPTH: dict[str, int] = {s: MAC_LATENCY + 2 for s in STAGE_DSP}


class StreamConfig(EngineConfig):
    """Design parameters every kernel of one build shares (`--engine-config` keys)."""

    clock_hz: float = Field(KERNEL_CLOCK_HZ, ge=MIN_CLOCK_HZ, le=MAX_CLOCK_HZ)
    flit_bytes: int = Field(FLIT_BYTES, ge=1, le=MAX_BITS)
    max_seq_len: int = Field(MAX_SEQ_LEN, ge=1, le=MAX_TOKENS)
    # target cycles per row; None: the engine's default (the hidden size; on Versal the AIE time per
    # row)
    row_interval: int | None = Field(None, ge=1, le=2**32)
    # share of each FPGA's DSP/BRAM/URAM/AIE compute kernels fill
    utilization: float = Field(0.9, ge=MIN_UTILIZATION, le=1)
    # encoders per Galapagos cluster (§7.2: one)
    layers_per_cluster: int = Field(1, ge=1, le=MAX_DIM)


@dataclass(frozen=True)
class KernelJob:
    """What one kernel computes, per row. `fan_in`/`fan_out`: elements per input/output row
    (a Linear's K and N; a head's dimension for score/context; the hidden size for
    LayerNorm). `inputs`: bytes per row of each input stream (at the longest sequence);
    for a GMI kernel `out_row_bytes` is its widest output stream."""

    op: OpKind
    fan_in: int
    fan_out: int
    inputs: tuple[int, ...]
    out_row_bytes: int
    stages: tuple[Stage, ...] = ()
    heads: int = 1
    flits_per_row: int = 0  # GMI and gateway kernels: flits they forward per row


@dataclass(frozen=True)
class KernelDesign:
    """A job with its parallelism: `tiles` x `pes` for Linear, `pes` dot-product units for
    score, `lanes` per pass otherwise."""

    job: KernelJob
    tiles: int = 1
    pes: int = 1
    lanes: int = 1
    resources: Resources = field(default_factory=Resources)


def flits(nbytes: int, flit_bytes: int = FLIT_BYTES) -> int:
    return max(1, ceil(nbytes / flit_bytes))

