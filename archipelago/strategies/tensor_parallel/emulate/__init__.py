"""The tensor-parallel kind's emulator: check everything that would stop a rank (rank.py),
then one process per board of every stage, each generating from its own shard
(program.py); a ring is one stage."""

from typing import Any

from archipelago.emulate.errors import EmulationError
from archipelago.emulate.job import EmulationJob
from archipelago.emulate.launch import run_spmd
from archipelago.strategies.tensor_parallel.emulate.program import PROGRAM
from archipelago.strategies.tensor_parallel.emulate.rank import check
from archipelago.strategies.tensor_parallel.staged import StagedPlan


def emulate(plan: StagedPlan, job: EmulationJob) -> dict[str, Any] | None:
    """The kind's emulator hook."""
    counts = [len(s.layers) for s in plan.stages]
    if min(counts) < 1:
        raise EmulationError(f"--split layers={'+'.join(map(str, counts))}: every one of the "
                             f"{len(counts)} stages needs at least one layer")
    check(plan.program, job)
    return run_spmd(plan, job, PROGRAM)
