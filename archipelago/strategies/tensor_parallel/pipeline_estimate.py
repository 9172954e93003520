"""Estimate a tensor x pipeline plan: choose (or check) the split, then cost its stages.

The stages run one after another (no micro-batching across them): a token's latency is
the sum of the stages' times plus the transfers between them, each `latency + bytes /
bandwidth` over the link it crosses (the hidden vector of every row at the activations'
width, seeds/002 §III's all-gather width; the sampled token, an int32, back to the first
stage for the next step). A batch of B moves B rows (and B tokens) per step, together, or
one sequence after another on an engine that runs them in turn, as the single-ring
estimator runs them. Stage times come from the single-ring estimator's per-step seconds:
the embedding on the first stage, the block as many times as the stage has layers, the
output ops on the last. Memory: the single-ring plan's per-device bytes (the batch's KV
caches included), scaled to the stage's layers, with the embedding only on the first stage
and the LM head only on the last.

"auto" tries every tensor-parallel degree (and expert placement) with every stage count
(a given split without `ep` tries each placement and keeps the fitting, faster one);
without micro-batching more stages only add transfers, so it keeps the fastest split that
fits (the fewer devices on a tie), or, when none fits, the one using the most devices,
whose refusal it reports.
"""

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from archipelago.estimate.generation import GenerationTiming
from archipelago.estimate.workload import Generation
from archipelago.hardware.device import Link, Resources
from archipelago.models.graph import Phase
from archipelago.models.weights import embedding_weights, output_weights
from archipelago.strategies.tensor_parallel.estimate import (
    CATEGORIES,
    DeviceUse,
    device_use,
    sequence_turns,
    step_category,
    steps_seconds,
)
from archipelago.strategies.tensor_parallel.plan import CommStep, DevicePlan, Plan, Step
from archipelago.strategies.tensor_parallel.stages import Split, balanced_layers

if TYPE_CHECKING:  # the plan calls this module (pipeline.py imports it)
    from archipelago.strategies.tensor_parallel.pipeline import PipelinePlan

TOKEN_ID_BYTES = 4  # the sampled token travels as an int32
FP16_BYTES = 2.0
_MEMORIES = ("hbm", "ddr")


@dataclass(frozen=True)
class PartTimes:
    """Seconds of one part of the model (the embedding, one block, the output ops) over a
    generation, by category (rows in CATEGORIES order): the prompt's, and each decode
    step's (columns)."""

    prefill: np.ndarray
    decode: np.ndarray

    @property
    def total(self) -> float:
        return float(self.prefill.sum() + self.decode.sum())


def _by_category(plan: Plan, steps: list[Step], phase: Phase, sequences: int) -> np.ndarray:
    out = np.zeros((len(CATEGORIES), *phase.context.shape))
    for step, seconds in zip(steps, steps_seconds(plan, steps, phase, sequences), strict=True):
        out[CATEGORIES.index(step_category(step))] += seconds
    return out


def part_times(plan: Plan, workload: Generation) -> dict[str, PartTimes]:
    """The embedding, one block and the output ops, phased as estimate_generation phases
    the whole model (the prompt as one pass, or token by token on engines that run it so;
    the output ops once after the prompt; decode step i at context n_in + i, a sliding
    window's block attending to its last `window` keys), for the whole batch."""
    n_in, n_out = workload.input_tokens, workload.output_tokens
    together, turns = sequence_turns(plan, workload)
    last = np.array([n_in])
    prompt = (Phase(1, np.arange(1, n_in + 1)) if plan.engine.token_serial_prefill
              else Phase(n_in, last))
    decode = Phase(1, n_in + np.arange(1, n_out))
    window = plan.spec.sliding_window
    block = decode if window is None else Phase(1, np.minimum(decode.context, window))
    parts = {"embed": (plan.embed_steps, prompt, decode),
             "block": (plan.block_steps, prompt, block),
             "output": (plan.output_steps, Phase(1, last), decode)}
    return {name: PartTimes(turns * _by_category(plan, steps, pre, together).sum(axis=1),
                            turns * _by_category(plan, steps, dec, together))
            for name, (steps, pre, dec) in parts.items()}


