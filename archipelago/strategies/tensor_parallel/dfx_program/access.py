"""What one DFX instruction reads and writes, as spans of on- and off-chip memory: what the
timing simulator's scoreboard (timing.py, seeds/001 §V-A) checks an instruction's sources and
destination against, and which of them stream (chain)."""

from dataclasses import dataclass

import numpy as np

from archipelago.strategies.tensor_parallel.dfx_program.isa import (
    RMAX_REG,
    Compute,
    Dma,
    DmaOp,
    Flag,
    Instr,
    Loc,
    Op,
    Router,
    RouterOp,
    SystemConfig,
)

Span = tuple[Loc, int, int]  # [lo, hi): elements on chip, bytes off chip


@dataclass(frozen=True)
class Access:
    """What an instruction reads and writes: (span, chained) pairs. A read is `chained`
    when the instruction consumes it as an in-order stream; a write when it is produced as
    one."""

    reads: tuple[tuple[Span, bool], ...]
    writes: tuple[tuple[Span, bool], ...]


def dims(instr: Compute, context: np.ndarray) -> tuple[np.ndarray | int, np.ndarray | int]:
    """rows, cols, a zero one being the context length where the CONTEXT flag says so."""
    def dim(value: int) -> np.ndarray | int:
        return context if value == 0 and Flag.CONTEXT in instr.flags else value
    return dim(instr.rows), dim(instr.cols)


def _off_chip(loc: Loc, address: int, nbytes: int, flags: Flag, layer: int,
              cfg: SystemConfig) -> Span:
    """An off-chip span: the LAYER modifier moves it by layers; a TOKEN-modified one is
    taken over every token (the KV cache rows of the whole run), an INDEX-modified one
    (the WTE row of a token ID) over the rows it can reach, taken as every token's."""
    stride = cfg.layer_stride if loc == Loc.HBM else cfg.ddr_layer_stride
    base = address + (layer * stride if Flag.LAYER in flags and layer >= 0 else 0)
    tokens = cfg.input_tokens + cfg.output_tokens
    size = nbytes * (tokens if flags & (Flag.TOKEN | Flag.INDEX | Flag.CONTEXT) else 1)
    return (loc, base, base + size)


def access(instr: Instr, layer: int, cfg: SystemConfig) -> Access:
    """Spans of one instruction for the scoreboard, at the longest context."""
    tokens = cfg.input_tokens + cfg.output_tokens
    if isinstance(instr, Dma):
        n = instr.xfer_size
        if instr.op == DmaOp.LOAD:
            src = _off_chip(instr.src_loc, instr.src, 2 * n, instr.flags, layer, cfg)
            reads = [(src, True)]
            if Flag.INDEX in instr.flags:  # the address waits for the token ID
                reads.append(((Loc.SRF, RMAX_REG, RMAX_REG + 1), False))
            return Access(tuple(reads), (((instr.dst_loc, instr.dst, instr.dst + n), True),))
        dst = _off_chip(instr.dst_loc, instr.dst, 2 * n, instr.flags, layer, cfg)
        return Access((((instr.src_loc, instr.src, instr.src + n), True),), ((dst, True),))
    if isinstance(instr, Router):
        span = (instr.dst_loc, instr.dst, instr.dst + instr.xfer_size)
        if instr.op == RouterOp.SEND:
            return Access((((instr.src_loc, instr.src, instr.src + instr.xfer_size), False),),
                          ())
        return Access((), ((span, False),))
    rows, cols = dims(instr, np.asarray(tokens))
    rows, cols = int(np.max(rows)), int(np.max(cols))

    def on(loc: Loc, address: int, n: int) -> Span:
        return (loc, address, address + n)

    if instr.op.is_matrix:
        weight = (_off_chip(instr.src2_loc, instr.src2, 2 * rows * cols,
                            instr.flags & Flag.LAYER, layer, cfg) if instr.src2_loc.off_chip
                  else on(instr.src2_loc, instr.src2, rows * cols))
        # the tiles come through the DMA weight buffer (§V-B), where a dma load put them
        reads = ((on(instr.src1_loc, instr.src1, rows), False), (weight, True),
                 (on(Loc.WBUF, 0, rows * cols), True))
        if instr.dst_loc == Loc.SRF:  # an argmax only (the LM head's token)
            return Access(reads, ((on(Loc.SRF, instr.dst, 1), False),))
        writes = [(on(instr.dst_loc, instr.dst, cols), True)]
        if Flag.REDUCE_MAX in instr.flags:  # the row max, known after the row (§V-C)
            writes.append((on(Loc.SRF, RMAX_REG, 1), False))
        return Access(reads, tuple(writes))
    if instr.op in (Op.RECIP, Op.RECIP_SQRT):
        reads = [(on(Loc.SRF, instr.src1, 1), False)]
        if Flag.SCALAR in instr.flags:
            reads.append((on(Loc.SRF, instr.src2, 1), False))
        return Access(tuple(reads), ((on(Loc.SRF, instr.dst, 1), False),))
    reads = [(on(instr.src1_loc, instr.src1, cols), True)]
    if instr.op in (Op.ADD, Op.SUB, Op.MUL):
        reads.append((on(Loc.SRF, instr.src2, 1), False) if Flag.SCALAR in instr.flags
                     else (on(instr.src2_loc, instr.src2, cols), True))
    if instr.op == Op.ACCUM:
        return Access(tuple(reads), ((on(Loc.SRF, instr.dst, 1), False),))
    return Access(tuple(reads), ((on(instr.dst_loc, instr.dst, cols), True),))
