"""The tensor-parallel kind's one estimator: a staged plan's generation, stage by stage.

Every stage's seconds come from its ring program over its share of the model (costs.py);
the stages run one after another (no micro-batching across them yet), so a token's time is
the sum of theirs plus the transfers between stages (none for one stage). Prefill, per-token
decode and the breakdown by category add up over the stages ("transfer" joins the
categories where the plan shows its split); every device of every stage reports its
memory and core, and every one short of either says why. What the planner costed while
choosing the split (`StagedPlan.costed`: the steps' seconds, and the stages' use and
refusals for its workload) is read, not computed again.
"""

from dataclasses import dataclass, field

import numpy as np

from archipelago.estimate.figures import INPUTS
from archipelago.estimate.generation import GenerationTiming
from archipelago.estimate.workload import Generation
from archipelago.hardware.device import Link
from archipelago.strategies.tensor_parallel.costs import (
    CATEGORIES,
    DeviceUse,
    Holdings,
    generation_seconds,
)
from archipelago.strategies.tensor_parallel.split_choice import (
    share,
    stage_reasons,
    stages_key,
)
from archipelago.strategies.tensor_parallel.staged import Stage, StagedPlan
from archipelago.strategies.tensor_parallel.transfers import stage_links, transfer_seconds


@dataclass
class StageEstimate:
    """One stage's share of the run: its prompt seconds, its decode seconds (all steps, and
    per step), and its devices' use."""

    stage: Stage = field(metadata={INPUTS: True})  # the plan's, not figures to check
    prefill_s: float
    decode_s: float
    decode_s_per_token: float
    devices: list[DeviceUse]

    @property
    def busy_s(self) -> float:
        return self.prefill_s + self.decode_s


@dataclass
class Estimate(GenerationTiming):
    """`prefill_s` is the time to the first token of every sequence; `decode_s_per_token`
    the mean time per further output token (one token of each of the batch's sequences);
    `tokens_per_s` the batch's output tokens over the latency."""

    prefill_breakdown_s: dict[str, float]  # the prompt's share of breakdown_s
    devices: list[DeviceUse]  # every stage's, in rank order
    reasons: list[str] = field(default_factory=list)
    batch: int = 1
    batch_note: str | None = None  # why the batch's sequences run in turn, if they do
    stages: list[StageEstimate] = field(default_factory=list)
    transfer_s: float = 0.0  # every inter-stage transfer of the run
    links: list[Link] = field(default_factory=list)  # stage k to k + 1, the last to the first

    @property
    def tokens_per_s_per_device(self) -> float:
        return self.tokens_per_s / len(self.devices)


def _same_costs(stage: Stage) -> tuple:
    """What a stage's seconds depend on besides its share: its engine and steps (objects
    every stage of a split shares), its ring's size and link (the collectives')."""
    program = stage.program
    link = program.cluster.link(0, 1) if program.cluster.size > 1 else None
    return (id(program.engine), id(program.embed_steps), id(program.block_steps),
            id(program.output_steps), id(program.decode_steps), id(program.other_blocks),
            program.cluster.size,
            None if link is None else (link.latency_s, link.bandwidth_Bps))


def _add(total: dict[str, np.ndarray] | None, part: dict[str, np.ndarray]
         ) -> dict[str, np.ndarray]:
    return part if total is None else {c: total[c] + part[c] for c in CATEGORIES}


def estimate(plan: StagedPlan, workload: Generation) -> Estimate:
    """The kind's estimator."""
    n_out, batch = workload.output_tokens, workload.batch
    program = plan.program
    note = program.engine.one_sequence if batch > 1 else None
    prefill: dict[str, np.ndarray] | None = None
    dec: dict[str, np.ndarray] | None = None
    stages, devices, uses_by_stage = [], [], []
    seconds: dict[tuple, tuple[dict[str, np.ndarray], dict[str, np.ndarray]]] = {}
    held: dict[tuple[int, int], Holdings] = {}
    checked = plan.costed  # the planner's, where it checked these stages for this workload
    if checked.workload != workload or checked.stages != stages_key(plan.stages):
        checked = None
    for k, stage in enumerate(plan.stages):  # the middle stages of a split cost alike: once
        key = (share(stage), *_same_costs(stage))
        if key not in seconds:
            seconds[key] = generation_seconds(stage.program, workload, share(stage),
                                              plan.costed.times)
        pre_k, dec_k = seconds[key]
        prefill, dec = _add(prefill, pre_k), _add(dec, dec_k)
        step = sum(dec_k.values()) if n_out > 1 else np.zeros(0)
        if checked is not None:
            uses = checked.uses[k]
        else:
            boards = (id(stage.program.engine), id(stage.program.devices))
            if boards not in held:
                held[boards] = Holdings(stage.program)
            uses = held[boards].device_use(workload, share(stage), stage.nodes[0])
        uses_by_stage.append(uses)
        stages.append(StageEstimate(stage, float(sum(pre_k.values())), float(np.sum(step)),
                                    float(step.mean()) if step.size else 0.0, uses))
        devices += uses
    assert prefill is not None and dec is not None  # a plan has a stage
    pre = {c: float(v) for c, v in prefill.items()}
    breakdown = {c: pre[c] + float(dec[c].sum()) for c in CATEGORIES}
    prefill_s = sum(pre.values())
    per_token = sum(dec.values()) if n_out > 1 else np.zeros(0)
    links = stage_links(plan.cluster, plan.split.tp, len(plan.stages))
    transfer = 0.0
    if plan.shows_split:
        prompt_hops, step_hops = transfer_seconds(program, workload, links)
        per_token = per_token + step_hops if n_out > 1 else per_token
        prefill_s += prompt_hops
        transfer = prompt_hops + float(step_hops.sum())
        breakdown["transfer"] = transfer
        pre["transfer"] = prompt_hops
    latency = prefill_s + float(np.sum(per_token))
    reasons = (list(checked.reasons) if checked is not None
               else stage_reasons(plan.stages, workload, uses_by_stage))
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
        stages=stages,
        transfer_s=transfer,
        links=links,
    )
