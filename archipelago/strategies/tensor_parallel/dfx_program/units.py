"""What one DFX instruction costs on its unit (seeds/001 §V-B..E), before any scheduling.

Every figure is a mechanism of the paper, but for the two the analytical engine calibrates
on the paper's measurements, which the simulator takes from it (`UnitModel.calibrated`) as
figures of the same hardware: the fraction of cycles the matrix unit is fed
(dfx.DFX_TILE_EFFICIENCY, a matrix instruction's block rows take 1 / efficiency longer) and
the router's per-sync cost (router.DFX_SYNC_OVERHEAD_S, timing.py charges it to a sync's
first send). With both neutral (`tile_efficiency=1`, `sync_overhead_s=0`) it is the
mechanisms alone:
  - matrix instructions (Conv1D, MaskedMM, MM) stream d x l weight tiles from HBM in the
    zigzag order of §V-B (d / l tiles across a d x d block, then the block row below); each
    of the l lanes has one scalar FP16 adder (§V-C, "2 x l DSPs for scalar additions",
    11 cycles) that accumulates the tree's partial sums, so a block row whose columns were
    last updated one block row earlier waits for that add: a block row takes
    max(tiles x feed, 11) cycles when the matrix has more than one tile row (accumulator
    occupancy). Pipeline: multiplier 6, log2(d) adder levels of 11, scalar add 11 (§V-C),
    then SFU_M's GELU (a table lookup and a linear interpolation: mul + add, §V-C) or
    reduce max (a comparator tree over l lanes, log2(l) levels, one cycle each: not stated);
  - a tile arrives in max(1, d x l x 16 / (channels x channel bits)) cycles, the channel's
    bits per kernel cycle being the DMA's 512-bit port or the HBM channel's bandwidth at the
    kernel clock, whichever is less (§V-B);
  - vector instructions take d elements a cycle through the VFU (add 11, sub 11, mul 6,
    exp 4 cycles; load/store bypass the execution stage: 1 cycle, §V-C); accum reduces each
    d-chunk in SFU_V's adder tree and adds the chunk sums on one scalar adder, each add
    waiting for the previous (§V-C); recip / recip_sqrt are one scalar on SFU_V;
  - dma moves HBM data at the tile stream's rate and DDR data through one channel-wide port
    (§V-B); the router hop is engines/router.py's store-and-forward model of §V-E.
"""

from dataclasses import dataclass
from math import log2

import numpy as np

from archipelago.engines.base import (
    FP16_ADD_CYCLES,
    FP16_EXP_CYCLES,
    FP16_MUL_CYCLES,
    FP16_RECIP_CYCLES,
)
from archipelago.hardware.cluster import Cluster
from archipelago.strategies.tensor_parallel.dfx_program.isa import (
    Compute,
    Dma,
    Flag,
    Loc,
    Op,
)
from archipelago.strategies.tensor_parallel.engines import dfx, router
from archipelago.strategies.tensor_parallel.engines.dfx import (
    BYPASS_CYCLES,
    COMPARE_LEVEL_CYCLES,
    DFXConfig,
)
from archipelago.strategies.tensor_parallel.engines.router import dfx_hop_s

# Not stated in seeds/001: the DMA's per-channel burst FIFOs, 512 deep (the same assumption
# sizes them in engines/dfx.py's resources); 32 of them hold 512 beats of the 32 x 512-bit stream,
# i.e. 512 tiles, how far the weight stream may run ahead of the MFU.
DMA_FIFO_DEPTH = 512

_VFU_CYCLES = {Op.ADD: FP16_ADD_CYCLES, Op.SUB: FP16_ADD_CYCLES, Op.MUL: FP16_MUL_CYCLES,
               Op.EXP: FP16_EXP_CYCLES, Op.LOAD: BYPASS_CYCLES, Op.STORE: BYPASS_CYCLES}


@dataclass(frozen=True)
class Cost:
    """An instruction on its unit: `stream` cycles taking inputs, its last result
    `latency` cycles after the last input; a streaming instruction writes its first result
    after `first` cycles (a matrix instruction's first column block, plus its latency),
    others (a reduction to one scalar) only at the end. `tiles` is what it pulls through
    the DMA's weight stream."""

    stream: np.ndarray
    latency: np.ndarray | float
    first: np.ndarray | None
    tiles: np.ndarray | float = 0.0


