"""One rank process: join the others (and the gloo process group where the collectives need
it), run an emulator's rank program on this device's shard, hand the result over (to the
launcher, or to rank 0 under torchrun). Started by the launcher (`main`), or as
`archi emulate` under torchrun (`run_torchrun_rank`)."""

import os
import signal
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, Protocol

import torch
import torch.distributed as dist

from archipelago.emulate.errors import RankFailure, one_line
from archipelago.emulate.exchange import Exchange, PeerFailure, in_shared_memory, transport
from archipelago.emulate.job import EmulationJob
from archipelago.emulate.stderr import Captured, captured_stderr
from archipelago.emulate.torchrun import TorchrunPlace
from archipelago.emulate.watchdog import (
    FAULT_ENV,
    Fault,
    Heartbeat,
    ProgressBoard,
    die_with_parent,
    record_failure,
)
from archipelago.errors import ERROR_PREFIX, MESSAGE_LIMIT, ArchipelagoError, elide


class SPMDPlan(Protocol):
    """What the launcher needs of a plan: how many ranks run it."""

    @property
    def ranks(self) -> int: ...



@dataclass(frozen=True)
class RankProgram:
    """An SPMD emulator: `run_rank` runs on every rank with its Exchange; `summarize` turns
    all ranks' results (read by the launcher, or gathered on rank 0 under torchrun) and
    the `reference` into the report."""

    run_rank: Callable[[SPMDPlan, EmulationJob, int, Exchange], dict[str, Any]]
    summarize: Callable[[SPMDPlan, EmulationJob, list[dict[str, Any]], Any], dict[str, Any]]
    # (plan, job, rank) -> (collectives the rank runs per generated token, tokens): what the
    # launcher's progress bar counts its collectives against
    pace: Callable[[SPMDPlan, EmulationJob, int], tuple[int, int]] | None = None
    # (plan, job, run_dir) -> the job with `weights_dir` set: written under the run's
    # directory when this machine starts the ranks, a shared cache under torchrun (None)
    provide_weights: Callable[[SPMDPlan, EmulationJob, Path | None], EmulationJob] = (
        lambda plan, job, run_dir: job)
    # (plan, rank) -> what the rank emulates, in the user's words ("u280 'fpga1', tensor
    # shard 2 of 4"): failure lines name it beside the rank number
    role: Callable[[SPMDPlan, int], str] = lambda plan, rank: f"device {rank} of {plan.ranks}"
    # (plan, job, idle, tokens) -> what `summarize` checks the results against (a reference
    # model), once the weights are provided: the launcher prepares it in a thread while the
    # ranks start and run (`idle()`: True while a core is to spare, their fork server still
    # importing; `tokens()`: the tokens every rank has generated so far, and whether the
    # ranks are done), a torchrun rank 0 once the results are in
    reference: Callable[[SPMDPlan, EmulationJob, Callable[[], bool],
                         Callable[[], tuple[list[int], bool]]], Any] = (
        lambda plan, job, idle, tokens: None)


def rank_name(plan: SPMDPlan, program: RankProgram, rank: int) -> str:
    """How a failure line names a rank: `rank 1 (u280 'fpga1', tensor shard 2 of 4)`."""
    return f"rank {rank} ({program.role(plan, rank)})"


