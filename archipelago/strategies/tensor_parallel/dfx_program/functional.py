"""Functional simulator: the compiled per-core DFX programs executed on values (issue #23
point 3), the same programs the timing simulator runs.

Each core has its register files and DMA/router buffers as arrays of 16-bit words (the VRF
and SRF of §V-D, the weight and bias buffers of §V-B, the router buffer of §V-E) and its
HBM and DDR as memory.py's arrays, written by the host through the memory map (host.py).
Instructions execute in program order with isa.py's semantics and fp16.py's arithmetic:
the order the scoreboard preserves (§V-A), so the values are the hardware's whatever the
timing. Router sends and receives move the slices of the four syncs per layer around the
ring (§V-E): a core runs until a receive finds nothing from its predecessor, then the next
core runs. The controller (§V-A) runs prologue, the layer section once per decoder layer
and, for generated tokens, the epilogue, token by token; the host reads the generated
tokens from the token buffer when every core is done.

The weight buffer is a stream, not storage: a dma load HBM -> WBUF opens the tile stream at
its (layer-modified) address and the next matrix instruction takes its tiles from it, so
that instruction must name the same HBM address; its own rows, cols and context say which
tiles (isa.py's CONTEXT: a K^T of rows x max_context or a V of max_context x cols, of
which the first t + 1 tokens are read).
"""

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from math import sqrt

import numpy as np

from archipelago.errors import ArchipelagoError
from archipelago.strategies.tensor_parallel.dfx_program import fp16
from archipelago.strategies.tensor_parallel.dfx_program.compile import compile_plan
from archipelago.strategies.tensor_parallel.dfx_program.host import (
    check_weights,
    load_image,
    read_tokens,
)
from archipelago.strategies.tensor_parallel.dfx_program.isa import (
    RMAX_REG,
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
)
from archipelago.strategies.tensor_parallel.dfx_program.layout import VALUE_BYTES, MemoryMap
from archipelago.strategies.tensor_parallel.dfx_program.memory import (
    WORD,
    OffChip,
    as_fp16,
    as_words,
    memories,
    tile_offsets,
)
from archipelago.strategies.tensor_parallel.plan import Plan

F16 = np.float16
# On-chip files holding values; the weight buffer is a stream (module docstring).
ON_CHIP = (Loc.VRF, Loc.SRF, Loc.BBUF, Loc.RBUF)


class SimulationError(ArchipelagoError):
    """A program does something its hardware cannot (a matrix instruction without its tile
    stream, a receive nobody sends, cores that disagree on the tokens)."""


def _extent(instr: Instr, max_context: int) -> list[tuple[Loc, int]]:
    """(location, one past the last element) of each on-chip operand, at most."""
    if isinstance(instr, Compute):
        n = max(instr.rows, instr.cols, max_context if Flag.CONTEXT in instr.flags else 1)
        return [(instr.src1_loc, instr.src1 + n), (instr.src2_loc, instr.src2 + n),
                (instr.dst_loc, instr.dst + n)]
    return [(instr.src_loc, instr.src + instr.xfer_size),
            (instr.dst_loc, instr.dst + instr.xfer_size)]


@dataclass
class Message:
    """A router transfer in flight: where the receiver writes it, and the words."""

    dst: int
    words: np.ndarray


