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

from dataclasses import replace
from math import ceil

from archipelago.engines.base import add_resources, memory_blocks
from archipelago.errors import PartitionError
from archipelago.hardware.device import Resources
from archipelago.models.spec import ModelSpec
from archipelago.strategies.galapagos.hls_stream import (
    SOFTMAX_PASSES,
    STAGE_DSP,
    HLSStreamEngine,
    KernelDesign,
    KernelJob,
)

AIE_CLOCK_HZ = 1e9  # "a VLIW processor that can operate at a frequency of 1 GHz" (§9.1)
AIE_DATA_MEMORY_BYTES = 32 * 1024  # "Each AIE has 32 KB of data memory" (§9.1)
# "each AIE can fetch 512 bits of data, or 64 8-bit weights, per cycle ... we use 64
# multiplies per cycle to estimate the latency of each kernel" (§9.3).
AIE_INT8_MACS_PER_CYCLE = 64
_AIE_OPS = frozenset({"linear", "score", "context"})


def _stage_elements(job: KernelJob, seq_len: int) -> int:
    """Elements per row the PL stages see: scores for Softmax, outputs otherwise."""
    return job.heads * (seq_len if job.op == "score" else job.fan_out)


def columns_per_aie(fan_in: int, fan_out: int) -> int:
    """Widest power-of-two column slice of a fan_in x fan_out int8 matrix in one AIE."""
    if fan_in > AIE_DATA_MEMORY_BYTES:
        raise PartitionError(f"one {fan_in}-long weight column exceeds an AIE's "
                             f"{AIE_DATA_MEMORY_BYTES // 1024} KB data memory")
    cols = 1
    while cols * 2 <= fan_out and fan_in * cols * 2 <= AIE_DATA_MEMORY_BYTES:
        cols *= 2
    return cols


class AIEEngine(HLSStreamEngine):
    name = "aie"

    def heads_per_kernel(self, spec: ModelSpec) -> int:
        """All heads in one dot-product/Softmax kernel and one softmax-matmul (§9.3)."""
        return spec.heads

    def default_row_interval(self, spec: ModelSpec) -> int:
        """The Q/K/V kernels' AIE time per row, in PL cycles (Linears are balanced by
        their weight memory: 4x the work takes 4x the AIEs, §9.3)."""
        cols = columns_per_aie(spec.hidden, spec.hidden)
        return self._to_pl(spec.hidden * cols / AIE_INT8_MACS_PER_CYCLE)

    def aies(self, job: KernelJob) -> int:
        if job.op == "linear":
            return ceil(job.fan_out / columns_per_aie(job.fan_in, job.fan_out))
        m = self.config.max_seq_len  # K or V of one head must fit its AIE's memory
        return job.heads * ceil(m * job.fan_in / AIE_DATA_MEMORY_BYTES)

    def design(self, job: KernelJob, row_interval: int) -> KernelDesign:
        if job.op not in _AIE_OPS:
            return super().design(job, row_interval)
        per_row = _stage_elements(job, self.config.max_seq_len)
        passes = SOFTMAX_PASSES if job.op == "score" else 1
        lanes = ceil(passes * per_row / row_interval) if job.stages else 1
        design = KernelDesign(job, tiles=self.aies(job), pes=AIE_INT8_MACS_PER_CYCLE,
                              lanes=lanes)
        return replace(design, resources=self.resources(design))

    def _aie_cycles(self, design: KernelDesign, seq_len: int) -> float:
        """AIE cycles per row: every AIE of the kernel works on its slice in parallel."""
        job = design.job
        if job.op == "linear":
            cols = columns_per_aie(job.fan_in, job.fan_out)
            return job.fan_in * cols / AIE_INT8_MACS_PER_CYCLE
        return seq_len * job.fan_in / AIE_INT8_MACS_PER_CYCLE  # one head per AIE

    def aie_seconds(self, design: KernelDesign, seq_len: int) -> float:
        """The AIE matrix-multiply time of a whole sequence (seeds/000 §9.3's figures)."""
        return seq_len * self._aie_cycles(design, seq_len) / AIE_CLOCK_HZ

    def _to_pl(self, aie_cycles: float) -> int:
        return ceil(aie_cycles * self.config.clock_hz / AIE_CLOCK_HZ)

    def compute_cycles(self, design: KernelDesign, seq_len: int) -> int:
        if not design.resources.aie:
            return super().compute_cycles(design, seq_len)
        job = design.job
        stages = ceil(_stage_elements(job, seq_len) / design.lanes) if job.stages else 0
        return max(self._to_pl(self._aie_cycles(design, seq_len)), stages)

    def resources(self, design: KernelDesign) -> Resources:
        if design.job.op not in _AIE_OPS:
            return super().resources(design)
        job = design.job
        stages = sum(STAGE_DSP[s] for s in job.stages)
        pl = [memory_blocks(8 * self.config.flit_bytes, self.config.max_seq_len * n)
              for n in self._fifo_flits(job) if n]
        return add_resources(Resources(dsp=design.lanes * stages, aie=design.tiles), *pl)
