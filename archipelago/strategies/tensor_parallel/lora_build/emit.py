"""LORA's build files under `--out`, for a ring or a rack of rings (stages):

    board<i>/layout.json     board i's HBM (striped over its channels), DDR and URAM
                             regions: every weight copy it holds, its KV cache (layout.py)
    board<i>/lora_engine.h   the engine's parameters for board i's HLS source (header.py)
    schedule.json            each stage's synchronization schedule per kind of block,
                             prompt and one token (schedule.py)
    summary.json             counts, file list

Boards are the cluster's nodes (stage k's tp boards are its nodes k tp ... (k + 1) tp - 1).
"""

from pathlib import Path
from typing import Any

from archipelago.emit.output_dir import OutputDir
from archipelago.strategies.tensor_parallel.lora_build.header import header
from archipelago.strategies.tensor_parallel.lora_build.layout import BoardLayout
from archipelago.strategies.tensor_parallel.lora_build.schedule import (
    stage_schedule,
    sync_counts,
)
from archipelago.strategies.tensor_parallel.staged import StagedPlan


def write_build(plan: StagedPlan, out: Path | str, force: bool = False) -> dict[str, Any]:
    """Lay out every board of every stage and write the files under `out`; returns the
    summary. A layout past a memory's capacity is refused before anything is written."""
    boards = [BoardLayout(stage, rank) for stage in plan.stages
              for rank in range(len(stage.nodes))]
    name = f"{plan.strategy} on {plan.spec.name}, {plan.cluster.name}"
    with OutputDir(out, force) as target:
        for board in boards:
            target.write_json(f"board{board.node}/layout.json", board.as_json())
            target.write_text(f"board{board.node}/lora_engine.h", header(
                board, f"{name}: board {board.node}, rank {board.rank} of stage "
                       f"{board.stage.index}"))
        target.write_json("schedule.json", {
            "strategy": plan.strategy, "model": plan.spec.name,
            "stages": [stage_schedule(plan, stage) for stage in plan.stages]})
        summary = _summary(plan, boards, [*target.written, "summary.json"], target.root)
        target.write_json("summary.json", summary)
    return summary


def _summary(plan: StagedPlan, boards: list[BoardLayout], files: list[str], root: Path
             ) -> dict[str, Any]:
    tp = len(plan.stages[0].nodes)
    syncs = sync_counts(plan.program)
    return {
        "headline": (f"{plan.spec.name} on {plan.cluster.name}: {plan.strategy} layouts for "
                     f"{len(boards)} board{'s' if len(boards) > 1 else ''} ({len(plan.stages)} "
                     f"stage{'s' if len(plan.stages) > 1 else ''} of {tp}; "
                     f"{', '.join(f'{n} {k}' for k, n in syncs.items())} a block)"),
        "model": plan.spec.name, "hardware": plan.cluster.name, "strategy": plan.strategy,
        "format": boards[0].format.name, "boards": len(boards), "stages": len(plan.stages),
        "syncs_per_block": syncs,
        "per_board": [{"board": b.node, "stage": b.stage.index,
                       **{f"{m}_bytes": s.top for m, s in b.spaces.items()},
                       "regions": sum(len(s.regions) for s in b.spaces.values())}
                      for b in boards],
        "files": files, "out": str(root),
    }
