"""Compile a dfx Plan into one Program per core (seeds/001 §IV-C Algorithm 1, §V).

The plan's steps drive the stream: each ComputeStep becomes the instructions Algorithm 1
gives its op, each CommStep a ring all-gather of router send/recv pairs (§V-E: "the
reorder module uses the core ID to organize the data order to be identical in every
core", so every core keeps the whole vector at the same register-file addresses and a
slice travels to the same address on the next core). The layer section is written once
with addresses of layer 0 and the LAYER modifier: the controller repeats it per layer and
per token (§V-A, isa.py's docstring), prompt tokens included (DFX summarizes token by
token, like the analytical engine's `token_serial_prefill`).

Register files: the VRF holds one vector per op output (the whole width, a core's own
columns at their place), the score row of one head, and LayerNorm scratch; the SRF holds
the scalars of LayerNorm and Softmax. Weights and biases reach the MPU through the DMA
buffers (§V-B: "buffered in the DMA and streamed into the processing units").
"""

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from archipelago.errors import PartitionError, elide
from archipelago.models.graph_ops import Op as GraphOp
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
    SystemConfig,
)
from archipelago.strategies.tensor_parallel.dfx_program.layout import MemoryMap, memory_map
from archipelago.strategies.tensor_parallel.engines.dfx import DFXConfig
from archipelago.strategies.tensor_parallel.plan import CommStep, ComputeStep, Plan, Step

# Scalar registers (SRF addresses); RMAX_REG (0) is SFU_M's reduce-max result.
MEAN, VAR, RSTD, SUM, RSUM, EPS = 1, 2, 3, 4, 5, 6
ACTIVATIONS = ("gelu", "gelu_new")  # SFU_M's lookup table holds GELU (§V-C)


@dataclass
class _Stream:
    """Instructions of one section with their listing notes."""

    instrs: list[Instr] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def emit(self, instr: Instr, note: str) -> None:
        self.instrs.append(instr)
        self.notes.append(note)

    def section(self, name: str) -> Section:
        return Section(name, tuple(self.instrs), tuple(self.notes))


