"""Start an SPMD emulation: provide the weights, start one process per device, watch them
and summarize. Under torchrun (RANK and WORLD_SIZE set) this process is one rank."""

import os
import socket
import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.multiprocessing as mp
from rich.console import Console

from archipelago.emulate import worker
from archipelago.emulate.job import EmulationJob
from archipelago.emulate.reaper import owned_run_dir, record_helpers, start_fork_server
from archipelago.emulate.torchrun import check_world, torchrun_place
from archipelago.emulate.watchdog import DONE, FAULT_ENV, ProgressBoard, stop, watch
from archipelago.emulate.worker import RankProgram, SPMDPlan
from archipelago.progress_bar import progress_bar


def run_spmd(plan: SPMDPlan, job: EmulationJob, program: RankProgram) -> dict[str, Any] | None:
    """Run `program` on every device of `plan`: one process per device started here, or,
    under torchrun (RANK and WORLD_SIZE set), this process as one of them. The report, or
    None on torchrun ranks other than 0."""
    place = torchrun_place(os.environ)
    if place is not None:
        check_world(place, plan.ranks)
        return worker.run_torchrun_rank(plan, job, program, place)
    return emulate_locally(plan, job, program)


def emulate_locally(plan: SPMDPlan, job: EmulationJob, program: RankProgram) -> dict[str, Any]:
    """Run `plan` itself, the object in hand, with one process per device on this machine.
    The fork server starts first: its imports (torch's: 1.4-2 s on this project's 2-core
    machine, issue 36) overlap the weights' preparation here (transformers' import, a seeded
    model built and saved), and the ranks fork once both are done."""
    with owned_run_dir() as run_dir:
        # imported once by the server, not by every rank as it unpickles its program
        start_fork_server(["archipelago.emulate.worker", program.run_rank.__module__])
        job = program.provide_weights(plan, job, run_dir)
        return program.summarize(plan, job, run_ranks(plan, job, program, run_dir))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_ranks(plan: SPMDPlan, job: EmulationJob, program: RankProgram,
              run_dir: Path) -> list[dict[str, Any]]:
    """One OS process per device (gloo over loopback), forked from a server that imported
    torch once (started by emulate_locally); all are killed as soon as one fails or the run
    stalls (watchdog.watch raises RankFailure). Rank 0's gathered results come back through
    RUN_DIR."""
    ranks = plan.ranks
    board = ProgressBoard(run_dir / "progress", ranks, create=True)
    context = mp.get_context("forkserver")
    port, fault = _free_port(), os.environ.get(FAULT_ENV)
    procs = [context.Process(target=worker.main,
                             args=(run_dir, plan, job, program, rank, port, fault),
                             name=f"archipelago-rank{rank}", daemon=True)
             for rank in range(ranks)]
    try:
        with _bare_main():
            for proc in procs:
                proc.start()
        record_helpers()
        with _TokenBars(plan, job, program) as bars:
            names = [worker.rank_name(plan, program, r) for r in range(ranks)]
            watch(procs, board, run_dir, job.timeout_s, names, bars.update)
    finally:
        stop(procs)
    return torch.load(run_dir / "result.pt")


@contextmanager
def _bare_main() -> Iterator[None]:
    """Ranks started meanwhile skip re-running the launcher's __main__ module:
    multiprocessing has each child import it (a benchmark's or a script's imports, say
    transformers: 20 s of a 40 s run on 2 busy cores, each rank paying it), while a rank
    needs only the worker and its program, which name their own modules."""
    main = sys.modules["__main__"]
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        sys.modules["__main__"] = main


class _TokenBars:
    """One rich progress bar per rank on stderr: tokens generated, read from the
    collectives the rank has counted onto the board (the program says how many per token)."""

    def __init__(self, plan: SPMDPlan, job: EmulationJob, program: RankProgram) -> None:
        self.paces = ([program.pace(plan, job, r) for r in range(plan.ranks)]
                      if program.pace else None)
        # Bars only on a terminal: in a pipe or log file they left a blank line.
        console = Console(stderr=True)
        self.bar = progress_bar(console, shown=console.is_terminal)
        self.tasks = [self.bar.add_task(f"rank {r} tokens",
                                        total=self.paces[r][1] if self.paces else None)
                      for r in range(plan.ranks)]

    def update(self, counts: np.ndarray) -> None:
        if self.paces is None:
            return
        for task, count, (per_token, tokens) in zip(self.tasks, counts, self.paces,
                                                    strict=True):
            done = tokens if count == DONE else min(int(count) // max(per_token, 1), tokens)
            self.bar.update(task, completed=done)

    def __enter__(self) -> "_TokenBars":
        self.bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bar.stop()
