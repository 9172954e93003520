"""Costs of a ring program (plan.Plan) running a share of the model: its layers, with or
without the embedding and the output ops. The one estimator (estimate.py) walks a staged
plan's stages through these; the planner (planner.py) asks them when it chooses a split.

A batch of B sequences runs in lockstep: every step of a prefill or decode carries B
sequences' rows (`ComputeStep.sequences`), each sequence attending to its own KV cache,
every collective B times the rows. An engine that runs one sequence at a time
(`StepEngine.one_sequence`) runs them in turn: each phase B times one sequence's.

An engine built over many variants of its parameters at once (variants.py) gives every
step's seconds a leading axis over them; `generation_seconds` keeps that axis.
"""

from dataclasses import dataclass, field, replace
from functools import lru_cache

import numpy as np

from archipelago.engines.base import add_resources
from archipelago.estimate.workload import Generation
from archipelago.hardware.cluster import Cluster
from archipelago.hardware.device import Resources
from archipelago.models.graph_ops import Phase
from archipelago.models.weights import embedding_weights, output_weights
from archipelago.strategies.tensor_parallel.engines.overlap import exposed_seconds
from archipelago.strategies.tensor_parallel.plan import (
    CommStep,
    ComputeStep,
    DevicePlan,
    MemoryKind,
    Plan,
    Step,
    StepEngine,
)

# Where each op's time is reported (the DFX paper's Fig. 15 breakdown categories).
_CATEGORY = {
    "embedding": "embedding", "lm_head": "lm_head", "norm": "layernorm_residual",
    "residual": "layernorm_residual", "attn_score": "attention", "softmax": "attention",
    "attn_context": "attention", "activation": "ffn", "gated_activation": "ffn",
}
_ATTENTION_LINEARS = frozenset({"q", "k", "v", "attn_out", "q_a", "q_b", "kv_a", "kv_b",
                                "q_latent", "v_up"})
CATEGORIES = ("embedding", "attention", "ffn", "layernorm_residual", "sync", "lm_head")
FP16_BYTES = 2.0


@dataclass(frozen=True)
class Share:
    """The part of the model a stage runs: `layers` blocks from layer `start`, the
    embedding if `first`, the final norm and LM head if `last`."""

    layers: int
    first: bool = True
    last: bool = True
    start: int = 0

    def blocks(self, plan: Plan) -> list[tuple[int | None, int]]:
        """Each kind of layer in it and how many (`Plan.block_counts`)."""
        return plan.block_counts(self.start, self.layers)


def whole(plan: Plan) -> Share:
    return Share(plan.spec.layers)


def step_category(step: Step) -> str:
    if isinstance(step, CommStep):
        return "sync"
    op = step.op
    if op.kind == "linear":
        return "attention" if op.name in _ATTENTION_LINEARS else "ffn"
    return _CATEGORY[op.kind]


@dataclass
class DeviceUse:
    rank: int
    device: str
    units: dict[str, Resources]
    hbm_bytes: float
    ddr_bytes: float

    @property
    def total(self) -> Resources:
        return _summed(tuple(self.units.values()))


@lru_cache(maxsize=64)
def _summed(units: tuple[Resources, ...]) -> Resources:
    """A core's units added up once: every board of a ring builds the same core, and the
    fabric check and the walk of an estimate's figures ask each board's."""
    return add_resources(*units)


def batched(steps: list[Step], sequences: int) -> list[Step]:
    """The steps with `sequences` sequences' rows in every compute step."""
    if sequences == 1:
        return steps
    return [replace(s, sequences=sequences) if isinstance(s, ComputeStep) else s
            for s in steps]


def steps_seconds(plan: Plan, steps: list[Step], phase: Phase,
                  sequences: int = 1) -> list[np.ndarray]:
    """Seconds of each step on the critical path, `sequences` running together: compute
    from the engine, collectives (of every sequence's rows) from what their overlap mode
    leaves exposed."""
    steps = batched(steps, sequences)
    zeros = np.zeros(phase.context.shape)
    compute = [plan.engine.seconds(s, phase) if isinstance(s, ComputeStep) else zeros
               for s in steps]
    rows = phase.new_tokens * sequences
    return [exposed_seconds(plan, steps, i, rows, compute)
            if isinstance(s, CommStep) else compute[i] for i, s in enumerate(steps)]


Part = tuple[list[Step], Phase, int]


