"""Galapagos kernels on Versal ACAP (seeds/000 §9): matrix multiplies on AI Engines, Quant,
GELU, Softmax and LayerNorm in the programmable logic, one Galapagos shell around both.

A Linear's weights live in AIE data memory: each AIE holds a K x c slice of the weight
matrix, c the widest power of two that fits 32 KB, so a 768 x 768 matrix takes 24 AIEs of
768 x 32 (§9.3); each AIE multiplies 64 int8 weights per cycle with the streamed input
row. Attention takes one AIE per head for the dot-products and one per head for the
softmax matrix multiply, all heads in one kernel each, because only 39 PLIOs connect the
PL to the AIEs (§9.1, §9.3). Everything else, the PL side included, is the HLS model
(the PL clock is the Galapagos shell's; DSP58 counted as DSP48E2 cascades).
"""

from math import ceil

from archipelago.engines.base import add_resources
from archipelago.errors import PartitionError
from archipelago.hardware.device import Resources
from archipelago.hardware.on_chip import AIE_CLOCK_HZ  # "can operate at ... 1 GHz" (§9.1)
from archipelago.models.spec import ModelSpec
from archipelago.strategies.galapagos.hls_stream import (
    HLS_KERNELS,
    ContextKernel,
    HLSStreamEngine,
    KernelRules,
    LinearKernel,
    ScoreKernel,
)
from archipelago.strategies.galapagos.kernel_design import (
    SOFTMAX_PASSES,
    STAGE_DSP,
    KernelDesign,
    KernelJob,
    StreamConfig,
)

AIE_DATA_MEMORY_BYTES = 32 * 1024  # "Each AIE has 32 KB of data memory" (§9.1)
# "each AIE can fetch 512 bits of data, or 64 8-bit weights, per cycle ... we use 64
# multiplies per cycle to estimate the latency of each kernel" (§9.3).
AIE_INT8_MACS_PER_CYCLE = 64


def columns_per_aie(fan_in: int, fan_out: int) -> int:
    """Widest power-of-two column slice of a fan_in x fan_out int8 matrix in one AIE."""
    if fan_in > AIE_DATA_MEMORY_BYTES:
        raise PartitionError(f"one {fan_in}-long weight column exceeds an AIE's "
                             f"{AIE_DATA_MEMORY_BYTES // 1024} KB data memory")
    cols = 1
    while cols * 2 <= fan_out and fan_in * cols * 2 <= AIE_DATA_MEMORY_BYTES:
        cols *= 2
    return cols


def _to_pl(cfg: StreamConfig, aie_cycles: float) -> int:
    return ceil(aie_cycles * cfg.clock_hz / AIE_CLOCK_HZ)


class OnAIE(KernelRules):
    """A matrix multiply on AI Engines with its fused stages in the PL; the HLS kernel it
    replaces keeps its pipeline depth. The defaults are attention's: one AIE per head
    (several where a head's K or V exceeds its memory), working on one head's slice."""

    passes = 1  # PL passes over each element per row (Softmax makes three)

    def aies(self, cfg: StreamConfig, job: KernelJob) -> int:
        """AIEs the kernel takes: K or V of one head must fit its AIE's memory."""
        return job.heads * ceil(cfg.max_seq_len * job.fan_in / AIE_DATA_MEMORY_BYTES)

    def aie_cycles(self, job: KernelJob, seq_len: int) -> float:
        """AIE cycles per row: every AIE of the kernel works on its slice in parallel."""
        return seq_len * job.fan_in / AIE_INT8_MACS_PER_CYCLE

    def stage_elements(self, job: KernelJob, seq_len: int) -> int:
        """Elements per row the PL stages see."""
        return job.heads * job.fan_out

    def design(self, cfg: StreamConfig, job: KernelJob, ii: int) -> KernelDesign:
        per_row = self.stage_elements(job, cfg.max_seq_len)
        lanes = ceil(self.passes * per_row / ii) if job.stages else 1
        return KernelDesign(job, tiles=self.aies(cfg, job), pes=AIE_INT8_MACS_PER_CYCLE,
                            lanes=lanes)

    def compute(self, cfg: StreamConfig, d: KernelDesign, seq_len: int) -> int:
        """PL cycles per row: the AIEs' time or the PL stages', whichever is longer."""
        job = d.job
        stages = ceil(self.stage_elements(job, seq_len) / d.lanes) if job.stages else 0
        return max(_to_pl(cfg, self.aie_cycles(job, seq_len)), stages)

    def resources(self, cfg: StreamConfig, d: KernelDesign) -> Resources:
        stages = sum(STAGE_DSP[s] for s in d.job.stages)
        return add_resources(Resources(dsp=d.lanes * stages, aie=d.tiles),
                             *self.fifos(cfg, d.job))


class LinearOnAIE(OnAIE, LinearKernel):
    """Each AIE holds a K x c slice of the weights (§9.3)."""

    def aies(self, cfg: StreamConfig, job: KernelJob) -> int:
        return ceil(job.fan_out / columns_per_aie(job.fan_in, job.fan_out))

    def aie_cycles(self, job: KernelJob, seq_len: int) -> float:
        cols = columns_per_aie(job.fan_in, job.fan_out)
        return job.fan_in * cols / AIE_INT8_MACS_PER_CYCLE


class ScoreOnAIE(OnAIE, ScoreKernel):
    """Softmax in the PL over the score row."""

    passes = SOFTMAX_PASSES

    def stage_elements(self, job: KernelJob, seq_len: int) -> int:
        return job.heads * seq_len


class ContextOnAIE(OnAIE, ContextKernel):
    pass


AIE_KERNELS: dict[str, KernelRules] = {
    **HLS_KERNELS, "linear": LinearOnAIE(), "score": ScoreOnAIE(),
    "context": ContextOnAIE()}


class AIEEngine(HLSStreamEngine):
    name = "aie"
    kernels = AIE_KERNELS

    def heads_per_kernel(self, spec: ModelSpec) -> int:
        """All heads in one dot-product/Softmax kernel and one softmax-matmul (§9.3)."""
        return spec.heads

    def default_row_interval(self, spec: ModelSpec) -> int:
        """The Q/K/V kernels' AIE time per row, in PL cycles (Linears are balanced by
        their weight memory: 4x the work takes 4x the AIEs, §9.3)."""
        cols = columns_per_aie(spec.hidden, spec.hidden)
        return _to_pl(self.config, spec.hidden * cols / AIE_INT8_MACS_PER_CYCLE)

    def aie_seconds(self, design: KernelDesign, seq_len: int) -> float:
        """The AIE matrix-multiply time of a whole sequence (seeds/000 §9.3's figures)."""
        rules = self.kernels[design.job.op]
        assert isinstance(rules, OnAIE), f"{design.job.op} kernels do not run on AIEs"
        return seq_len * rules.aie_cycles(design.job, seq_len) / AIE_CLOCK_HZ