def activation_bytes(plan: Plan) -> float:
    """Bytes of one activation value between boards: what the plan's all-gathers carry."""
    return next((s.value_bytes for s in plan.block_steps
                 if isinstance(s, CommStep) and s.kind == "all_gather"), FP16_BYTES)


def hop_seconds(link: Link, nbytes: float) -> float:
    return link.latency_s + nbytes / link.bandwidth_Bps


def _end_elements(dp: DevicePlan, plan: Plan, memory: str) -> tuple[int, int]:
    """Elements of the non-layer tensors a device keeps in `memory` on the first stage (the
    embedding's) and on the last (the output ops'; a tied head's copy, the embedding's
    mirror, seeds/001 §IV-B, goes with the head)."""
    spec = plan.spec
    head = "embed_tokens.weight" if spec.tied_embeddings else None
    first = last = 0
    for tensor in embedding_weights(spec):
        shard = dp.shard_for(tensor)
        if shard.memory == memory:
            first += shard.numel_in(tensor, memory)  # type: ignore[arg-type]
        if shard.mirror == memory:
            count = shard.numel_in(tensor, memory)  # type: ignore[arg-type]
            first, last = (first, last + count) if tensor.role == head else (first + count, last)
    last += sum(dp.shard_for(t).numel_in(t, memory)  # type: ignore[arg-type]
                for t in output_weights(spec))
    return first, last


@dataclass
class StageEstimate:
    stage: int
    first_layer: int
    layers: int
    nodes: list[int]  # indices of the cluster's nodes, rank order
    prefill_s: float
    decode_s: float  # all decode steps
    decode_s_per_token: float
    device: str  # every rank's catalog device ...
    units: dict[str, Resources]  # ... and core (the ring plan's)
    hbm_bytes: np.ndarray  # by rank: this stage's layers, KV cache and end tensors
    ddr_bytes: np.ndarray

    @property
    def busy_s(self) -> float:
        return self.prefill_s + self.decode_s

    def ranks(self) -> list[DeviceUse]:
        """Each rank's use, as a single-ring estimate lists its devices."""
        return [DeviceUse(r, self.device, self.units, float(h), float(d))
                for r, (h, d) in enumerate(zip(self.hbm_bytes, self.ddr_bytes, strict=True))]


@dataclass
class PipelineEstimate(GenerationTiming):
    """A generation estimate (the single-ring Estimate's figures) of a chosen split; its
    breakdown_s is by category over all stages, plus "transfer"."""

    split: Split
    chosen: str  # "given" or "auto"
    transfer_s: float  # every inter-stage transfer of the run
    prefill_breakdown_s: dict[str, float]
    stages: list[StageEstimate]
    links: list[Link]  # stage k to k + 1, then the last stage back to the first
    reasons: list[str] = field(default_factory=list)
    batch: int = 1
    batch_note: str | None = None  # why the batch's sequences run in turn, if they do


