"""Start an SPMD emulation: provide the weights, start one process per device, watch them
and summarize. Under torchrun (RANK and WORLD_SIZE set) this process is one rank."""

import os
import sys
import threading
import types
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from rich.console import Console

from archipelago.emulate import worker
from archipelago.emulate.job import EmulationJob
from archipelago.emulate.reaper import owned_run_dir, record_helpers, start_fork_server
from archipelago.emulate.timeline import Timeline
from archipelago.emulate.torchrun import check_world, torchrun_place
from archipelago.emulate.watchdog import DONE, FAULT_ENV, POLL_S, ProgressBoard, stop, watch
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
    Where the ranks fork from the fork server (`_forked_here`), it starts first: its
    imports (torch's: 1.4-2 s on this project's 2-core machine, issue 36) overlap the
    weights' preparation here (transformers' import, a seeded model built and saved), and
    the ranks fork once both are done. The program's reference
    is prepared in a thread from then on, while the ranks start and run, told when a core
    is idle (a fork server started by this call still importing) and which tokens the
    ranks have generated (the progress board's). The report carries the run's `timeline`
    (timeline.py)."""
    clock = Timeline()
    with owned_run_dir() as run_dir:
        clock.mark("reaper")
        # imported once by the server, not by every rank as it unpickles its program
        started = _forked_here(plan) is None and start_fork_server(
            ["archipelago.emulate.worker", program.run_rank.__module__])
        clock.mark("fork_server")
        job = program.provide_weights(plan, job, run_dir)
        clock.mark("weights")
        tokens = max(program.pace(plan, job, r)[1] for r in range(plan.ranks)) if (
            program.pace) else 0
        board = ProgressBoard(run_dir / "progress", plan.ranks, create=True, tokens=tokens)
        with _meanwhile(program.reference, plan, job, started, clock, board) as reference:
            results = run_ranks(plan, job, program, run_dir, clock, board)
            ref = reference.result()
        report = program.summarize(plan, job, results, ref)
        clock.mark("checked")
        stamps = board.stamps.read()
    clock.mark("removed")
    return {**report, "timeline": clock.report(stamps)}


def _spare_core() -> bool:
    """Whether a core is left that no process wants (the 1-minute load average at least
    one below the cores): only then does a fork server importing torch leave the launcher
    one; on the project's 2-core machine shared at load 6-7 it left none (2026-11-28)."""
    return (os.cpu_count() or 1) - os.getloadavg()[0] >= 1


@contextmanager
def _meanwhile(prepare: Callable[..., Any], plan: SPMDPlan, job: EmulationJob,
               starting: bool, clock: Timeline, board: ProgressBoard) -> Iterator[Future]:
    """`prepare(plan, job, idle, tokens)` in a thread while the block runs (the program's
    reference, marked `reference` when ready; `tokens()`: those every rank has generated
    on `board`, and whether the ranks are done: none will follow). With a fork server
    started now (`starting`)
    and a core to spare it starts at once, `idle()` True until the server has forked a
    rank; otherwise it starts once every rank is forked (its Python held the GIL from the
    forking: a later call's first rank ran 0.6-0.7 s after the weights, 0.25-0.5 s with
    the thread started after, load 5-9) and idle() is False. A block that fails leaves it
    to finish alone, not waited for."""
    ahead, ended = starting and _spare_core(), threading.Event()

    def idle() -> bool:
        return ahead and "first_fork" not in clock.marks

    def tokens() -> tuple[list[int], bool]:
        done = ended.is_set() or "exited" in clock.marks
        return board.tokens.agreed(), done

    def run() -> Any:
        while not (ahead or "forked" in clock.marks):
            if ended.wait(POLL_S):
                return None
        try:
            return prepare(plan, job, idle, tokens)
        finally:
            clock.mark("reference")

    pool = ThreadPoolExecutor(1, "archipelago-reference")
    try:
        yield pool.submit(run)
    finally:
        ended.set()
        pool.shutdown(wait=False)


def _store(ranks: int, timeout_s: float) -> dist.TCPStore:
    """The ranks' rendezvous store, served here on a free port before any rank starts, as
    torchrun's agent serves its ranks' (worker.main sets TORCHELASTIC_USE_AGENT_STORE): a
    rank that connected before rank 0 served one retried after a back-off, its join
    0.25-0.36 s after the server was up (torch 2.13, measured)."""
    return dist.TCPStore("127.0.0.1", 0, ranks, is_master=True,
                         timeout=timedelta(seconds=timeout_s), wait_for_workers=False)


def run_ranks(plan: SPMDPlan, job: EmulationJob, program: RankProgram,
              run_dir: Path, clock: Timeline, board: ProgressBoard) -> list[dict[str, Any]]:
    """One OS process per device (collectives in shared memory, a TCP store to join),
    forked from this launcher or from a server that imported torch once (started by
    emulate_locally; `_forked_here` says which); all are killed as soon as one fails or the
    run stalls (watchdog.watch raises RankFailure). Each rank's result comes back through
    RUN_DIR. `clock` marks when the ranks were forked, exited and reaped;
    the ranks count and stamp on `board` (created at run_dir/progress)."""
    ranks = plan.ranks
    launcher = _forked_here(plan)
    context = mp.get_context("forkserver" if launcher is None else "fork")
    store, fault = _store(ranks, job.timeout_s), os.environ.get(FAULT_ENV)
    # Ranks forked here wait at a gate until all are forked: a rank connecting to the
    # store has the store's thread here look its address up (getnameinfo), holding glibc's
    # resolver lock, and a rank forked meanwhile inherited that lock held and hung on it
    # forever at its own connect (gdb, 8fee7f1 and after: about 1 call in 10 on 4 ranks).
    gate = os.pipe() if launcher is not None else None
    procs = [context.Process(target=worker.main,
                             args=(run_dir, plan, job, program, rank, store.port, fault,
                                   launcher, gate),
                             name=f"archipelago-rank{rank}", daemon=True)
             for rank in range(ranks)]
    try:
        try:
            with _bare_main():
                for proc in procs:
                    proc.start()  # returns once the server forked it: its imports are done
                    clock.mark("first_fork", once=True)
        finally:
            for end in gate or ():
                os.close(end)  # the gate opens: the ranks read its end
        clock.mark("forked")
        record_helpers()
        with _TokenBars(plan, job, program) as bars:
            names = [worker.rank_name(plan, program, r) for r in range(ranks)]
            watch(procs, board, run_dir, job.timeout_s, names, bars.update)
        clock.mark("exited")
    finally:
        stop(procs)
    results = [result for rank in range(ranks)
               for result in torch.load(worker.result_path(run_dir, rank))]
    clock.mark("results")
    return results


def _forked_here(plan: SPMDPlan) -> int | None:
    """This launcher's pid where its ranks fork from it, None where they fork from the fork
    server. A rank that runs one torch thread (the cores shared by the ranks: every
    emulation of two or more ranks on two cores) forks from here, with torch and the
    program imported already (the fork server's fresh interpreter took 1.56 s to import
    them, against 1.07 s for one-process transformers' whole run; gpt2-345m 8:8 on this
    project's 2-core machine, 2026-11-28). A rank of more threads cannot: GNU OpenMP, torch's
    intra-op pool, hangs in a forked child at its first parallel region once the parent
    has used it (measured here: a 1,024 x 1,024 matmul on 2 threads never returned; on 1
    it ran), which is also why PyTorch's DataLoader workers run one thread."""
    return os.getpid() if worker.rank_threads(plan.ranks) == 1 else None


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