class PartTimes:
    """Each step's seconds of a ring program's parts (embedding, block, output ops) in each
    phase, computed once and kept: a split's stages run the same steps on rings alike, so
    the planner's candidate (costing the parts to choose the split) and the estimator
    (costing each stage's share) read the same arrays, added in the same order, to the same
    figures; the plan keeps its candidate's. The key is what a step's seconds depend on
    beyond the steps and the engine (both held, so their ids stay theirs): the phase of the
    workload, the sequences together, the ring's size and link."""

    MAX_KEPT = 64  # a plan estimated for many workloads starts over past this

    def __init__(self) -> None:
        self._kept: dict[tuple, tuple[StepEngine, list[Step], list[np.ndarray]]] = {}
        self._rings: dict[int, tuple[Cluster, tuple]] = {}  # each stage's ring, asked once

    def steps_seconds(self, plan: Plan, steps: list[Step], phase: Phase,
                      sequences: int) -> list[np.ndarray]:
        """`steps_seconds(plan, steps, phase, sequences)`, computed once."""
        context = np.asarray(phase.context)
        key = (id(plan.engine), id(steps), phase.new_tokens, context.dtype.str,
               context.shape, context.tobytes(), sequences, plan.ranks, *self._ring(plan))
        kept = self._kept.get(key)
        if kept is None:
            if len(self._kept) >= self.MAX_KEPT:
                self._kept.clear()
                self._rings.clear()
            kept = (plan.engine, steps, steps_seconds(plan, steps, phase, sequences))
            self._kept[key] = kept
        return kept[2]

    def _ring(self, plan: Plan) -> tuple:
        """What the collectives' seconds read of the plan's ring: its size and link."""
        ring = plan.cluster
        known = self._rings.get(id(ring))
        if known is None or known[0] is not ring:
            known = (ring, (ring.size, ring.link(0, 1) if ring.size > 1 else None))
            self._rings[id(ring)] = known
        return known[1]


@dataclass
class Costed:
    """What the planner costed choosing a split, kept with the plan for its estimator:
    every step's seconds (`times`) and, for the workload and the stages (`split_choice.
    stages_key`) it chose, each stage's boards' use and why they do not fit (none: they
    fit)."""

    times: PartTimes = field(default_factory=PartTimes)
    workload: Generation | None = None
    stages: tuple[tuple, ...] = ()
    uses: list[list[DeviceUse]] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)


def seconds_by_category(plan: Plan, parts: list[Part], shape: tuple[int, ...],
                        sequences: int = 1, start: dict[str, np.ndarray] | None = None,
                        times: PartTimes | None = None) -> dict[str, np.ndarray]:
    """Seconds by category of each (steps, phase, repeat) part, summed (onto `start`; over
    the engine's variants too, where it has them); each part's steps read from `times`
    where given."""
    seconds_of = steps_seconds if times is None else times.steps_seconds
    out = {c: np.zeros(shape) if start is None else start[c] for c in CATEGORIES}
    for steps, phase, repeat in parts:
        for step, seconds in zip(steps, seconds_of(plan, steps, phase, sequences),
                                 strict=True):
            category = step_category(step)
            out[category] = out[category] + repeat * seconds
    return out


def phase_seconds(plan: Plan, rows: int, context: np.ndarray, share: Share,
                  output: bool = True, sequences: int = 1, times: PartTimes | None = None
                  ) -> dict[str, np.ndarray]:
    """Seconds by category for `rows` new tokens of each of `sequences` at each context
    length over `share` of the model: the embedding for all rows, the block once per layer,
    then (if `output`) the output ops on each sequence's last row. One new token of a
    sliding-window model (plans have it in every layer or refuse it) attends to the last
    `window` keys only; a prompt pass still attends in full. One new token runs the
    plan's one-token block (`Plan.layer_steps`: latent attention absorbed)."""
    phase, window = Phase(rows, context), plan.spec.sliding_window
    block = phase if rows > 1 or window is None else Phase(1, np.minimum(context, window))
    parts: list[Part] = [(plan.embed_steps, phase, 1)] if share.first else []
    parts += [(plan.layer_steps(rows, layer), block, count)
              for layer, count in share.blocks(plan)]
    if output and share.last:
        parts.append((plan.output_steps, Phase(1, context), 1))
    return seconds_by_category(plan, parts, context.shape, sequences, times=times)


