"""A rack's staged plan on its page: one decode step through the pipeline stages (each
stage's boards busy with their layers, then the hop to the next stage), and a row per stage
with its layers, boards, times and the share of the step it sits idle (the pipeline bubble:
the stages run one after another, no micro-batches overlap them yet, estimate.py)."""

from dataclasses import dataclass

from archipelago.estimate.workload import Generation
from archipelago.report.charts import Span, gantt
from archipelago.report.page import Chart, TableBlock
from archipelago.strategies.tensor_parallel.costs import sequence_turns
from archipelago.strategies.tensor_parallel.estimate import Estimate
from archipelago.strategies.tensor_parallel.staged import StagedPlan
from archipelago.strategies.tensor_parallel.transfers import (
    TOKEN_ID_BYTES,
    activation_bytes,
)

MS = 1e3


@dataclass(frozen=True)
class StageStep:
    """Stage `index`'s part of one decode step: its `label` (layers and boards), its busy
    seconds per pass and the hop after it (to the next stage; the last: the token back)."""

    index: int
    label: str
    busy_s: float
    hop_s: float


def stage_steps(plan: StagedPlan, work: Generation, est: Estimate) -> tuple[list[StageStep],
                                                                             int]:
    """Each stage's part of one pass of a decode step, and the passes a step takes (the
    batch's sequences in turn on an engine that runs one at a time, else 1)."""
    together, turns = sequence_turns(plan.program, work)
    row = together * plan.spec.hidden * activation_bytes(plan.program)
    steps = []
    for k, part in enumerate(est.stages):
        stage, link = part.stage, est.links[k]
        nodes = stage.nodes
        label = (f"stage {k}: layers {stage.layers.start}-{stage.layers.stop - 1}, "
                 f"boards {nodes[0]}-{nodes[-1]} ({len(nodes)})")
        hop = link.transfer_s(together * TOKEN_ID_BYTES if k == len(est.stages) - 1 else row)
        steps.append(StageStep(k, label, part.decode_s_per_token / turns, hop))
    return steps, turns


def stage_chart(plan: StagedPlan, work: Generation, est: Estimate) -> Chart:
    """The step as a timeline: a row per stage, its compute then its hop, pass after pass."""
    steps, turns = stage_steps(plan, work, est)
    spans, now = [], 0.0
    for n in range(turns):
        for s in steps:
            pass_ = f" (pass {n + 1} of {turns})" if turns > 1 else ""
            spans.append(Span(s.label, now, now + s.busy_s, f"compute{pass_}", "compute"))
            now += s.busy_s
            spans.append(Span(s.label, now, now + s.hop_s,
                              f"hop to stage {(s.index + 1) % len(steps)}{pass_}", "transfer"))
            now += s.hop_s
    idle = ", ".join(f"stage {s.index} {100 * (1 - turns * s.busy_s / now):.0f}%"
                     for s in steps)
    return Chart("one decode step through the pipeline stages",
                 f"{len(steps)} stages of {plan.split.tp} boards run one after another: each "
                 f"computes its layers, then hands the hidden vector on (the last sends the "
                 f"token back); a stage sits idle while the others work (the pipeline "
                 f"bubble: {idle} of the {now * MS:,.3f} ms step).",
                 gantt(spans, MS, "ms", "stage", ("compute", "transfer")))


def stage_table(plan: StagedPlan, work: Generation, est: Estimate) -> TableBlock:
    """A row per stage: layers, boards, prefill and decode time, idle share of a step."""
    steps, turns = stage_steps(plan, work, est)
    step = turns * sum(s.busy_s + s.hop_s for s in steps)
    rows = [[str(s.index), f"{part.stage.layers.start}-{part.stage.layers.stop - 1}",
             str(len(part.stage.nodes)), f"{part.prefill_s * MS:,.2f}",
             f"{part.decode_s_per_token * MS:,.3f}", f"{s.hop_s * turns * MS:,.4f}",
             f"{100 * (1 - part.decode_s_per_token / step):.0f}"]
            for s, part in zip(steps, est.stages, strict=True)]
    return TableBlock("pipeline stages",
                      ["stage", "layers", "boards", "prefill ms", "decode ms/token",
                       "hop after, ms/token", "idle (bubble) %"], rows)