@dataclass
class Core:
    """One core's state: on-chip files, off-chip memories, the open weight streams, the
    router's receive queue, and what the controller is at (layer, token)."""

    program: Program
    memory_map: MemoryMap
    mems: dict[str, OffChip]
    activation: str
    files: dict[Loc, np.ndarray] = field(default_factory=dict)
    streams: deque[tuple[int, int]] = field(default_factory=deque)  # (HBM address, values)
    inbox: deque[Message] = field(default_factory=deque)
    layer: int = 0
    token: int = 0
    sent: int = 0  # values this core's router has sent over its outgoing link
    # what the LM head's MM computed before SFU_M's argmax, and the vector it read
    logits: list[np.ndarray] = field(default_factory=list)
    head_input: list[np.ndarray] = field(default_factory=list)

    def __post_init__(self) -> None:
        cfg = self.program.config
        size = dict.fromkeys(ON_CHIP, 1)
        for section in self.program.sections:
            for instr in section.instrs:
                for loc, top in _extent(instr, cfg.max_context):
                    if loc in size:
                        size[loc] = max(size[loc], top)
        self.files = {loc: np.zeros(n, WORD) for loc, n in size.items()}

    @property
    def d(self) -> int:
        return self.program.config.d

    # --- operands -----------------------------------------------------------------------
    def words(self, loc: Loc, address: int, count: int) -> np.ndarray:
        if loc.off_chip:
            mem = self.mems[loc.name.lower()]
            return mem.read(mem.span(address, count))
        return self.files[loc][address:address + count].copy()

    def put(self, loc: Loc, address: int, words: np.ndarray) -> None:
        if loc.off_chip:
            mem = self.mems[loc.name.lower()]
            mem.write(mem.span(address, len(words)), words)
        else:
            self.files[loc][address:address + len(words)] = words

    def vector(self, loc: Loc, address: int, count: int) -> np.ndarray:
        return as_fp16(self.words(loc, address, count))

    def scalar(self, register: int) -> np.ndarray:
        return as_fp16(self.files[Loc.SRF][register:register + 1])[0]

    def off_chip(self, loc: Loc, address: int, flags: Flag) -> int:
        """The LAYER modifier (§V-A): layer i's region is i strides further."""
        if Flag.LAYER not in flags:
            return address
        cfg = self.program.config
        return address + self.layer * (cfg.layer_stride if loc == Loc.HBM
                                       else cfg.ddr_layer_stride)

    def dim(self, value: int, flags: Flag) -> int:
        return self.token + 1 if value == 0 and Flag.CONTEXT in flags else value

    # --- execution ----------------------------------------------------------------------
    def execute(self, instr: Instr) -> Message | None:
        """Run one instruction; a router send returns the message for the next core."""
        if isinstance(instr, Compute):
            if instr.op.is_matrix:
                self._matrix(instr)
            else:
                self._vector(instr)
            return None
        if isinstance(instr, Dma):
            self._dma(instr)
            return None
        if instr.op == RouterOp.SEND:
            self.sent += instr.xfer_size
            return Message(instr.dst, self.words(instr.src_loc, instr.src, instr.xfer_size))
        message = self.inbox.popleft()
        if message.dst != instr.dst or len(message.words) != instr.xfer_size:
            raise SimulationError(
                f"core {self.program.config.core_id}: router recv of {instr.xfer_size} values "
                f"at {instr.dst:#x}, the predecessor sent {len(message.words)} for "
                f"{message.dst:#x}")
        self.put(instr.dst_loc, instr.dst, message.words)
        return None

    def _weights(self, instr: Compute, rows: int, cols: int) -> np.ndarray:
        """The rows x cols matrix a matrix instruction streams: tiles from the stream the
        dma before it opened (§V-B), read through the tiled layout."""
        if not instr.src2_loc.off_chip:
            raise SimulationError(f"{instr.op.name.lower()} streams its matrix from HBM or "
                                  f"DDR, not {instr.src2_loc.name}")
        address = self.off_chip(instr.src2_loc, instr.src2, instr.flags)
        if not self.streams or self.streams[0][0] != address:
            held = f"{self.streams[0][0]:#x}" if self.streams else "nothing"
            raise SimulationError(f"{instr.op.name.lower()} reads tiles at {address:#x}; the "
                                  f"weight buffer streams {held}")
        _, values = self.streams.popleft()
        if values < rows * cols:
            raise SimulationError(f"{instr.op.name.lower()} needs {rows} x {cols} values; "
                                  f"its dma loaded {values}")
        cfg = self.program.config
        shape = (cfg.max_context if instr.rows == 0 else rows,
                 cfg.max_context if instr.cols == 0 else cols)
        offsets = tile_offsets(self.memory_map.tiling, *shape)[:rows, :cols]
        return as_fp16(self.mems[instr.src2_loc.name.lower()].read(address + offsets))

    def _matrix(self, instr: Compute) -> None:
        rows, cols = self.dim(instr.rows, instr.flags), self.dim(instr.cols, instr.flags)
        x = self.vector(instr.src1_loc, instr.src1, rows)
        w = self._weights(instr, rows, cols)
        bias = self.vector(Loc.BBUF, 0, cols) if instr.op == Op.CONV1D else None
        y = fp16.matvec(x, w, self.d, bias)
        # SFU_M (§V-C): scale by a multiplier, mask, GELU, reduce max
        if Flag.SCALE in instr.flags:
            y = fp16.mul(y, fp16.rnd(1 / sqrt(rows)))
        if instr.op == Op.MASKED_MM:
            y = np.where(np.arange(cols) > self.token, F16(fp16.MASK_VALUE), y)
        if Flag.GELU in instr.flags:
            y = fp16.gelu(y, self.activation)
        if instr.dst_loc == Loc.SRF:  # argmax only (the LM head's token)
            self.logits.append(y.astype(np.float32))
            self.head_input.append(x.astype(np.float32))
            self.files[Loc.SRF][instr.dst] = int(np.argmax(y))
            return
        if Flag.REDUCE_MAX in instr.flags:
            self.files[Loc.SRF][RMAX_REG] = as_words(np.max(y, keepdims=True))[0]
        self.put(instr.dst_loc, instr.dst, as_words(y))

    def _vector(self, instr: Compute) -> None:
        cols = self.dim(instr.cols, instr.flags)
        if instr.op in (Op.LOAD, Op.STORE):  # the VFU bypass: a copy
            self.put(instr.dst_loc, instr.dst, self.words(instr.src1_loc, instr.src1, cols))
            return
        if instr.op in (Op.RECIP, Op.RECIP_SQRT):
            value = self.scalar(instr.src1)
            if Flag.SCALAR in instr.flags:
                value = fp16.add(value, self.scalar(instr.src2))
            f = fp16.recip if instr.op == Op.RECIP else fp16.recip_sqrt
            self.files[Loc.SRF][instr.dst] = as_words(np.atleast_1d(f(value)))[0]
            return
        a = self.vector(instr.src1_loc, instr.src1, cols)
        if instr.op == Op.ACCUM:
            total = fp16.accum(a, self.d, Flag.MEAN in instr.flags)
            self.files[Loc.SRF][instr.dst] = as_words(np.atleast_1d(total))[0]
            return
        if instr.op == Op.EXP:
            y = fp16.exp(a)
        else:
            b = (self.scalar(instr.src2) if Flag.SCALAR in instr.flags
                 else self.vector(instr.src2_loc, instr.src2, cols))
            y = {Op.ADD: fp16.add, Op.SUB: fp16.sub, Op.MUL: fp16.mul}[instr.op](a, b)
        self.put(instr.dst_loc, instr.dst, as_words(y))

    def _dma(self, instr: Dma) -> None:
        n, cfg, flags = instr.xfer_size, self.program.config, instr.flags
        if instr.op == DmaOp.LOAD:
            address = self.off_chip(instr.src_loc, instr.src, flags)
            if instr.dst_loc == Loc.WBUF:  # opens the tile stream (module docstring)
                values = n * (self.token + 1) if Flag.CONTEXT in flags else n
                self.streams.append((address, values))
                return
            if Flag.TOKEN in flags:  # token t's row
                address += self.token * VALUE_BYTES * n
            if Flag.INDEX in flags:  # the row of the token ID in the reduce-max register
                address += int(self.files[Loc.SRF][RMAX_REG]) * VALUE_BYTES * n
            self.put(instr.dst_loc, instr.dst, self.words(instr.src_loc, address, n))
            return
        address = self.off_chip(instr.dst_loc, instr.dst, flags)
        words = self.words(instr.src_loc, instr.src, n)
        if Flag.TOKEN not in flags:
            self.put(instr.dst_loc, address, words)
        elif instr.src_loc == Loc.SRF:  # a token ID: the token buffer's row t
            self.put(instr.dst_loc, address + self.token * VALUE_BYTES * n, words)
        else:  # a KV cache: column t of K^T, or through the transpose unit row t of V
            if Flag.TRANSPOSE in flags:
                offsets = tile_offsets(self.memory_map.tiling, cfg.max_context, n)[self.token]
            else:
                offsets = tile_offsets(self.memory_map.tiling, n, cfg.max_context)[:, self.token]
            self.mems[instr.dst_loc.name.lower()].write(address + offsets, words)


