"""A Brainwave-style NPU overlay (seeds/003 §III Fig. 3d, refs [1] and [6]): a matrix-vector
unit of `tiles` tile engines, each with `native_dim` dot-product engines of `lanes` INT8
multipliers, fed from matrix register files (MRFs) in M20K, followed by a chain of
multi-function units for vector ops. Weights stay persistent in the MRFs (and, on the
S10+TensorRAM part, in the chiplet, which computes next to its memory).

Timing of one overlay program (a chain, Fig. 3b): the matvec streams N x N native tiles,
N / L cycles each, spread over the tiles; every chained vector op adds its pipeline depth
only, because the MFUs consume the MVU's output as it streams ([1] §3: instruction chains).
"""

from collections.abc import Iterable
from dataclasses import dataclass
from math import ceil, log2
from typing import Protocol

from pydantic import Field

from archipelago.engines.base import (
    MAX_CLOCK_HZ,
    MAX_DIM,
    MIN_CLOCK_HZ,
    MIN_UTILIZATION,
    EngineConfig,
)
from archipelago.hardware.device import Device


class Instruction(Protocol):
    """An overlay instruction: an FPGA API call of seeds/003 Table I on `length` elements
    (a matvec: `length` rows by `cols`)."""

    op: str
    length: int
    cols: int

# Brainwave on Stratix 10 280 ([1] Fowers et al., ISCA 2018, Table: BW_S10): native
# dimension 400, 40 lanes, 6 tiles = 96,000 MACs on 5,760 DSP blocks. We keep its native
# dimension and lanes, and size the tile count of every device by the same MACs per DSP.
BRAINWAVE_NATIVE_DIM = 400
BRAINWAVE_LANES = 40
BRAINWAVE_S10_MACS = 96_000
BRAINWAVE_S10_DSPS = 5_760
# seeds/003 §IV: the A10 and S10 overlays use "around 80% of the available DSP blocks and
# M20Ks" and run at 200 MHz.
UTILIZATION = 0.8
CLOCK_HZ = 200e6
M20K_BYTES = 20 * 1024 // 8  # one M20K holds 20 Kb


class NPUConfig(EngineConfig):
    """Design parameters (`--engine-config`), each validated once here."""

    native_dim: int = Field(default=BRAINWAVE_NATIVE_DIM, gt=0, le=MAX_DIM)
    lanes: int = Field(default=BRAINWAVE_LANES, gt=0, le=MAX_DIM)
    # None: as many as the DSP budget allows
    tiles: int | None = Field(default=None, gt=0, le=MAX_DIM)
    # None: the device's (200 MHz)
    clock_hz: float | None = Field(default=None, ge=MIN_CLOCK_HZ, le=MAX_CLOCK_HZ)
    dsp_utilization: float = Field(default=UTILIZATION, ge=MIN_UTILIZATION, le=1)
    m20k_utilization: float = Field(default=UTILIZATION, ge=MIN_UTILIZATION, le=1)


