"""Estimate a tensor-parallel text-generation Plan: prefill, per-token decode, breakdown,
per-device memory and resources, and feasibility with reasons.

A batch of B sequences runs in lockstep: every step of a prefill or decode carries B
sequences' rows (`ComputeStep.sequences`), each sequence attending to its own KV cache,
every collective B times the rows. An engine that runs one sequence at a time
(`StepEngine.one_sequence`) runs them in turn: each phase B times one sequence's.

An engine built over many variants of its parameters at once (variants.py) gives every
step's seconds a leading axis over them; `generation_seconds` keeps that axis.
"""

from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import numpy as np

from archipelago.engines.base import add_resources
from archipelago.estimate.generation import GenerationTiming
from archipelago.estimate.workload import Generation
from archipelago.hardware.device import Resources
from archipelago.models.graph import Phase
from archipelago.strategies.tensor_parallel.overlap import exposed_seconds
from archipelago.strategies.tensor_parallel.plan import CommStep, ComputeStep, Plan, Step

# Where each op's time is reported (the DFX paper's Fig. 15 breakdown categories).
_CATEGORY = {
    "embedding": "embedding", "lm_head": "lm_head", "norm": "layernorm_residual",
    "residual": "layernorm_residual", "attn_score": "attention", "softmax": "attention",
    "attn_context": "attention", "activation": "ffn", "gated_activation": "ffn",
}
_ATTENTION_LINEARS = frozenset({"q", "k", "v", "attn_out"})
CATEGORIES = ("embedding", "attention", "ffn", "layernorm_residual", "sync", "lm_head")


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
        return add_resources(*self.units.values())


@dataclass
class Estimate(GenerationTiming):
    """`prefill_s` is the time to the first token of every sequence; `decode_s_per_token`
    the mean time per further output token (one token of each of the batch's sequences);
    `tokens_per_s` the batch's output tokens over the latency."""

    prefill_breakdown_s: dict[str, float]  # the prompt's share of breakdown_s
    devices: list[DeviceUse]
    reasons: list[str] = field(default_factory=list)
    batch: int = 1
    batch_note: str | None = None  # why the batch's sequences run in turn, if they do

    @property
    def tokens_per_s_per_device(self) -> float:
        return self.tokens_per_s / len(self.devices)


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


