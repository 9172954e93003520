"""The DFX timing simulator's scheduler rules on hand-written programs, cycles counted by
hand from seeds/001 §V-C's latencies (mul 6, add 11, a 64-input adder tree 6 x 11 = 66)."""

import numpy as np
import pytest

from archipelago.hardware.cluster import resolve_cluster
from archipelago.strategies.tensor_parallel.dfx_program.isa import (
    Compute,
    Dma,
    DmaOp,
    Flag,
    Instr,
    Loc,
    Op,
    Program,
    Router,
    RouterOp,
    Section,
    SystemConfig,
)
from archipelago.strategies.tensor_parallel.dfx_program.timing import Simulator
from archipelago.strategies.tensor_parallel.dfx_program.units import UnitModel
from archipelago.strategies.tensor_parallel.engines.dfx import DFXConfig
from archipelago.strategies.tensor_parallel.engines.router import dfx_hop_s

U280_CHANNEL_BPS = 460e9 / 32  # seeds/001 §IV-B: 460 GB/s over 32 channels


def simulator(cluster: str = "1xu280", efficiency: float = 1.0,
              sync_overhead_s: float = 0.0) -> Simulator:
    """The mechanisms alone unless told: efficiency 1, no per-sync cost."""
    return Simulator(UnitModel(DFXConfig(), U280_CHANNEL_BPS, resolve_cluster(cluster),
                               efficiency, sync_overhead_s))


def program(layer: list[Instr], core: int = 0, cores: int = 1) -> Program:
    config = SystemConfig(core_id=core, cores=cores, layers=1, input_tokens=1,
                          output_tokens=1, d=64, l=16, layer_stride=0)
    empty = Section("empty", ())
    return Program(config, empty, Section("layer", tuple(layer)), empty)


def times(layer: list[Instr], cluster: str = "1xu280") -> list[tuple[float, float]]:
    result = simulator(cluster).run([program(layer)])
    return [(float(r.start[0, 0]), float(r.end[0, 0])) for r in result.timeline]


def test_a_scalar_operand_waits_for_writeback_and_a_vector_one_chains() -> None:
    """accum -> mul by its scalar (scoreboard: waits) -> add of the product (chains)."""
    layer = [
        Compute(Op.ACCUM, 0, 0, 1, cols=1024, dst_loc=Loc.SRF),
        Compute(Op.MUL, 0, 1, 2048, cols=1024, src2_loc=Loc.SRF, flags=Flag.SCALAR),
        Compute(Op.ADD, 2048, 4096, 6144, cols=1024),
    ]
    # accum: 16 chunks in, tree 66, then 16 chunk sums one after another on the scalar
    # adder: done at 66 + 16 x 11 = 242. mul: starts at 242, 16 chunks, +6: 264. add: its
    # first input (the mul's first product) is out at 242 + 1 + 6 = 249, not at 264; its 16
    # chunks take it to 265 (after the mul's last product, 264), +11: 276.
    assert times(layer) == [(0, 242), (242, 264), (249, 276)]


def test_an_overlapping_destination_waits_but_an_independent_one_runs_alongside() -> None:
    """add x -> y; mul writing y again (WAW: waits for writeback); sub elsewhere (free)."""
    layer = [
        Compute(Op.ADD, 0, 1024, 2048, cols=1024),
        Compute(Op.MUL, 4096, 5120, 2048 + 512, cols=256),
        Compute(Op.SUB, 4096, 5120, 8192, cols=1024),
    ]
    # add: 16 chunks + 11 = 27. mul overlaps [2048, 3072) at 2560: waits for 27, 4 chunks
    # + 6 = 37. sub: own operator, issues the cycle after the mul: 28, + 16 + 11 = 55.
    assert times(layer) == [(0, 27), (27, 37), (28, 55)]