def run_section(cores: list[Core], pick: str) -> None:
    """Every core runs its section `pick`; a core whose receive finds its inbox empty
    yields to the others (the router's RX waits, §V-E)."""
    sections: list[Section] = [getattr(c.program, pick) for c in cores]
    pcs = [0] * len(cores)
    while any(pc < len(s.instrs) for pc, s in zip(pcs, sections, strict=True)):
        moved = False
        for k, core in enumerate(cores):
            instrs = sections[k].instrs
            while pcs[k] < len(instrs):
                instr = instrs[pcs[k]]
                if isinstance(instr, Router) and instr.op == RouterOp.RECV and not core.inbox:
                    break
                message = core.execute(instr)
                if message is not None:
                    cores[(k + 1) % len(cores)].inbox.append(message)
                pcs[k] += 1
                moved = True
        if not moved:
            raise SimulationError(f"{pick}: every core waits on a router recv (deadlock)")


@dataclass
class FunctionalRun:
    """Generated tokens, the values each core's router sent over its link, and what the
    simulator observed on core 0: each decoder layer's output per token pass (positions x
    layers x width), the final LayerNorm's output the LM head read and the LM head's
    values before the argmax (generated tokens x width / vocabulary), as float32."""

    tokens: list[int]
    router_values: list[int]
    hidden: np.ndarray
    head_input: np.ndarray
    logits: np.ndarray


