"""Timing simulator: a ring of DFX cores running their programs (seeds/001 §IV-C, §V).

Scheduler (§V-A): one FSM per instruction type (compute, dma, router) issues its type's
instructions in program order, one a cycle; the three types run in parallel (§IV-C: "compute
processes data, dma fetches data, and router fill the buffer ... simultaneously"). An
instruction also waits for its pipeline (the MPU, one VFU operator, SFU_V, the bypass, the
HBM or DDR interface, the router's TX or RX path) to have taken the previous one's last
input: pipelines overlap successive instructions.

Scoreboard (§V-A): an instruction whose source or destination range overlaps the
destination of an instruction still running (its `stale` bits) waits until that one writes
back (`valid`), except where chaining lets it go earlier.

Chaining (§IV-C "sequences of dependent instructions operate with minimal stalling", [35]):
a consumer that reads an operand as an in-order stream starts as soon as the producer's
first result is written, and takes its last input no earlier than the producer's last
result: VFU element-wise instructions, load/store, accum (each reads its vector operands a
d-chunk a cycle) and a matrix instruction's weight operand (tiles "streamed into the
processing units", §V-B). It does not chain on: a matrix instruction's input vector (the
zigzag revisits it for every block column: "the preloaded input", §V-B), a scalar register
(written once, at the end), a router send (the router fetches the whole "output vector",
§V-E), or anything a router receive writes (its reorder module places sub-vectors by core
ID, not in order, §V-E). A producer streams its results if it writes a vector in element
order: VFU instructions, dma loads, and matrix instructions' output rows (column blocks come
out in order); a reduction (accum, reduce max, argmax, recip) writes only at its end.

DMA (§V-B): a matrix instruction's tiles come through the weight buffer, streamed there by
the dma load before it (the compiler emits one per matrix instruction; without one, the
instruction pulls them itself). The load holds the HBM interface, which every dma shares,
until the MFU has taken all but the DMA FIFOs' worth of tiles (units.DMA_FIFO_DEPTH); its
end in the timeline is when its last tile would arrive with the FIFOs never full, the
interface staying held past it while they are. Router (§V-E): a send
occupies the core's TX path for one store-and-forward hop (engines/router.py); the next core's
matching receive writes back when that hop ends. A sync's first send (one of data this core
computed, not a forward of a slice a receive wrote) is preceded by the router's per-sync cost
(`UnitModel.sync_overhead_s`, the analytical engine's DFX_SYNC_OVERHEAD_S): compute waits
for the whole gathered vector (§V-A scoreboard), so it is on the critical path once a sync,
as the paper's four-board point and seeds/002 §II-C's ~17% sync share for DFX say it is
(docs/strategies/dfx-simulator.md, "The referee").

The controller runs the program once per token (§V-A); a token's pass starts when the
previous one has finished on every core (the next token's embedding needs the argmax, and
the controller runs prompt tokens the same way). Passes differ only in the context length,
so all tokens run together as numpy arrays: the scoreboard decisions depend on addresses,
which are the same for every token (off-chip ranges that move with the token, the KV cache,
are taken whole), and only the times differ. No Python loop per cycle or per token.
"""

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from archipelago.strategies.tensor_parallel.dfx_program.access import Access, Span, access, dims
from archipelago.strategies.tensor_parallel.dfx_program.asm import format_instr
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
from archipelago.strategies.tensor_parallel.dfx_program.units import (
    DMA_FIFO_DEPTH,
    Cost,
    UnitModel,
)


def instr_class(instr: Instr) -> str:
    """The class an instruction's cycles are reported under: its opcode."""
    prefix = "" if isinstance(instr, Compute) else type(instr).__name__.lower() + "."
    return prefix + instr.op.name.lower()


@dataclass
class _Write:
    span: Span
    first: np.ndarray  # first result written (= end unless streamed)
    end: np.ndarray  # writeback
    received: bool = False  # written by a router receive (a peer's slice)


@dataclass
class _Core:
    """One core's FSMs, units and scoreboard; every time is an array over tokens."""

    zero: np.ndarray
    issue: dict[str, np.ndarray] = field(default_factory=dict)  # per FSM: last issue
    free: dict[str, np.ndarray] = field(default_factory=dict)  # per unit/port: free at
    live: dict[Loc, list[_Write]] = field(default_factory=dict)
    sent: list[np.ndarray] = field(default_factory=list)  # sends' hop ends, oldest first

    def at(self, key: str, table: dict[str, np.ndarray]) -> np.ndarray:
        return table.get(key, self.zero)

    def hazards(self, span: Span) -> Iterator[_Write]:
        loc, lo, hi = span
        for w in self.live.get(loc, ()):
            if w.span[1] < hi and lo < w.span[2]:
                yield w

    def write(self, span: Span, first: np.ndarray, end: np.ndarray,
              received: bool = False) -> None:
        """Mark `span` stale until `end`; writes it covers whole are superseded (a later
        reader depends on this one, which waited for them)."""
        loc, lo, hi = span
        kept = [w for w in self.live.get(loc, ()) if not (lo <= w.span[1] and w.span[2] <= hi)]
        kept.append(_Write(span, first, end, received))
        self.live[loc] = kept