def test_a_conv1d_counts_block_rows_at_the_accumulator_latency() -> None:
    """Conv1D 1024 x 256 from HBM, then a residual add chained on its output."""
    layer = [
        Compute(Op.CONV1D, 0, 0, 4096, rows=1024, cols=256, src2_loc=Loc.HBM),
        Compute(Op.ADD, 4096, 8192, 12288, cols=256),
    ]
    # 16 tile rows x 16 lane groups: 4 zigzag blocks of 4 tiles. A block: its first tile row
    # 4 cycles, then 15 rows each waiting for the lane's scalar add (11): 4 + 15 x 11 = 169;
    # 4 blocks 676. Pipeline 6 + 66 + 11 = 83: written back at 759, first block out at
    # 169 + 83 = 252. The add starts there and ends 11 after the last output: 770.
    assert times(layer) == [(0, 759), (252, 770)]


def test_a_matrix_input_is_preloaded_not_chained() -> None:
    """mul -> Conv1D reading the product as its input vector waits for the whole vector."""
    layer = [
        Compute(Op.MUL, 0, 1024, 2048, cols=64),
        Compute(Op.CONV1D, 2048, 0, 4096, rows=64, cols=16, src2_loc=Loc.HBM),
    ]
    # mul: 1 chunk + 6 = 7; conv1d 64 x 16: one tile, 1 cycle + 83.
    assert times(layer) == [(0, 7), (7, 91)]


def test_dma_and_compute_run_in_parallel_and_share_the_hbm_interface() -> None:
    """A dma load of 4 tiles, a Conv1D streaming 16 x 1 tiles from HBM, a vector op."""
    layer = [
        Dma(DmaOp.LOAD, 0, 0, 4 * 1024, src_loc=Loc.HBM, dst_loc=Loc.VRF),
        Compute(Op.CONV1D, 8192, 1 << 20, 16384, rows=1024, cols=16, src2_loc=Loc.HBM),
        Compute(Op.EXP, 20000, 0, 24000, cols=64),
    ]
    # dma: 4 tiles at one a cycle (32 x 512 bits = one 64 x 16 FP16 tile). The Conv1D waits
    # for the HBM interface (4), then 16 tile rows of one tile each: 1 + 15 x 11 = 166, +83.
    # The exp is independent: issues the cycle after the Conv1D, 1 chunk + 4.
    assert times(layer) == [(0, 4), (4, 253), (5, 10)]


def test_a_ring_of_two_cores_waits_for_the_neighbour_hop() -> None:
    """Each core sends its 256 values and receives the other's (one hop, router.py)."""
    def core(rank: int) -> Program:
        return program([
            Compute(Op.ADD, 0, 1024, 2048 + 256 * rank, cols=256),
            Router(RouterOp.SEND, 2048 + 256 * rank, 2048 + 256 * rank, 256),
            Router(RouterOp.RECV, 0, 2048 + 256 * (1 - rank), 256),
        ], rank, 2)
    cluster = resolve_cluster("2xu280")
    result = simulator("2xu280").run([core(0), core(1)])
    hop = dfx_hop_s(256, cluster.link(0, 1), 200e6) * 200e6
    send, recv = result.timeline[1], result.timeline[2]
    # the add ends at 4 + 11 = 15; the send waits for it (the router takes the whole vector)
    assert send.start[:, 0] == pytest.approx([15, 15])
    assert recv.end[:, 0] == pytest.approx([15 + hop, 15 + hop])
    assert result.token_cycles[0] == pytest.approx(15 + hop)