def _layer_output(core: Core) -> np.ndarray:
    """The layer section's result: the destination of its last compute instruction (the
    second residual add)."""
    last = next(i for i in reversed(core.program.layer.instrs) if isinstance(i, Compute))
    return core.vector(last.dst_loc, last.dst, last.cols).astype(np.float32)


def run_functional(plan: Plan, weights: Mapping[str, np.ndarray], prompt_ids: list[int],
                   new_tokens: int) -> FunctionalRun:
    """Greedy generation of `new_tokens` after `prompt_ids` by the DFX programs compiled
    from `plan` (a dfx plan), every core of its ring simulated on values. `weights`: every
    tensor of the model, full size, by canonical name (host.checkpoint_weights,
    host.seeded_weights)."""
    spec = plan.spec
    prompt = [int(t) for t in prompt_ids]
    bad = [t for t in prompt if not 0 <= t < spec.vocab]
    if not prompt or bad:
        raise ArchipelagoError(f"prompt_ids: need at least one token ID in 0..{spec.vocab - 1}"
                               f"{f', not {bad[0]}' if bad else ''}")
    check_weights(spec, weights)
    programs, maps = compile_plan(plan, len(prompt), new_tokens)
    return simulate(plan, programs, maps, weights, prompt)


def simulate(plan: Plan, programs: list[Program], maps: list[MemoryMap],
             weights: Mapping[str, np.ndarray], prompt: list[int]) -> FunctionalRun:
    """The host and the ring running `programs` (compiled for `prompt`'s length): images
    written, the controller loop of §V-A on every core, the generated tokens read back."""
    from archipelago.strategies.tensor_parallel.emulate.numerics import numerics

    spec, config = plan.spec, programs[0].config
    eps = numerics(spec).norm_eps
    cores = []
    for rank, (program, memory_map) in enumerate(zip(programs, maps, strict=True)):
        mems = memories(memory_map)
        load_image(plan, rank, memory_map, mems, weights, eps, prompt)
        cores.append(Core(program, memory_map, mems, spec.activation))
    hidden = []
    for t in programs[0].tokens():
        for core in cores:
            core.token, core.layer = t, 0
        run_section(cores, "prologue")
        layers = []
        for layer in range(config.layers):
            for core in cores:
                core.layer = layer
            run_section(cores, "layer")
            layers.append(_layer_output(cores[0]))
        hidden.append(layers)
        for core in cores:
            core.layer = 0
        if programs[0].runs_epilogue(t):
            run_section(cores, "epilogue")
    generated = [read_tokens(m, c.mems, config.input_tokens, config.output_tokens)
                 for m, c in zip(maps, cores, strict=True)]
    if any(g != generated[0] for g in generated):
        raise SimulationError(f"cores disagree on the generated tokens: {generated}")
    return FunctionalRun(generated[0], [c.sent for c in cores], np.array(hidden),
                         np.array(cores[0].head_input), np.array(cores[0].logits))