@dataclass
class Record:
    """One executed instruction on every core: each core's own (same opcode and shape, its
    own addresses: its columns, its shards), times over (cores, tokens)."""

    section: str
    layer: int
    index: int
    instrs: tuple[Instr, ...]
    note: str
    start: np.ndarray
    end: np.ndarray

    @property
    def instr(self) -> Instr:
        """Core 0's: what every core's has in common (type, opcode, class)."""
        return self.instrs[0]


@dataclass
class SimResult:
    """Per-token latency (all cores done) and where the cycles went."""

    clock_hz: float
    token_cycles: np.ndarray  # (tokens,)
    class_cycles: dict[str, np.ndarray]  # own cycles (stream + latency) per class, per token
    group_cycles: dict[str, np.ndarray]  # critical-path cycles per op group, per token
    layer_cycles: np.ndarray  # (layers, tokens): core 0's end of each layer less the last
    timeline: list[Record]  # one decoder layer (the first) of every core

    @property
    def latency_s(self) -> float:
        return float(self.token_cycles.sum() / self.clock_hz)

    def as_json(self, token: int = -1) -> dict[str, Any]:
        """Totals over the run; per-layer times and the first decoder layer's timeline (every
        core, cycles from the pass's start) at token pass `token` (default the last)."""
        hz = self.clock_hz
        return {
            "latency_s": self.latency_s,
            "token_s": (self.token_cycles / hz).tolist(),
            "cycles_per_class": {c: float(v.sum()) for c, v in self.class_cycles.items()},
            "seconds_per_group": {g: float(v.sum() / hz) for g, v in self.group_cycles.items()},
            "layer_s": (self.layer_cycles[:, token] / hz).tolist(),
            "timeline": [{"core": c, "index": r.index, "instr": format_instr(r.instrs[c]),
                          "note": r.note, "start": float(r.start[c, token]),
                          "end": float(r.end[c, token])}
                         for r in self.timeline for c in range(r.start.shape[0])],
        }


def group_of(note: str) -> str:
    """The op group an instruction is reported under: what its note names before ':' and
    any ' (...)' (the compiler's notes read 'attn_norm (LayerNorm): mean', 'head 3: ...',
    'sync ffn_act: hop 1 ...')."""
    return note.split(":", 1)[0].split(" (", 1)[0].strip()