class _Degree:
    """What one (tensor-parallel degree, expert placement) ring plan gives every split of
    it: part times, per-device use over all layers, and the non-layer bytes each end stage
    holds."""

    def __init__(self, plan: "PipelinePlan", key: tuple[int, int], workload: Generation
                 ) -> None:
        (self.tp, self.ep), self.ring, self.cluster = key, plan.rings[key], plan.cluster
        self.parts = part_times(self.ring, workload)
        self.act_bytes = activation_bytes(self.ring)
        uses = device_use(self.ring, workload)
        self.device, self.units = uses[0].device, uses[0].units
        self.total = uses[0].total
        bpp, devices = self.ring.bytes_per_param, self.ring.devices
        # each rank's bytes of the first stage's and the last stage's own tensors ...
        ends = {m: np.array([_end_elements(dp, self.ring, m) for dp in devices]) * bpp
                for m in _MEMORIES}
        self._first = {m: ends[m][:, 0] for m in _MEMORIES}
        self._last = {m: ends[m][:, 1] for m in _MEMORIES}
        # ... and of all layers (weights and KV cache), which scale with a stage's layers
        self._layers = {m: np.array([getattr(u, f"{m}_bytes") for u in uses])
                        - self._first[m] - self._last[m] for m in _MEMORIES}

    def stage_bytes(self, stage: int, stages: int, layers: int) -> dict[str, np.ndarray]:
        """Each rank's bytes in each memory, holding `layers` layers of stage `stage`."""
        share = layers / self.ring.spec.layers
        return {m: self._layers[m] * share + self._first[m] * (stage == 0)
                + self._last[m] * (stage == stages - 1) for m in _MEMORIES}

    def links(self, stages: int) -> list[Link]:
        tp = self.tp
        hops = [self.cluster.link(k * tp + tp - 1, (k + 1) * tp) for k in range(stages - 1)]
        return [*hops, self.cluster.link((stages - 1) * tp, 0)] if stages > 1 else []

    def transfer_s(self, workload: Generation, stages: int) -> tuple[float, np.ndarray]:
        """Inter-stage seconds of the prompt, and of each decode step."""
        n_in, n_out = workload.input_tokens, workload.output_tokens
        together, turns = sequence_turns(self.ring, workload)
        links = self.links(stages)
        row = together * self.ring.spec.hidden * self.act_bytes
        prompt = 0.0
        for link in links[:-1]:
            prompt += (n_in * hop_seconds(link, row) if self.ring.engine.token_serial_prefill
                       else hop_seconds(link, n_in * row))
        step = sum(hop_seconds(link, row) for link in links[:-1])
        if links:
            step += hop_seconds(links[-1], together * TOKEN_ID_BYTES)
        return turns * prompt, np.full(max(n_out - 1, 0), turns * step)

    def layer_total_s(self) -> tuple[float, float, float]:
        return (self.parts["block"].total, self.parts["embed"].total,
                self.parts["output"].total)


def _reasons(degree: _Degree, workload: Generation, counts: tuple[int, ...]) -> list[str]:
    """Every stage device short of memory or fabric: which (stage, rank), which memory and
    by how much; ranks of a stage short alike are named together."""
    reasons = []
    spec = degree.ring.spec
    if workload.total_tokens > spec.max_positions:
        reasons.append(f"{workload.total_tokens} tokens exceed the model's "
                       f"{spec.max_positions} positions")
    device = degree.ring.devices[0].device  # every stage runs the same core on one kind
    fabric = [f"{res.upper()} needs {getattr(degree.total, res)}, has "
              f"{getattr(device.resources, res)}" for res in degree.total.exceeding(
                  device.resources)]
    for s, layers in enumerate(counts):
        lines: dict[str, list[int]] = {text: list(range(degree.tp)) for text in fabric}
        held = degree.stage_bytes(s, len(counts), layers)
        for kind in _MEMORIES:
            mem = device.memory(kind)
            have = mem.capacity_bytes if mem else 0
            for rank, need in enumerate(held[kind]):
                if need and need > have:
                    lines.setdefault(f"{kind.upper()} needs {need:.4g} bytes, has {have:.4g} "
                                     f"({need - have:.3g} short)", []).append(rank)
        for text, ranks in lines.items():
            who = (f"rank {ranks[0]}" if len(ranks) == 1
                   else f"ranks {ranks[0]}-{ranks[-1]}")
            nodes = [s * degree.tp + r for r in ranks]
            where = f"device {nodes[0]}" if len(nodes) == 1 else f"devices {nodes[0]}-{nodes[-1]}"
            reasons.append(f"stage {s} {who} ({where}, {degree.device}, layers "
                           f"{sum(counts[:s])}-{sum(counts[:s + 1]) - 1}): {text}")
    return reasons


def _counts(degree: _Degree, split: Split) -> tuple[int, ...]:
    if split.layers is not None:
        return split.layers
    layer_s, embed_s, output_s = degree.layer_total_s()
    return balanced_layers(degree.ring.spec.layers, split.pp, layer_s, embed_s, output_s)


def _split(degree: _Degree, pp: int, layers: tuple[int, ...]) -> Split:
    return Split(degree.tp, pp, layers, degree.ep)