class _Core:
    """Compile state of one core: its memory map, register-file allocation and the op whose
    output each VRF vector holds."""

    def __init__(self, plan: Plan, rank: int, config: DFXConfig) -> None:
        self.plan, self.rank, self.spec = plan, rank, plan.spec
        self.map: MemoryMap = memory_map(plan, rank, config)
        self.ops = {op.name: op for op in (*plan.graph.embed, *plan.graph.block,
                                           *plan.graph.output)}
        attn = {op.kind: op for op in plan.graph.block}
        self.query, self.key = attn["attn_score"].inputs
        self.value = attn["attn_context"].inputs[1]
        self.context = attn["attn_context"].name
        self.align = config.d
        self.vrf: dict[str, int] = {}
        self.top = 0
        self.alias = {"block_out": "block_in", plan.graph.block[-1].name: "block_in"}
        for name, width in (("block_in", self.spec.hidden), ("score", self.spec.max_positions),
                            ("ln.x", self.spec.hidden), ("ln.sq", self.spec.hidden),
                            ("ln.gamma", self.spec.hidden), ("ln.beta", self.spec.hidden)):
            self._alloc(name, width)
        self.conv: dict[str, int] = {}  # op -> index of its Conv1D in the layer stream

    def _alloc(self, name: str, width: int) -> int:
        self.vrf[name] = self.top
        self.top += -(-width // self.align) * self.align  # d-wide register-file words
        return self.vrf[name]

    def buf(self, name: str) -> int:
        """VRF address of `name`'s output vector (allocated on first use)."""
        name = self.alias.get(name, name)
        op = self.ops.get(name)
        if op is not None and op.kind == "activation":  # GELU runs in place, in SFU_M
            return self.buf(op.inputs[0])
        if name not in self.vrf:
            width = self.spec.q_dim if op is not None and op.heads else (
                op.fan_out if op is not None else self.spec.hidden)
            self._alloc(name, width)
        return self.vrf[name]

    def columns(self, name: str, rank: int) -> tuple[int, int]:
        """Columns of op `name`'s output that core `rank` computes."""
        op = self.ops[name]
        if op.kind == "activation":
            return self.columns(op.inputs[0], rank)
        if op.kind == "attn_context":
            return self.columns(self.query, rank)
        shard = self.plan.devices[rank].layer_shards[f"{op.weight}.weight"]
        return shard.start, shard.stop

    def hbm(self, region: str, layer_flag: bool = True) -> tuple[int, Flag]:
        r = self.map.regions[region]
        return r.base, Flag.LAYER if r.per_layer and layer_flag else Flag.NONE

    def loc(self, region: str) -> Loc:
        return Loc[self.map.regions[region].memory.upper()]


Handler = Callable[[_Core, _Stream, GraphOp, ComputeStep], None]


def _refusal(core: _Core, why: str) -> PartitionError:
    """A model the DFX instruction set cannot express, named, with what it lacks."""
    return PartitionError(f"{elide(core.spec.name)} cannot be compiled to DFX programs: {why}; "
                          "`archi plan` estimates it")


def _load_vector(core: _Core, out: _Stream, region: str, dst: int, note: str) -> None:
    """A parameter vector: DDR (or HBM) -> DMA bias buffer -> VRF (§IV-C LayerNorm: "The
    parameters are fetched to the register file through the load instruction")."""
    r = core.map.regions[region]
    base, flag = core.hbm(region)
    out.emit(Dma(DmaOp.LOAD, base, 0, r.cols, core.loc(region), Loc.BBUF, flag), note)
    out.emit(Compute(Op.LOAD, 0, 0, dst, cols=r.cols, src1_loc=Loc.BBUF), note)


def _norm(core: _Core, out: _Stream, op: GraphOp, step: ComputeStep) -> None:
    """LayerNorm (§IV-C): mean by accum (SFU_V divides by the width), variance the same way
    over the squared deviations, recip_sqrt(var + eps), then sub, mul, mul gamma, add beta."""
    if core.spec.norm != "layernorm" or not core.spec.norm_affine:
        plain = "" if core.spec.norm_affine else " without scale and bias"
        raise _refusal(core, f"it normalizes with {core.spec.norm}{plain}, and DFX programs "
                             "exist for LayerNorm with scale and bias only (seeds/001 §IV-C)")
    n, x, v = op.fan_out, core.buf(op.inputs[0]), core.vrf
    tag = f"{op.name} (LayerNorm)"
    _load_vector(core, out, f"{op.weight}.weight", v["ln.gamma"], f"{tag}: gamma")
    _load_vector(core, out, f"{op.weight}.bias", v["ln.beta"], f"{tag}: beta")
    s, vec = Loc.SRF, Loc.VRF
    for instr, note in (
        (Compute(Op.ACCUM, x, 0, MEAN, cols=n, dst_loc=s, flags=Flag.MEAN), "mean"),
        (Compute(Op.SUB, x, MEAN, v["ln.x"], cols=n, src2_loc=s, flags=Flag.SCALAR),
         "x - mean"),
        (Compute(Op.MUL, v["ln.x"], v["ln.x"], v["ln.sq"], cols=n), "squared deviation"),
        (Compute(Op.ACCUM, v["ln.sq"], 0, VAR, cols=n, dst_loc=s, flags=Flag.MEAN),
         "variance"),
        (Compute(Op.RECIP_SQRT, VAR, EPS, RSTD, cols=1, src1_loc=s, src2_loc=s, dst_loc=s,
                 flags=Flag.SCALAR), "1 / sqrt(variance + eps)"),
        (Compute(Op.MUL, v["ln.x"], RSTD, v["ln.x"], cols=n, src2_loc=s, flags=Flag.SCALAR),
         "normalize"),
        (Compute(Op.MUL, v["ln.x"], v["ln.gamma"], v["ln.x"], cols=n), "* gamma"),
        (Compute(Op.ADD, v["ln.x"], v["ln.beta"], core.buf(op.name), cols=n, dst_loc=vec),
         "+ beta"),
    ):
        out.emit(instr, f"{tag}: {note}")


def _linear(core: _Core, out: _Stream, op: GraphOp, step: ComputeStep) -> None:
    """Conv1D = Ax + b (§IV-C): bias and weight tiles into the DMA buffers, then one
    instruction the matrix operand collector expands into the tile stream (§V-D). Key and
    Value rows then go to the KV cache, Value through the transpose unit (§V-B)."""
    start, stop = core.columns(op.name, core.rank)
    cols, tag = stop - start, f"{op.name} (Conv1D {op.fan_in}x{stop - start})"
    weights = f"{op.weight}.weight"
    base, flag = core.hbm(weights)
    bias = f"{op.weight}.bias"
    if bias not in core.map.regions:
        raise _refusal(core, f"its projection {op.name} has no bias, and a DFX Conv1D "
                             "computes Ax + b only (seeds/001 §IV-C)")
    b_base, b_flag = core.hbm(bias)
    out.emit(Dma(DmaOp.LOAD, b_base, 0, cols, core.loc(bias), Loc.BBUF, b_flag),
             f"{tag}: bias")
    out.emit(Dma(DmaOp.LOAD, base, 0, op.fan_in * cols, core.loc(weights), Loc.WBUF, flag),
             f"{tag}: weight tiles")
    dst = core.buf(op.name) + start
    core.conv[op.name] = len(out.instrs)
    out.emit(Compute(Op.CONV1D, core.buf(op.inputs[0]), base, dst, rows=op.fan_in, cols=cols,
                     src2_loc=core.loc(weights), flags=flag), tag)
    if op.name in (core.key, core.value):
        _cache_store(core, out, op, dst, cols)


def _cache_store(core: _Core, out: _Stream, op: GraphOp, dst: int, cols: int) -> None:
    hd = core.spec.head_dim
    is_value = op.name == core.value
    what, flags = ("v_cache", Flag.TRANSPOSE) if is_value else ("k_cache", Flag.NONE)
    for h in range(cols // hd):
        base, flag = core.hbm(f"{what}.h{h}")
        out.emit(Dma(DmaOp.STORE, dst + h * hd, base, hd, Loc.VRF, Loc.HBM,
                     flag | flags | Flag.TOKEN),
                 f"{op.name}: head {h} row of token t -> {what}"
                 + (" (transposed on write, §V-B)" if is_value else ""))


def _attention(core: _Core, out: _Stream, op: GraphOp, step: ComputeStep) -> None:
    """Algorithm 1 lines 7-12, per local head: MaskedMM with ReduMax, Softmax as vector
    instructions, MM against Value; the context length comes from the controller."""
    spec, hd = core.spec, core.spec.head_dim
    if op.window is not None:
        raise _refusal(core, f"{op.name} attends over a sliding window, and DFX attention "
                             "masks only the future tokens (seeds/001 §IV-C)")
    q_start, q_stop = core.columns(core.query, core.rank)
    k_start = core.columns(core.key, core.rank)[0]
    score, s = core.vrf["score"], Loc.SRF
    ctx = Flag.CONTEXT
    for h in range(q_start // hd, q_stop // hd):
        kv = h * spec.kv_heads // spec.heads - k_start // hd  # this core's cache of it
        tag = f"head {h}"
        k_base, k_flag = core.hbm(f"k_cache.h{kv}")
        v_base, v_flag = core.hbm(f"v_cache.h{kv}")
        q = core.buf(core.query) + h * hd
        for instr, note in (
            (Dma(DmaOp.LOAD, k_base, 0, hd, Loc.HBM, Loc.WBUF, k_flag | ctx), "K^T tiles"),
            (Compute(Op.MASKED_MM, q, k_base, score, rows=hd, cols=0, src2_loc=Loc.HBM,
                     flags=k_flag | ctx | Flag.SCALE | Flag.REDUCE_MAX),
             "MaskedMM q x K^T, ReduMax"),
            (Compute(Op.SUB, score, RMAX_REG, score, src2_loc=s, flags=ctx | Flag.SCALAR),
             "softmax: - max"),
            (Compute(Op.EXP, score, 0, score, flags=ctx), "softmax: exp"),
            (Compute(Op.ACCUM, score, 0, SUM, dst_loc=s, flags=ctx), "softmax: sum"),
            (Compute(Op.RECIP, SUM, 0, RSUM, cols=1, src1_loc=s, dst_loc=s),
             "softmax: 1 / sum"),
            (Compute(Op.MUL, score, RSUM, score, src2_loc=s, flags=ctx | Flag.SCALAR),
             "softmax: * 1 / sum"),
            (Dma(DmaOp.LOAD, v_base, 0, hd, Loc.HBM, Loc.WBUF, v_flag | ctx), "V tiles"),
            (Compute(Op.MM, score, v_base, core.buf(core.context) + h * hd, rows=0, cols=hd,
                     src2_loc=Loc.HBM, flags=v_flag | ctx),
             "MM score x V"),
        ):
            out.emit(instr, f"{tag}: {note}")


def _in_head_loop(core: _Core, out: _Stream, op: GraphOp, step: ComputeStep) -> None:
    """Softmax and Score x Value run inside `_attention`'s head loop (Algorithm 1)."""


def _activation(core: _Core, out: _Stream, op: GraphOp, step: ComputeStep) -> None:
    """GELU(Conv1D(...)) (Algorithm 1 line 21): SFU_M applies it to the Conv1D's output."""
    if core.spec.activation not in ACTIVATIONS:
        raise _refusal(core, f"it uses activation '{core.spec.activation}', and a DFX core "
                             f"computes {', '.join(ACTIVATIONS)} only (seeds/001 §V-C)")
    at = core.conv[op.inputs[0]]
    instr = out.instrs[at]
    assert isinstance(instr, Compute)
    out.instrs[at] = replace(instr, flags=instr.flags | Flag.GELU)
    out.notes[at] += " + GELU"


def _residual(core: _Core, out: _Stream, op: GraphOp, step: ComputeStep) -> None:
    a, b = (core.buf(name) for name in op.inputs)
    out.emit(Compute(Op.ADD, a, b, core.buf(op.name), cols=op.fan_out),
             f"{op.name} (residual)")


def _embedding(core: _Core, out: _Stream, op: GraphOp, step: ComputeStep) -> None:
    """Token ID t from the DDR token buffer, its WTE row (indexed by the ID) and the WPE row
    of position t into the DMA buffer, loaded and added into the residual stream (§IV-B)."""
    n = op.fan_out
    wte, wpe = f"{op.weight}.weight", "embed_positions.weight"
    tmp, rows = core.vrf["ln.x"], core.vrf["ln.sq"]
    for instr, note in (
        (Dma(DmaOp.LOAD, core.map.regions["consts"].base, EPS, 1, core.loc("consts"),
             Loc.SRF), "LayerNorm eps -> SRF"),
        (Dma(DmaOp.LOAD, core.map.regions["tokens"].base, 0, 1, core.loc("tokens"), Loc.SRF,
             Flag.TOKEN), "token ID t -> SRF[rmax]"),
        (Dma(DmaOp.LOAD, core.map.regions[wte].base, 0, n, core.loc(wte), Loc.BBUF,
             Flag.INDEX), "WTE row of the token"),
        (Dma(DmaOp.LOAD, core.map.regions[wpe].base, n, n, core.loc(wpe), Loc.BBUF,
             Flag.TOKEN), "WPE row of position t"),
        (Compute(Op.LOAD, 0, 0, tmp, cols=n, src1_loc=Loc.BBUF), "load WTE row"),
        (Compute(Op.LOAD, n, 0, rows, cols=n, src1_loc=Loc.BBUF), "load WPE row"),
        (Compute(Op.ADD, tmp, rows, core.buf("block_in"), cols=n), "token + position"),
    ):
        out.emit(instr, f"{op.name}: {note}")


def _lm_head(core: _Core, out: _Stream, op: GraphOp, step: ComputeStep) -> None:
    """MM against the whole vocabulary with SFU_M's argmax (§IV-C MM, §V-C reduce max);
    the token goes to the DDR token buffer at t + 1, where the next prologue reads it."""
    base, _ = core.hbm("lm_head")
    tokens = core.map.regions["tokens"].base + 2
    tag = f"{op.name} (MM {op.fan_in}x{op.fan_out}, argmax)"
    out.emit(Dma(DmaOp.LOAD, base, 0, op.fan_in * op.fan_out, Loc.HBM, Loc.WBUF),
             f"{tag}: weight tiles")
    out.emit(Compute(Op.MM, core.buf(op.inputs[0]), base, RMAX_REG, rows=op.fan_in,
                     cols=op.fan_out, src2_loc=Loc.HBM, dst_loc=Loc.SRF,
                     flags=Flag.REDUCE_MAX), tag)
    out.emit(Dma(DmaOp.STORE, RMAX_REG, tokens, 1, Loc.SRF, core.loc("tokens"), Flag.TOKEN),
             f"{op.name}: token t + 1 -> DDR")


HANDLERS: dict[str, Handler] = {
    "norm": _norm, "linear": _linear, "attn_score": _attention, "softmax": _in_head_loop,
    "attn_context": _in_head_loop, "activation": _activation, "residual": _residual,
    "embedding": _embedding, "lm_head": _lm_head,
}


def _sync(core: _Core, out: _Stream, step: CommStep) -> None:
    """Ring all-gather (§V-E, Fig. 11): in hop s each core forwards the slice of core
    id - s + 1 to the next core and receives core id - s's slice from the previous one."""
    n = core.plan.ranks
    if n == 1:
        return
    if step.kind != "all_gather":
        raise _refusal(core, f"its plan needs a {step.kind}, and the DFX router only "
                             "all-gathers (seeds/001 §V-E)")
    base = core.buf(step.tensor)
    for s in range(1, n):
        for op, owner in ((RouterOp.SEND, (core.rank - s + 1) % n),
                          (RouterOp.RECV, (core.rank - s) % n)):
            start, stop = core.columns(step.tensor, owner)
            out.emit(Router(op, base + start, base + start, stop - start),
                     f"sync {step.tensor}: hop {s} {op.name.lower()} core {owner}'s slice")


def _section(core: _Core, name: str, steps: list[Step]) -> Section:
    out = _Stream()
    for step in steps:
        if isinstance(step, CommStep):
            _sync(core, out, step)
            continue
        handler = HANDLERS.get(step.op.kind)
        if handler is None:
            raise _refusal(core, f"its op {step.op.name} is a {step.op.kind}, and DFX "
                                 f"programs cover {', '.join(sorted(HANDLERS))} (seeds/001 "
                                 "§IV-C)")
        handler(core, out, step.op, step)
    return out.section(name)


def _program(core: _Core, config: DFXConfig, input_tokens: int, output_tokens: int
             ) -> Program:
    plan = core.plan
    layer = _section(core, "layer", plan.block_steps)
    prologue = _section(core, "prologue", plan.embed_steps)
    epilogue = _section(core, "epilogue", plan.output_steps)
    system = SystemConfig(core.rank, plan.ranks, plan.spec.layers, input_tokens,
                          output_tokens, config.d, config.l, core.map.strides["hbm"],
                          core.map.strides["ddr"], plan.spec.max_positions)
    return Program(system, prologue, layer, epilogue)


def compile_plan(plan: Plan, input_tokens: int, output_tokens: int
                 ) -> tuple[list[Program], list[MemoryMap]]:
    """Every core's program, for a generation of `input_tokens` then `output_tokens`, and
    its memory map."""
    if input_tokens < 1 or output_tokens < 1:
        raise PartitionError(f"a DFX program needs at least one input and one output token, "
                             f"not {input_tokens}:{output_tokens}")
    if input_tokens + output_tokens > plan.spec.max_positions:
        raise PartitionError(f"{input_tokens}:{output_tokens} tokens exceed {plan.spec.name}'s "
                             f"{plan.spec.max_positions} positions (the KV cache and WPE)")
    if plan.other_blocks or plan.decode_steps is not None:
        raise PartitionError(f"no DFX program for {plan.spec.name}: its layers run more than "
                             "one block (dense and MoE, or latent attention's prompt and "
                             "decode forms), and a DFX program loops one layer section")
    config = plan.engine.config  # type: ignore[attr-defined]
    cores = [_Core(plan, rank, config) for rank in range(plan.ranks)]
    return ([_program(c, config, input_tokens, output_tokens) for c in cores],
            [c.map for c in cores])