def _seconds(plan: Plan, parts: list[Part], shape: tuple[int, ...], sequences: int = 1,
             start: dict[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
    """Seconds by category of each (steps, phase, repeat) part, summed (onto `start`; over
    the engine's variants too, where it has them)."""
    out = {c: np.zeros(shape) if start is None else start[c] for c in CATEGORIES}
    for steps, phase, repeat in parts:
        for step, seconds in zip(steps, steps_seconds(plan, steps, phase, sequences),
                                 strict=True):
            category = step_category(step)
            out[category] = out[category] + repeat * seconds
    return out


def _phase_seconds(plan: Plan, rows: int, context: np.ndarray, output: bool = True,
                   sequences: int = 1) -> dict[str, np.ndarray]:
    """Seconds by category for `rows` new tokens of each of `sequences` at each context
    length: embedding for all rows, every block `layers` times, then (if `output`) the
    output ops on each sequence's last row. One new token of a sliding-window model (plans
    have it in every layer or refuse it) attends to the last `window` keys only; a prompt
    pass still attends in full."""
    phase, window = Phase(rows, context), plan.spec.sliding_window
    block = phase if rows > 1 or window is None else Phase(1, np.minimum(context, window))
    parts: list[Part] = [(plan.embed_steps, phase, 1),
                         (plan.block_steps, block, plan.spec.layers)]
    if output:
        parts.append((plan.output_steps, Phase(1, context), 1))
    return _seconds(plan, parts, context.shape, sequences)


def _prompt_and_decode(plan: Plan, n_in: int, n_out: int, sequences: int = 1
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
        prompt = _phase_seconds(plan, n_in, last, sequences=sequences)
        return ({c: v[..., 0] for c, v in prompt.items()},
                _phase_seconds(plan, 1, contexts, sequences=sequences))
    passes = _phase_seconds(plan, 1, np.arange(1, n_in + n_out), False, sequences)
    head = _seconds(plan, [(plan.output_steps, Phase(1, last), 1)], last.shape, sequences)
    decode = _seconds(plan, [(plan.output_steps, Phase(1, contexts), 1)], contexts.shape,
                      sequences, start={c: v[..., n_in:] for c, v in passes.items()})
    return ({c: passes[c][..., :n_in].sum(axis=-1) + head[c][..., 0] for c in CATEGORIES},
            decode)


def kv_cache_bytes(plan: Plan, rank: int, tokens: int, sequences: int = 1) -> float:
    """Keys and values device `rank` caches: its key/value heads (replicated past the
    model's count, see `heads.py`) for every layer, token and sequence."""
    if not plan.spec.is_decoder:
        return 0.0
    k = plan.devices[rank].layer_shards["k.weight"]
    return float(2 * plan.spec.layers * tokens * (k.stop - k.start) * plan.bytes_per_param
                 * sequences)


def device_use(plan: Plan, workload: Generation) -> list[DeviceUse]:
    units = plan.engine.resources(plan.spec)
    return [
        DeviceUse(
            rank=d.rank, device=d.device.key, units=units,
            hbm_bytes=d.held_bytes(plan.spec, plan.bytes_per_param, "hbm")
            + kv_cache_bytes(plan, d.rank, workload.total_tokens, workload.batch),
            ddr_bytes=d.held_bytes(plan.spec, plan.bytes_per_param, "ddr"),
        )
        for d in plan.devices
    ]


def feasibility(plan: Plan, workload: Generation, devices: list[DeviceUse]) -> list[str]:
    reasons = []
    if workload.total_tokens > plan.spec.max_positions:
        reasons.append(f"{workload.total_tokens} tokens exceed the model's "
                       f"{plan.spec.max_positions} positions")
    for use, dp in zip(devices, plan.devices, strict=True):
        dev = dp.device
        for kind, need in (("hbm", use.hbm_bytes), ("ddr", use.ddr_bytes)):
            mem = dev.memory(kind)
            if need and (mem is None or need > mem.capacity_bytes):
                have = mem.capacity_bytes if mem else 0
                reasons.append(f"device {use.rank} ({dev.key}): {kind.upper()} needs "
                               f"{need:.4g} bytes, has {have:.4g} ({need - have:.3g} over)")
        fabric = plan.fabric(dp.rank)
        for res in use.total.exceeding(fabric):
            need, have = getattr(use.total, res), getattr(fabric, res)
            reasons.append(f"device {use.rank} ({dev.key}): {res.upper()} needs {need}, has "
                           f"{have} ({need - have:,} over)")
    return reasons


def sequence_turns(plan: Plan, workload: Generation) -> tuple[int, int]:
    """(sequences per pass, passes) of a batch: all together, or one after another on an
    engine that runs one sequence at a time."""
    batch = workload.batch
    return (1, batch) if batch > 1 and plan.engine.one_sequence else (batch, 1)


def generation_seconds(plan: Plan, workload: Generation
                       ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Seconds by category of the prefill and of each decode step (last axis), a batch's
    turns included; an engine over variants puts them on a leading axis of both."""
    n_in, n_out = workload.input_tokens, workload.output_tokens
    together, turns = sequence_turns(plan, workload)
    prompt, decode = _prompt_and_decode(plan, n_in, n_out, together)
    pre = {c: turns * v for c, v in prompt.items()}
    dec = {c: turns * v for c, v in decode.items()}
    return pre, dec


def estimate_generation(plan: Plan, workload: Generation) -> Estimate:
    n_out, batch = workload.output_tokens, workload.batch
    note = plan.engine.one_sequence if batch > 1 else None
    prefill, dec = generation_seconds(plan, workload)
    pre = {c: float(v) for c, v in prefill.items()}
    breakdown = {c: pre[c] + float(dec[c].sum()) for c in CATEGORIES}
    prefill_s = sum(pre.values())
    per_token = sum(dec.values()) if n_out > 1 else np.zeros(0)
    latency = prefill_s + float(np.sum(per_token))
    devices = device_use(plan, workload)
    reasons = feasibility(plan, workload, devices)
    return Estimate(
        latency_s=latency,
        tokens_per_s=batch * n_out / latency,
        prefill_s=prefill_s,
        decode_s_per_token=float(per_token.mean()) if per_token.size else 0.0,
        decode_s_first=float(per_token[0]) if per_token.size else 0.0,
        decode_s_last=float(per_token[-1]) if per_token.size else 0.0,
        breakdown_s=breakdown,
        prefill_breakdown_s=pre,
        devices=devices,
        feasible=not reasons,
        reasons=reasons,
        batch=batch,
        batch_note=note,
    )


def decode_seconds(plan: Plan, contexts: np.ndarray) -> np.ndarray:
    """Time of one generation step at each context length (the KV cache grows with it)."""
    return sum(_phase_seconds(plan, 1, np.asarray(contexts)).values())


class StagedPlan(Protocol):
    """A plan of stages across rings (pipeline.py): it costs itself from this module's
    parts, so this module needs not know it."""

    def estimate(self, workload: Generation) -> Any: ...


def estimate(plan: Plan | StagedPlan, workload: Generation) -> Any:
    """The kind's estimator: a single-ring plan here, a staged plan by itself."""
    if isinstance(plan, Plan):
        return estimate_generation(plan, workload)
    return plan.estimate(workload)