def _cost(degree: _Degree, workload: Generation, split: Split,
          reasons: list[str]) -> PipelineEstimate:
    """The estimate of `split` (its layer counts known) on `degree`'s ring plan."""
    counts = split.layers
    assert counts is not None  # _counts filled them
    parts, stages = degree.parts, []
    prefill = np.zeros(len(CATEGORIES))
    decode = np.zeros_like(parts["block"].decode)
    start = 0
    for s, layers in enumerate(counts):
        weights = (("embed", s == 0), ("block", layers), ("output", s == len(counts) - 1))
        pre = sum(w * parts[p].prefill for p, w in weights if w)
        dec = sum(w * parts[p].decode for p, w in weights if w)
        prefill, decode = prefill + pre, decode + dec
        step = np.asarray(dec).sum(axis=0)
        held = degree.stage_bytes(s, len(counts), layers)
        stages.append(StageEstimate(
            s, start, layers, [s * split.tp + r for r in range(split.tp)], float(pre.sum()),
            float(step.sum()), float(step.mean()) if step.size else 0.0, degree.device,
            degree.units, held["hbm"], held["ddr"]))
        start += layers
    prompt_hops, step_hops = degree.transfer_s(workload, len(counts))
    per_token = decode.sum(axis=0) + step_hops
    prefill_s = float(prefill.sum()) + prompt_hops
    latency = prefill_s + float(per_token.sum())
    breakdown = {c: float(prefill[i] + decode[i].sum()) for i, c in enumerate(CATEGORIES)}
    breakdown["transfer"] = prompt_hops + float(step_hops.sum())
    prompt_by = {c: float(prefill[i]) for i, c in enumerate(CATEGORIES)}
    return PipelineEstimate(
        split=split, chosen="", latency_s=latency,
        tokens_per_s=workload.batch * workload.output_tokens / latency, prefill_s=prefill_s,
        decode_s_per_token=float(per_token.mean()) if per_token.size else 0.0,
        decode_s_first=float(per_token[0]) if per_token.size else 0.0,
        decode_s_last=float(per_token[-1]) if per_token.size else 0.0,
        transfer_s=breakdown["transfer"], breakdown_s=breakdown,
        prefill_breakdown_s={**prompt_by, "transfer": prompt_hops}, stages=stages,
        links=degree.links(len(counts)), feasible=not reasons, reasons=reasons,
        batch=workload.batch,
        batch_note=degree.ring.engine.one_sequence if workload.batch > 1 else None)


def estimate_pipeline(plan: "PipelinePlan", workload: Generation) -> PipelineEstimate:
    """The user's split costed, or the best split of the cluster (this module's rule)."""
    degrees = {key: _Degree(plan, key, workload) for key in plan.rings}
    if isinstance(plan.request, Split):  # one ring plan, or one per expert placement
        options = []
        for degree in degrees.values():
            split = _split(degree, plan.request.pp, _counts(degree, plan.request))
            options.append(_cost(degree, workload, split,
                                 _reasons(degree, workload, split.layers or ())))
        est = min(options, key=lambda e: (not e.feasible, e.latency_s))
        est.chosen = "given"
        return est
    best: tuple[Any, ...] | None = None
    fallback: tuple[Any, ...] | None = None
    for (tp, _), degree in degrees.items():
        layers = degree.ring.spec.layers
        for pp in range(1, min(plan.cluster.size // tp, layers) + 1):
            split = _split(degree, pp, _counts(degree, Split(tp, pp)))
            reasons = _reasons(degree, workload, split.layers or ())
            prompt, steps = degree.transfer_s(workload, pp)
            latency = (sum(p.total for p in degree.parts.values())
                       + (layers - 1) * degree.parts["block"].total + prompt + steps.sum())
            if not reasons:
                key = (latency, tp * pp)
                if best is None or key < best[0]:
                    best = (key, degree, split, reasons)
                break  # more stages of this degree only add transfers
            key = (-tp * pp, latency)
            if fallback is None or key < fallback[0]:
                fallback = (key, degree, split, reasons)
    _, degree, split, reasons = best or fallback  # type: ignore[misc]
    est = _cost(degree, workload, split, reasons)
    est.chosen = "auto"
    return est