@dataclass(frozen=True)
class UnitModel:
    """The core's units for one configuration and cluster (§V-B..E), with the two
    calibrated figures: the fraction of cycles the matrix unit is fed, and the router's cost
    per sync beyond its hops (seconds)."""

    config: DFXConfig
    hbm_channel_Bps: float
    cluster: Cluster
    tile_efficiency: float
    sync_overhead_s: float

    @classmethod
    def calibrated(cls, config: DFXConfig, hbm_channel_Bps: float,
                   cluster: Cluster) -> "UnitModel":
        """The units with the analytical engine's calibrated figures as they stand now (read
        at the call, so a refit or the benchmark's `unfitted` reaches both models)."""
        return cls(config, hbm_channel_Bps, cluster, dfx.DFX_TILE_EFFICIENCY,
                   router.DFX_SYNC_OVERHEAD_S)

    @property
    def sync_setup_cycles(self) -> float:
        """The router's per-sync cost in kernel cycles (router.DFX_SYNC_OVERHEAD_S)."""
        return self.sync_overhead_s * self.config.clock_hz

    @property
    def feed(self) -> float:
        """Cycles per d x l tile from the 32 HBM channels (§V-B)."""
        c = self.config
        channel_bits = min(c.channel_bits, self.hbm_channel_Bps * 8 / c.clock_hz)
        return max(1.0, c.d * c.l * c.data_bits / (c.hbm_channels * channel_bits))

    @property
    def ddr_values_per_cycle(self) -> float:
        return self.config.row_values_per_cycle(self.config.ddr_Bps)

    @property
    def tree(self) -> int:
        return int(log2(self.config.d)) * FP16_ADD_CYCLES

    def matrix(self, rows: np.ndarray | int, cols: np.ndarray | int, flags: Flag) -> Cost:
        """A rows x cols matrix against one input vector, zigzag blocks (§V-B, §V-C)."""
        c = self.config
        tile_rows = -(-np.asarray(rows) // c.d)
        groups = -(-np.asarray(cols) // c.l)
        width = max(1, c.d // c.l)
        full, rest = groups // width, groups % width

        def block(tiles: np.ndarray) -> np.ndarray:
            feed = tiles * self.feed
            row = np.where(tile_rows > 1, np.maximum(feed, FP16_ADD_CYCLES), feed)
            return np.where(tiles > 0, feed + (tile_rows - 1) * row, 0.0) / self.tile_efficiency

        whole, part = block(np.full_like(groups, width)), block(rest)
        stream = full * whole + part
        latency = FP16_MUL_CYCLES + self.tree + FP16_ADD_CYCLES
        if Flag.GELU in flags:
            latency += FP16_MUL_CYCLES + FP16_ADD_CYCLES
        if Flag.REDUCE_MAX in flags:
            latency += int(log2(c.l)) * COMPARE_LEVEL_CYCLES
        first = np.where(full > 0, whole, part) + latency
        return Cost(stream.astype(float), latency, first.astype(float),
                    (tile_rows * groups).astype(float))

    def vector(self, op: Op, cols: np.ndarray | int, flags: Flag) -> Cost:
        """VFU (and SFU_V) instructions, d elements a cycle (§V-C)."""
        chunks = (-(-np.asarray(cols) // self.config.d)).astype(float)
        if op == Op.ACCUM:
            tail = FP16_MUL_CYCLES if Flag.MEAN in flags else 0
            # each chunk sum waits for the previous add on the one scalar adder
            # chunks enter the tree one a cycle; each chunk sum then waits for the previous
            # add on the one scalar adder: the sum is out tree + chunks x 11 cycles in
            return Cost(chunks, self.tree + chunks * (FP16_ADD_CYCLES - 1) + tail, None)
        if op in (Op.RECIP, Op.RECIP_SQRT):
            eps = FP16_ADD_CYCLES if Flag.SCALAR in flags else 0
            return Cost(np.ones_like(chunks), eps + FP16_RECIP_CYCLES, None)
        return Cost(chunks, _VFU_CYCLES[op], np.ones_like(chunks) + _VFU_CYCLES[op])

    def dma(self, instr: Dma, xfer: np.ndarray | int) -> Cost:
        """HBM at the tile stream's rate, DDR through one channel-wide port (§V-B)."""
        xfer = np.asarray(xfer, dtype=float)
        off_chip = instr.dst_loc if instr.dst_loc.off_chip else instr.src_loc
        if off_chip == Loc.HBM:
            tiles = xfer / (self.config.d * self.config.l)
            return Cost(np.ceil(tiles) * self.feed, 0.0, np.full_like(xfer, self.feed), tiles)
        cycles = np.ceil(xfer / self.ddr_values_per_cycle)
        return Cost(cycles, 0.0, np.ones_like(cycles))

    def hop_cycles(self, xfer: int) -> float:
        """One store-and-forward ring hop of `xfer` values (engines/router.py, §V-E)."""
        c = self.config
        return dfx_hop_s(xfer, self.cluster.link(0, 1), c.clock_hz, c.data_bits) * c.clock_hz

    def compute(self, instr: Compute, rows: np.ndarray | int, cols: np.ndarray | int) -> Cost:
        if instr.op.is_matrix:
            return self.matrix(rows, cols, instr.flags)
        return self.vector(instr.op, cols, instr.flags)