class Simulator:
    """Run one program per core of a ring together (§V-A scheduler, §V-E ring)."""

    def __init__(self, units: UnitModel) -> None:
        self.units = units
        self._costs: dict[Instr, Cost] = {}
        self._access: dict[tuple[Instr, int], Access] = {}

    def run(self, programs: list[Program], tokens: np.ndarray | None = None,
            timeline_layer: int = 0) -> SimResult:
        """Simulate every token position of `tokens` (default: all the controller runs)."""
        cfg = programs[0].config
        shapes = {tuple(len(s.instrs) for s in p.sections) for p in programs}
        if len(shapes) > 1:
            raise ValueError(f"the ring's programs differ in length ({sorted(shapes)}): the "
                             "simulator advances the cores instruction by instruction")
        positions = np.asarray(list(programs[0].tokens()) if tokens is None else tokens)
        context = positions + 1
        zero = np.zeros(positions.shape)
        runs = {id(programs[0].epilogue): np.array(
            [programs[0].runs_epilogue(int(t)) for t in positions], dtype=float)}
        cores = [_Core(zero) for _ in programs]
        end_all = np.zeros((len(programs), *positions.shape))
        classes: dict[str, np.ndarray] = {}
        groups: dict[str, np.ndarray] = {}
        layer_ends, timeline = [], []
        critical = zero
        self._costs, self._access = {}, {}
        order = [(-1, [p.prologue for p in programs])]
        order += [(i, [p.layer for p in programs]) for i in range(cfg.layers)]
        order.append((-1, [p.epilogue for p in programs]))
        for layer, secs in order:
            mask = runs.get(id(secs[0]), 1.0)
            for k, instr in enumerate(secs[0].instrs):
                start, end = np.empty_like(end_all), np.empty_like(end_all)
                for c, (core, sec) in enumerate(zip(cores, secs, strict=True)):
                    start[c], end[c] = self._step(core, cores[c - 1], sec.instrs[k], layer,
                                                  cfg, context)
                # a prompt token's pass skips the epilogue: its times count where it runs
                end_all = np.maximum(end_all, np.where(mask > 0, end, end_all))
                note = _note(secs[0], k)
                cls = instr_class(instr)
                own = self._cost(instr, context)
                classes[cls] = classes.get(cls, zero) + mask * (own.stream + own.latency)
                group = group_of(note) or cls
                now = end_all.max(axis=0)
                groups[group] = groups.get(group, zero) + now - critical
                critical = now
                if layer == timeline_layer and secs[0] is programs[0].layer:
                    timeline.append(Record(secs[0].name, layer, k,
                                           tuple(sec.instrs[k] for sec in secs), note, start,
                                           end))
            if secs[0] is not programs[0].epilogue:  # the prologue's end, then each layer's
                layer_ends.append(end_all[0])
        return SimResult(self.units.config.clock_hz, critical, classes, groups,
                         np.diff(np.array(layer_ends), axis=0), timeline)

    def _cost(self, instr: Instr, context: np.ndarray) -> Cost:
        key = instr
        if key not in self._costs:
            if isinstance(instr, Compute):
                rows, cols = dims(instr, context)
                self._costs[key] = self.units.compute(instr, rows, cols)
            elif isinstance(instr, Dma):
                scale = context if Flag.CONTEXT in instr.flags else 1
                self._costs[key] = self.units.dma(instr, instr.xfer_size * scale)
            else:
                hop = self.units.hop_cycles(instr.xfer_size)
                self._costs[key] = Cost(np.full(context.shape, hop), 0.0, None)
        return self._costs[key]

    def _access_of(self, instr: Instr, layer: int, cfg: SystemConfig) -> Access:
        key = (instr, layer)
        if key not in self._access:
            self._access[key] = access(instr, layer, cfg)
        return self._access[key]

    def _step(self, core: _Core, left: _Core, instr: Instr, layer: int, cfg: SystemConfig,
              context: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Schedule one instruction on one core: (start, writeback) over tokens."""
        cost = self._cost(instr, context)
        acc = self._access_of(instr, layer, cfg)
        fsm, unit = type(instr).__name__.lower(), _unit(instr)
        # in program order per type, one issue a cycle; then the unit must take inputs
        start = np.maximum(core.issue.get(fsm, core.zero - 1) + 1, core.at(unit, core.free))
        # a matrix instruction's tiles: a dma load's stream into the weight buffer, or (none
        # loaded) its own pull through the off-chip interface
        weights = _weights(instr)
        loaded = weights is not None and any(core.hazards((Loc.WBUF, 0, 1)))
        if weights is not None and not loaded:
            start = np.maximum(start, core.at(weights, core.free))
        floor = core.zero  # last input no earlier than a chained producer's last result
        forwards = False  # a send of a slice a receive wrote: a later hop of a sync
        for span, chained in acc.reads:
            for w in core.hazards(span):
                forwards = forwards or w.received
                if chained:
                    start = np.maximum(start, w.first)
                    floor = np.maximum(floor, w.end)
                else:
                    start = np.maximum(start, w.end)
        for span, _ in acc.writes:
            for w in core.hazards(span):
                start = np.maximum(start, w.end)
        last_in = np.maximum(start + cost.stream, floor)
        end = last_in + cost.latency
        if isinstance(instr, Router):
            if instr.op == RouterOp.SEND:
                setup = 0.0 if forwards else self.units.sync_setup_cycles
                end = start + setup + cost.stream
                core.sent.append(end)
            else:
                end = np.maximum(start, left.sent.pop(0))
        core.issue[fsm] = start
        core.free[unit] = end if isinstance(instr, Router) else last_in
        if weights is not None:
            # the interface is held until the MFU has taken all but the FIFOs' worth of tiles
            per_tile = cost.stream / np.maximum(cost.tiles, 1)
            behind = np.maximum(cost.tiles - DMA_FIFO_DEPTH, 0) * per_tile
            held = np.maximum(core.at(weights, core.free), start + behind)
            if not loaded:
                held = np.maximum(held, start + np.ceil(cost.tiles) * self.units.feed)
            core.free[weights] = held
            core.live[Loc.WBUF] = []  # the stream is consumed
        received = isinstance(instr, Router) and instr.op == RouterOp.RECV
        for span, streamed in acc.writes:
            first = start + cost.first if streamed and cost.first is not None else end
            core.write(span, np.minimum(first, end), end, received)
        return start, end


def _unit(instr: Instr) -> str:
    """The pipeline an instruction occupies: the MPU; one of the VFU's operators (§V-C: add,
    sub, mul and exp each have their own DSPs per lane, so a chained mul -> add runs in
    both at once); SFU_V (accum and the scalar functions); the bypass (load/store)."""
    if isinstance(instr, Compute):
        if instr.op.is_matrix:
            return "mpu"
        if instr.op in (Op.ACCUM, Op.RECIP, Op.RECIP_SQRT):
            return "sfu_v"
        if instr.op in (Op.LOAD, Op.STORE):
            return "bypass"
        return "vfu_" + instr.op.name.lower()
    if isinstance(instr, Router):
        return "router_" + instr.op.name.lower()  # TX and RX buffers (§V-E)
    off_chip = instr.dst_loc if instr.op == DmaOp.STORE else instr.src_loc
    return off_chip.name.lower()  # the HBM interface or the DDR channel (§V-B)


def _weights(instr: Instr) -> str | None:
    """The off-chip interface a matrix instruction's tiles come through, if any."""
    if isinstance(instr, Compute) and instr.op.is_matrix and instr.src2_loc.off_chip:
        return instr.src2_loc.name.lower()
    return None


def _note(section: Section, k: int) -> str:
    return section.notes[k] if section.notes else ""
