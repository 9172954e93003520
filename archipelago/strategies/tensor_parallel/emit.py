"""The tensor-parallel kind's build files (`archi build`): each engine names the writer of
its own (`StepEngine.builder`): DFX's compiled programs (dfx_program/build.py, an
instruction set to emit, seeds/001 §IV-C), LORA's layouts, schedule and engine headers
(lora_build/, seeds/002 gives a datapath and no instruction set). Every summary carries a
`headline`, the line `archi build` prints."""

from pathlib import Path
from typing import Any

from archipelago.refs import resolve
from archipelago.strategies.tensor_parallel.staged import StagedPlan


def write_build(plan: StagedPlan, out: Path | str, force: bool = False) -> dict[str, Any]:
    """Write the build files of `plan`'s engine under `out`; returns their summary."""
    return resolve(plan.engine.builder)(plan, out, force)
