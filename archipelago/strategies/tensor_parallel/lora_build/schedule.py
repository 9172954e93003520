"""A LORA stage's synchronization schedule, from its ring program's steps (sync.py): per kind
of block, for a prompt and for one new token, every step in the order the Control Unit runs
it, each collective after the op whose output it carries and with what hides it
(engines/overlap.py):

- an all-gather `matmul_blocks`: behind the matmuls that read the gathered input, which
  traverse it column-major from this board's own block (seeds/002 §III-B, fourth method,
  Eq. 4); `early`, it leaves head by head as its producer finishes each (third method);
- an all-reduce `row_groups`: a distributed LayerNorm's partial sums, sent in groups of
  `rows_per_group` packed rows while the next group's sums are computed (first and second
  methods, Eq. 3);
- `none`: compute waits for it (the argmax gather that picks the token).

Every board of a stage runs the same schedule (SPMD); `collective_s` is the collective's
time for one row on the stage's ring, as the estimate costs it (LORA's router, §IV-C)."""

from typing import Any

from archipelago.strategies.tensor_parallel.engines.overlap import (
    collective_seconds,
    consumers,
)
from archipelago.strategies.tensor_parallel.plan import CommStep, Plan, Step
from archipelago.strategies.tensor_parallel.staged import Stage, StagedPlan

_HOW = {"matmul_blocks": "hidden behind its consumers, traversed column-major from the local "
                         "block (seeds/002 Eq. 4)",
        "row_groups": "pipelined in packed row groups behind the next group's partial sums "
                      "(seeds/002 Eq. 3)",
        "none": "compute waits for it"}


def _entry(plan: Plan, steps: list[Step], index: int) -> dict[str, Any]:
    step = steps[index]
    if not isinstance(step, CommStep):
        return {"compute": step.op.name, "kind": step.op.kind, "stage": step.stage,
                "local_out": step.local_out}
    out: dict[str, Any] = {
        "sync": step.kind, "after": step.tensor, "values_per_row": step.width,
        "value_bytes": step.value_bytes,
        "board_bytes_per_row": step.share(plan.ranks) * step.value_bytes,
        "overlap": step.overlap, "how": _HOW[step.overlap],
        "collective_s": collective_seconds(plan, step, 1)}
    if step.overlap == "matmul_blocks":
        out["hidden_by"] = [steps[i].op.name for i in consumers(steps, index)]  # type: ignore[union-attr]
        out["early"] = step.early
    if step.overlap == "row_groups":
        out["rows_per_group"] = step.group_rows
    return out


def steps_json(plan: Plan, steps: list[Step]) -> list[dict[str, Any]]:
    return [_entry(plan, steps, i) for i in range(len(steps))]


def _blocks(stage: Stage) -> list[dict[str, Any]]:
    """Each kind of block among the stage's layers: its prompt and one-token schedules."""
    plan, out = stage.program, []
    kinds = [(plan.graph.variants[0][1] if plan.graph.variants else range(plan.spec.layers),
              plan.block_steps, plan.decode_steps),
             *((b.layers, b.steps, b.decode_steps) for b in plan.other_blocks)]
    for layers, prompt, one in kinds:
        mine = [i for i in layers if i in stage.layers]
        if mine:
            out.append({"layers": mine, "prompt": steps_json(plan, prompt),
                        "one_token": steps_json(plan, one) if one else "as prompt"})
    return out


def stage_schedule(plan: StagedPlan, stage: Stage) -> dict[str, Any]:
    """Stage `stage`'s schedule; its hand-off of each token's hidden vector to the next
    stage (and of the sampled token back to the first) where there are several."""
    program = stage.program
    out: dict[str, Any] = {"stage": stage.index, "boards": list(stage.nodes),
                           "layers": [stage.layers.start, stage.layers.stop]}
    if stage.first:
        out["embed"] = steps_json(program, program.embed_steps)
    out["blocks"] = _blocks(stage)
    if stage.last:
        out["output"] = steps_json(program, program.output_steps)
    if len(plan.stages) > 1:
        out["hand_off"] = ("the sampled token to stage 0" if stage.last else
                           f"each new token's hidden vector ({program.spec.hidden} values) "
                           f"to stage {stage.index + 1}")
    return out


def sync_counts(plan: Plan) -> dict[str, int]:
    """Collectives of one prompt block, by kind (LORA: 4 all-gathers, 2 all-reduces,
    seeds/002 §III-A)."""
    counts: dict[str, int] = {}
    for step in plan.block_steps:
        if isinstance(step, CommStep):
            counts[step.kind] = counts.get(step.kind, 0) + 1
    return counts