def rank_threads(local_world: int) -> int:
    """Torch threads a rank runs: this machine's cores shared by its `local_world` ranks."""
    return max(1, (os.cpu_count() or 1) // local_world)


def run_rank(plan: SPMDPlan, job: EmulationJob, program: RankProgram, place: TorchrunPlace,
             heartbeat: Heartbeat, provide_weights: bool = False, shared: Path | None = None
             ) -> tuple[EmulationJob, list[dict[str, Any]] | None]:
    """This rank's part of `plan` (the launch's size checked against it already), beside
    the job it ran: under torchrun rank 0 gets every rank's result, the others None; a
    launcher's rank (`shared`: a folder of its run) returns its own alone, which the
    launcher reads beside the others'. Collectives time out after `job.timeout_s`, so a
    dead or hung peer cannot block forever. With `provide_weights` (torchrun) the weights
    are provided once every rank has checked in at the store, so a run a rank cannot join
    writes none. With `shared` the collectives go through shared memory there where they
    can (exchange.transport), and then no gloo process group is made: nothing else would
    use it (the last of 4 ranks joined it 0.04-0.09 s after the last started, against
    0.01-0.02 s to check in at the store alone, on 2 shared cores, issue 36)."""
    rank, world, local_world = place.rank, place.world, place.local_world
    torch.set_num_threads(rank_threads(local_world))
    timeout = timedelta(seconds=job.timeout_s)
    grouped = not in_shared_memory(shared)
    try:
        store = _all_joined(rank, world, timeout)
        if provide_weights:  # before the group exists: transformers saves only on rank 0 then
            job = program.provide_weights(plan, job, None)
            _all_reached(store, "weights", rank, world)
        if grouped:
            dist.init_process_group("gloo", store=store, rank=rank, world_size=world,
                                    timeout=timeout)
    except (RuntimeError, dist.DistError) as err:  # e.g. a peer never joined
        raise PeerFailure.during("joining the process group", err) from None
    heartbeat.stamp("joined")
    exchange = Exchange(heartbeat, transport(shared, rank, world, job.timeout_s))
    result = program.run_rank(plan, job, rank, exchange)
    gathered = [result] if shared is not None else exchange.gather_to_root(result)
    heartbeat.stamp("gathered")
    heartbeat.finish()
    if grouped:
        dist.destroy_process_group()
    return job, gathered


def _all_joined(rank: int, world: int, timeout: timedelta) -> dist.Store:
    """The launch's store (env://: MASTER_ADDR and MASTER_PORT, or torchrun's agent store),
    once every rank has checked in there: nothing is written for a run a rank never joins."""
    store, _, _ = next(dist.rendezvous("env://", rank=rank, world_size=world, timeout=timeout))
    store.set(f"archipelago/joined/{rank}", "1")
    store.wait([f"archipelago/joined/{r}" for r in range(world)], timeout)
    return store


# How long a rank waits for its peers to have their weights: seeding and saving a model takes
# from seconds (a tiny test model in a fresh environment) to minutes (billions of parameters),
# which the collectives' --timeout must not be charged with; gloo's own join is bounded by it.
WEIGHTS_WAIT = timedelta(minutes=10)


def _all_reached(store: dist.Store, step: str, rank: int, world: int) -> None:
    """Mark this rank past `step` and wait for every rank to be (within WEIGHTS_WAIT)."""
    store.set(f"archipelago/{step}/{rank}", "1")
    store.wait([f"archipelago/{step}/{r}" for r in range(world)], WEIGHTS_WAIT)


def _with_torch(message: str, torch_said: Captured) -> str:
    """The rank's one line, with torch's own first meaningful line when it adds to it."""
    said = torch_said.summary()
    line = message if said is None or said in message else f"{message} (torch: {said})"
    return elide(line, MESSAGE_LIMIT - len(ERROR_PREFIX))


def run_torchrun_rank(plan: SPMDPlan, job: EmulationJob, program: RankProgram,
                      place: TorchrunPlace) -> dict[str, Any] | None:
    """This process is one rank of a torchrun launch (its environment checked by the
    launcher; each rank built the same `plan`): rank 0 returns the report. Torch's C++
    stderr (c10d and gloo logs, stack frames) is captured: on failure summarised into the
    one error line, on success dropped (what Python itself wrote is passed on)."""
    rank = place.rank
    fault = Fault.parse(os.environ.get(FAULT_ENV), rank)
    torch_said = Captured()
    try:
        with captured_stderr() as torch_said:
            job, gathered = run_rank(plan, job, program, place, Heartbeat(rank, fault=fault),
                                     provide_weights=True)
    except PeerFailure as err:
        raise RankFailure(_with_torch(f"{rank_name(plan, program, rank)}: {err}", torch_said)
                          ) from None
    except ArchipelagoError:
        raise
    except Exception as err:
        raise RankFailure(_with_torch(f"{rank_name(plan, program, rank)} failed: "
                                      f"{one_line(err)}", torch_said)) from err
    sys.stderr.write(torch_said.not_torch())
    if gathered is None:
        return None
    return program.summarize(plan, job, gathered,
                             program.reference(plan, job, _busy, _none_published))


def _busy() -> bool:
    """No core to spare on a torchrun rank 0: its reference is prepared after the run."""
    return False


def _none_published() -> tuple[list[int], bool]:
    """A torchrun rank 0's reference sees no tokens published: the results are in."""
    return [], True


def result_path(run_dir: Path, rank: int) -> Path:
    """Where a launcher's rank leaves its result for the launcher."""
    return run_dir / f"result{rank}.pt"


def main(run_dir: Path, plan: SPMDPlan, job: EmulationJob, program: RankProgram, rank: int,
         port: int, fault: str | None, launcher: int | None = None,
         gate: tuple[int, int] | None = None) -> None:
    """A rank started by the launcher (forked from its fork server, or from the launcher
    itself, pid `launcher`, then through `gate`: a pipe whose end of file says every rank
    is forked) with the launcher's own SPMDPlan object: output goes to
    RUN_DIR/rank{k}.log, failures to RUN_DIR/rank{k}.error."""
    die_with_parent()
    if gate is not None:
        os.close(gate[1])
        os.read(gate[0], 1)  # end of file once the launcher and every rank closed theirs
        os.close(gate[0])
    if launcher is not None:
        # forked from the launcher, in its process group: a terminal's Ctrl-C is the
        # launcher's to handle (the fork server's ranks ignore it too), and a launcher that
        # died before the line above armed it leaves nothing to kill this rank
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if os.getppid() != launcher:
            os._exit(1)
    try:
        log = os.open(run_dir / f"rank{rank}.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    except OSError:  # the run ended (its directory removed) while this rank was forked
        os._exit(1)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    world = plan.ranks
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(world), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world),
                      TORCHELASTIC_USE_AGENT_STORE="True")  # the launcher serves the store
    heartbeat = Heartbeat(rank, ProgressBoard(run_dir / "progress", world),
                          Fault.parse(fault, rank))
    heartbeat.stamp("started")
    try:
        _, gathered = run_rank(plan, job, program, TorchrunPlace(rank, world, world),
                               heartbeat, shared=run_dir / "shared")
        torch.save(gathered, result_path(run_dir, rank))
    except PeerFailure as err:
        record_failure(run_dir, rank, "peer", str(err))
        os._exit(1)  # skip process-group teardown, which could wait on the dead peer
    except BaseException as err:
        traceback.print_exc()
        record_failure(run_dir, rank, "own", one_line(err))
        sys.stderr.flush()
        os._exit(1)
