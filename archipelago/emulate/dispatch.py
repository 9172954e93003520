"""`archi emulate`: which emulator runs which strategy's plans, one table row per emulated
strategy, and the entry point that looks a request up in it.

An emulator is two functions: `check` refuses what it cannot run before any process
starts, and `run` executes the whole emulation and returns the report (None on torchrun
ranks other than 0). Strategies whose plans share a shape (other tensor-parallel sync
schemes) reuse an emulator and add step handlers to compute.py / collectives.py; a different
kind of plan (e.g. galapagos with an encoder emulator and a sequence length) adds a row.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from archipelago.emulate import generation
from archipelago.emulate.job import EmulationJob
from archipelago.errors import UnknownNameError


@dataclass(frozen=True)
class Emulator:
    check: Callable[[Any, EmulationJob], None]
    run: Callable[[Any, EmulationJob], dict[str, Any] | None]


# Tensor-parallel plans share one emulator whatever their sync scheme: the scheme lives in
# the plan's steps, which the interpreter follows.
_DECODER = Emulator(check=generation.check, run=generation.emulate)
EMULATORS: dict[str, Emulator] = {"dfx": _DECODER, "lora-f": _DECODER, "lora-q": _DECODER}


def emulate(job: EmulationJob) -> dict[str, Any] | None:
    """Build the plan `archi plan` would estimate, check it, run it. Bad splits, unsupported
    models and bad checkpoints raise here, before any process starts."""
    plan = job.plan()  # an unknown strategy name fails here, listing the registry's
    if job.strategy not in EMULATORS:
        raise UnknownNameError("strategy for emulation", job.strategy, EMULATORS)
    emulator = EMULATORS[job.strategy]
    emulator.check(plan, job)
    return emulator.run(plan, job)