def _prompt_and_decode(plan: Plan, n_in: int, n_out: int, share: Share, sequences: int = 1,
                       times: PartTimes | None = None
                       ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Seconds by category of the prompts, and of each further token (decode step i feeds
    token n_in + i - 1; last axis), an engine over variants putting them on a leading axis.
    The prompts run as one matrix pass, or (engines whose controller runs the model once per
    token, like DFX) as n_in single-token passes at growing context, with the output ops
    only after the last one: those passes are decode steps at contexts 1..n_in without the
    output ops, so one numpy pass costs them and the decode steps together (every cost is
    elementwise in the context), split after."""
    last, contexts = np.array([n_in]), n_in + np.arange(1, n_out)
    if not plan.engine.token_serial_prefill:
        prompt = phase_seconds(plan, n_in, last, share, sequences=sequences, times=times)
        return ({c: v[..., 0] for c, v in prompt.items()},
                phase_seconds(plan, 1, contexts, share, sequences=sequences, times=times))
    passes = phase_seconds(plan, 1, np.arange(1, n_in + n_out), share, False, sequences,
                           times)
    output = [(plan.output_steps, Phase(1, last), 1)] if share.last else []
    head = seconds_by_category(plan, output, last.shape, sequences, times=times)
    output = [(plan.output_steps, Phase(1, contexts), 1)] if share.last else []
    decode = seconds_by_category(plan, output, contexts.shape, sequences,
                                 start={c: v[..., n_in:] for c, v in passes.items()},
                                 times=times)
    return ({c: passes[c][..., :n_in].sum(axis=-1) + head[c][..., 0] for c in CATEGORIES},
            decode)


def sequence_turns(plan: Plan, workload: Generation) -> tuple[int, int]:
    """(sequences per pass, passes) of a batch: all together, or one after another on an
    engine that runs one sequence at a time."""
    batch = workload.batch
    return (1, batch) if batch > 1 and plan.engine.one_sequence else (batch, 1)


def generation_seconds(plan: Plan, workload: Generation, share: Share | None = None,
                       times: PartTimes | None = None
                       ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Seconds by category of the prefill and of each decode step (last axis) of `share`
    (all of the model where None), a batch's turns included; an engine over variants puts
    them on a leading axis of both. Steps already costed in `times` are read from it."""
    n_in, n_out = workload.input_tokens, workload.output_tokens
    together, turns = sequence_turns(plan, workload)
    prompt, decode = _prompt_and_decode(plan, n_in, n_out, share or whole(plan), together,
                                        times)
    pre = {c: turns * v for c, v in prompt.items()}
    dec = {c: turns * v for c, v in decode.items()}
    return pre, dec


def decode_seconds(plan: Plan, contexts: np.ndarray, share: Share | None = None
                   ) -> np.ndarray:
    """Time of one generation step at each context length (the KV cache grows with it)."""
    return sum(phase_seconds(plan, 1, np.asarray(contexts), share or whole(plan)).values())


def kv_cache_bytes(plan: Plan, rank: int, tokens: int, sequences: int = 1,
                   layers: int | None = None) -> float:
    """Keys and values device `rank` caches: its key/value heads (replicated past the
    model's count, see `heads.py`) for every layer (of `layers`), token and sequence; with
    latent attention the whole latent and rotary key (`ModelSpec.kv_values_per_token`) on
    every device, which computes all of them (planning/shards.py)."""
    if not plan.spec.is_decoder:
        return 0.0
    count = plan.spec.layers if layers is None else layers
    if plan.spec.mla is not None:
        return float(count * tokens * plan.spec.kv_values_per_token() * plan.kv_value_bytes
                     * sequences)
    k = plan.devices[rank].layer_shards["k.weight"]
    return float(2 * count * tokens * (k.stop - k.start) * plan.kv_value_bytes * sequences)


def _end_elements(dp: DevicePlan, plan: Plan, memory: MemoryKind) -> tuple[int, int]:
    """Elements of the tensors outside the layers a device keeps in `memory` on the first
    stage (the embedding's) and on the last (the output ops'; a tied head's copy, the
    embedding's mirror, seeds/001 §IV-B, goes with the head)."""
    spec = plan.spec
    head = "embed_tokens.weight" if spec.tied_embeddings else None
    first = last = 0
    for tensor in embedding_weights(spec):
        shard = dp.shard_for(tensor)
        if shard.memory == memory:
            first += shard.numel_in(tensor, memory)
        if shard.mirror == memory:
            count = shard.numel_in(tensor, memory)
            first, last = (first, last + count) if tensor.role == head else (first + count, last)
    last += sum(dp.shard_for(t).numel_in(t, memory) for t in output_weights(spec))
    return first, last


_MEMORIES: tuple[MemoryKind, ...] = ("hbm", "ddr")


class Holdings:
    """What each board of a ring program holds, counted once: its core's units, and in each
    memory the elements of one layer of each kind and of either end's tensors. Any share of
    the model is then arithmetic (a split's search asks for many)."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.units = plan.engine.resources(plan.spec)
        # A layer of each kind, keyed as Plan.block_counts names them (None: the commonest).
        main = plan.graph.variants[0][1][0] if plan.graph.variants else 0
        kinds = {None: main, **{b.layers[0]: b.layers[0] for b in plan.other_blocks}}
        self.per_layer = {m: [{kind: dp.layer_elements(plan.spec, m, layer)
                               for kind, layer in kinds.items()} for dp in plan.devices]
                          for m in _MEMORIES}
        self.ends = {m: [_end_elements(dp, plan, m) for dp in plan.devices]
                     for m in _MEMORIES}

    @property
    def total(self) -> Resources:
        """The fabric of a board's core: the same whatever share of the model it runs."""
        return _summed(tuple(self.units.values()))

    def held_bytes(self, rank: int, memory: MemoryKind, share: Share) -> float:
        """Bytes board `rank` keeps in `memory` for `share`; every layer of a kind shares
        one template (DevicePlan.held_bytes, for all of the model)."""
        first, last = self.ends[memory][rank]
        per_layer = self.per_layer[memory][rank]
        layers = sum(per_layer[layer] * count for layer, count in share.blocks(self.plan))
        return ((layers + first * share.first + last * share.last)
                * self.plan.bytes_per_param)

    def device_use(self, workload: Generation, share: Share | None = None,
                   first_rank: int = 0) -> list[DeviceUse]:
        """Each board's core and the bytes it holds for `share` (the batch's KV caches of
        its layers included); ranks numbered from `first_rank`."""
        plan, share = self.plan, share or whole(self.plan)
        return [
            DeviceUse(
                rank=first_rank + d.rank, device=d.device.key, units=self.units,
                hbm_bytes=self.held_bytes(d.rank, "hbm", share)
                + kv_cache_bytes(plan, d.rank, workload.total_tokens, workload.batch,
                                 share.layers),
                ddr_bytes=self.held_bytes(d.rank, "ddr", share),
            )
            for d in plan.devices
        ]


def device_use(plan: Plan, workload: Generation, share: Share | None = None,
               first_rank: int = 0) -> list[DeviceUse]:
    """`Holdings.device_use` of a program asked once."""
    return Holdings(plan).device_use(workload, share, first_rank)


def feasibility(plan: Plan, devices: list[DeviceUse], where: str = "") -> list[str]:
    """Every device short of memory or fabric: which, which resource and by how much
    (`where` names a stage's place in the rack)."""
    reasons = []
    for use, dp in zip(devices, plan.devices, strict=True):
        name = f"device {use.rank} ({dp.device.key}{where})"
        reasons += memory_reasons(use, dp, name) + fabric_reasons(plan, use.total, dp, name)
    return reasons


def memory_reasons(use: DeviceUse, dp: DevicePlan, name: str) -> list[str]:
    """Each memory of board `dp` that cannot hold what `use` keeps there."""
    reasons = []
    dev = dp.device
    for kind, need in (("hbm", use.hbm_bytes), ("ddr", use.ddr_bytes)):
        mem = dev.memory(kind)
        if need and (mem is None or need > mem.capacity_bytes):
            have = mem.capacity_bytes if mem else 0
            reasons.append(f"{name}: {kind.upper()} needs {need:.4g} bytes, has "
                           f"{have:.4g} ({need - have:.3g} over)")
    return reasons


def fabric_reasons(plan: Plan, total: Resources, dp: DevicePlan, name: str) -> list[str]:
    """Each fabric resource board `dp`'s core (`total`) needs more of than its node offers."""
    reasons, fabric = [], plan.fabric(dp.rank)
    for res in total.exceeding(fabric):
        need, have = getattr(total, res), getattr(fabric, res)
        reasons.append(f"{name}: {res.upper()} needs {need}, has {have} ({need - have:,} over)")
    return reasons


def positions_reason(plan: Plan, workload: Generation) -> list[str]:
    if workload.total_tokens > plan.spec.max_positions:
        return [f"{workload.total_tokens} tokens exceed the model's "
                f"{plan.spec.max_positions} positions"]
    return []