@dataclass(frozen=True)
class NPUDesign:
    """One card's overlay: its MVU shape and where its persistent weights can live."""

    device: Device
    native_dim: int
    lanes: int
    tiles: int
    clock_hz: float
    mrf_bytes: int          # INT8 weights the M20K MRFs hold (whole native tiles)
    chiplet_bytes: int      # TensorRAM capacity, 0 without a chiplet
    chiplet_Bps: float      # chiplet bandwidth = its INT8 MAC rate (one weight byte per MAC)

    @property
    def macs(self) -> int:
        return self.tiles * self.native_dim * self.lanes

    @property
    def onchip_bytes(self) -> int:
        return self.mrf_bytes + self.chiplet_bytes

    def native_tiles(self, rows: int, cols: int) -> int:
        n = self.native_dim
        return ceil(rows / n) * ceil(cols / n)

    def block_bytes(self, rows: int, cols: int) -> int:
        """MRF space of a rows x cols INT8 block, padded to whole native tiles."""
        return self.native_tiles(rows, cols) * self.native_dim ** 2

    def pipeline_cycles(self) -> int:
        """Fill of one chain: MRF read, multiply, the lanes' adder tree, the cross-tile
        reduction, accumulate and write back (one register stage each)."""
        return 4 + ceil(log2(self.lanes)) + ceil(log2(max(self.tiles, 2)))

    def matvec_s(self, rows: int, cols: int, fabric_fraction: float = 1.0) -> float:
        """MVU time: native tiles over the tile engines, N / L cycles each. On the S10+TR
        the share of the block held in the chiplet runs at the chiplet's rate alongside."""
        tiles = self.native_tiles(rows, cols)
        fabric_tiles = ceil(tiles * fabric_fraction)
        fabric = ceil(fabric_tiles / self.tiles) * ceil(self.native_dim / self.lanes)
        fabric_s = (fabric + self.pipeline_cycles()) / self.clock_hz
        if fabric_fraction >= 1.0:
            return fabric_s
        chip_s = (tiles - fabric_tiles) * self.native_dim ** 2 / self.chiplet_Bps
        return max(fabric_s, chip_s + self.pipeline_cycles() / self.clock_hz)

    def vector_s(self, length: int) -> float:
        """A vector op on its own (not chained): native vectors at L elements per cycle."""
        cycles = ceil(length / self.native_dim) * ceil(self.native_dim / self.lanes)
        return (cycles + self.pipeline_cycles()) / self.clock_hz

    def fabric_share(self, weight_bytes: int) -> float:
        """Fraction of a card's weights kept in the fabric MRFs: with a chiplet, weights are
        spread in proportion to the two MAC rates so both finish together, within each
        memory's capacity; without one, all of them."""
        if not self.chiplet_bytes or weight_bytes == 0:
            return 1.0
        fabric_rate = self.macs * self.clock_hz
        share = fabric_rate / (fabric_rate + self.chiplet_Bps)
        share = min(share, self.mrf_bytes / weight_bytes)
        return max(share, 1.0 - self.chiplet_bytes / weight_bytes, 0.0)

    def execute_s(self, instrs: Iterable[Instruction], fabric_fraction: float = 1.0) -> float:
        """One `fpga_execute`: the chain's matvec, then each chained op's pipeline depth."""
        total = 0.0
        for i, instr in enumerate(instrs):
            if instr.op == "fpga_matvec":  # the MVU runs each product in turn
                total += self.matvec_s(instr.length, instr.cols, fabric_fraction)
            elif i == 0:
                total += self.vector_s(instr.length)
            else:
                total += self.pipeline_cycles() / self.clock_hz
        return total


def npu_design(device: Device, config: NPUConfig | None = None) -> NPUDesign:
    """The overlay a card of `device` holds: tiles from its DSP budget, MRFs from its M20Ks
    (both at `UTILIZATION`), plus a TensorRAM chiplet where the device lists one."""
    cfg = config or NPUConfig()
    dsp = device.resources.dsp
    macs_per_dsp = BRAINWAVE_S10_MACS / BRAINWAVE_S10_DSPS
    per_tile = cfg.native_dim * cfg.lanes
    tiles = cfg.tiles or max(1, int(dsp * cfg.dsp_utilization * macs_per_dsp // per_tile))
    m20k_bytes = int(device.resources.bram * cfg.m20k_utilization) * M20K_BYTES
    tile_bytes = cfg.native_dim ** 2
    chiplet = device.memory("tensorram")
    return NPUDesign(
        device=device, native_dim=cfg.native_dim, lanes=cfg.lanes, tiles=tiles,
        clock_hz=cfg.clock_hz or device.clock_hz or CLOCK_HZ,
        mrf_bytes=m20k_bytes // tile_bytes * tile_bytes,
        chiplet_bytes=chiplet.capacity_bytes if chiplet else 0,
        chiplet_Bps=chiplet.bandwidth_Bps if chiplet else 0.0,
    )