def test_a_sync_pays_the_routers_cost_once_before_its_first_hop() -> None:
    """A four-core ring all-gather as the compiler emits it (hop s: send core id - s + 1's
    slice, receive core id - s's): the first send, of the core's own slice, waits the
    per-sync cost; the two forwards of received slices do not. 1 us = 200 cycles."""
    def core(rank: int) -> Program:
        layer: list[Instr] = [Compute(Op.ADD, 0, 1024, 2048 + 256 * rank, cols=256)]
        for s in range(1, 4):
            sent, got = (rank - s + 1) % 4, (rank - s) % 4
            layer += [Router(RouterOp.SEND, 2048 + 256 * sent, 2048 + 256 * sent, 256),
                      Router(RouterOp.RECV, 0, 2048 + 256 * got, 256)]
        return program(layer, rank, 4)
    cluster = resolve_cluster("4xu280")
    hop = dfx_hop_s(256, cluster.link(0, 1), 200e6) * 200e6
    result = simulator("4xu280", sync_overhead_s=1e-6).run([core(r) for r in range(4)])
    sends = [r for r in result.timeline[:7] if r.instr.op == RouterOp.SEND and
             isinstance(r.instr, Router)]
    # the add ends at 15; the first send holds the TX path 200 + hop, each forward one hop
    assert [float(r.end[0, 0] - r.start[0, 0]) for r in sends] == pytest.approx(
        [200 + hop, hop, hop])
    assert result.token_cycles[0] == pytest.approx(15 + 200 + 3 * hop)


def test_matrix_block_rows_take_one_over_the_tile_efficiency() -> None:
    """The Conv1D of the accumulator test at efficiency 0.8: its 676 cycles of stream take
    845, the 83-cycle pipeline does not stretch."""
    layer = [Compute(Op.CONV1D, 0, 0, 4096, rows=1024, cols=256, src2_loc=Loc.HBM)]
    result = simulator(efficiency=0.8).run([program(layer)])
    assert float(result.timeline[0].end[0, 0]) == pytest.approx(676 / 0.8 + 83)


def test_context_sized_instructions_vectorise_over_tokens() -> None:
    """A MaskedMM over the context: t + 1 columns of K^T for token t."""
    config = SystemConfig(core_id=0, cores=1, layers=1, input_tokens=40, output_tokens=1,
                          d=64, l=16, layer_stride=0)
    instr = Compute(Op.MASKED_MM, 0, 0, 4096, rows=64, cols=0, src2_loc=Loc.HBM,
                    flags=Flag.CONTEXT)
    empty = Section("empty", ())
    result = simulator().run([Program(config, empty, Section("l", (instr,)), empty)])
    # one tile row: ceil((t + 1) / 16) tiles one a cycle, then the 83-cycle pipeline
    context = np.arange(1, 41)
    assert np.allclose(result.token_cycles, np.ceil(context / 16) + 83)


def test_a_matrix_instruction_chains_on_the_dma_load_of_its_tiles() -> None:
    """dma load of a 1024 x 16 weight into the weight buffer, the Conv1D streaming it, and
    a second load that the FIFOs let run ahead of the Conv1D."""
    layer = [
        Dma(DmaOp.LOAD, 0, 0, 1024 * 16, src_loc=Loc.HBM, dst_loc=Loc.WBUF),
        Compute(Op.CONV1D, 8192, 0, 16384, rows=1024, cols=16, src2_loc=Loc.HBM),
        Dma(DmaOp.LOAD, 1 << 20, 0, 1024 * 16, src_loc=Loc.HBM, dst_loc=Loc.WBUF),
    ]
    # load: 16 tiles, one a cycle, the first in after 1. The Conv1D (issued at 0, its
    # input ready) starts on the first tile: 1 + 1 + 15 x 11 = 167 of stream, +83 = 250.
    # The 16 tiles fit the FIFOs (512), so the next load starts when the first is done: 16.
    assert times(layer) == [(0, 16), (1, 250), (16, 32)]


def test_programs_of_different_lengths_are_refused_in_one_line() -> None:
    short = program([Compute(Op.ADD, 0, 64, 128, cols=64)], 0, 2)
    long = program([Compute(Op.ADD, 0, 64, 128, cols=64)] * 2, 1, 2)
    with pytest.raises(ValueError, match="differ in length"):
        simulator("2xu280").run([short, long])
