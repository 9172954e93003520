"""Liveness of the ranks: each rank counts its collectives onto a shared board; the launcher
watches the board and the processes, and on the first failure or stall stops every rank and
names the one to blame. A rank can be told to fail on purpose (tests) through FAULT_ENV."""

import ctypes
import json
import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import wait
from multiprocessing.process import BaseProcess
from pathlib import Path

import numpy as np

from archipelago.emulate.errors import RankFailure
from archipelago.emulate.stderr import meaningful_lines
from archipelago.emulate.timeline import RankStamps
from archipelago.emulate.tokens import RankTokens
from archipelago.errors import elide

# "RANK:ACTION:N": rank RANK raises (`raise`), SIGKILLs itself (`kill`) or hangs (`hang`)
# just before its Nth collective.
FAULT_ENV = "ARCHIPELAGO_EMULATE_FAULT"
DONE = -1  # board value of a rank that has finished all its collectives
GRACE_S = 2.0  # after a first failure, how long the other ranks get to exit on their own
POLL_S = 0.05


class ProgressBoard:
    """Collectives started per rank, in a small memory-mapped file all ranks share, and
    beside it when each rank reached each step (timeline.RANK_PHASES) and the tokens it
    generated (tokens.py: room for `tokens` each, set by the launcher that creates it)."""

    def __init__(self, path: Path, ranks: int, create: bool = False, tokens: int = 0) -> None:
        self._counts = np.memmap(path, np.int64, "w+" if create else "r+", shape=(ranks,))
        self.stamps = RankStamps(path.with_suffix(".stamps"), ranks, create)
        self.tokens = RankTokens(path.with_suffix(".tokens"), ranks, tokens if create else None)

    def read(self) -> np.ndarray:
        return np.array(self._counts)

    def set(self, rank: int, value: int) -> None:
        self._counts[rank] = value


@dataclass(frozen=True)
class Fault:
    action: str
    at: int

    @classmethod
    def parse(cls, text: str | None, rank: int) -> "Fault | None":
        """The fault FAULT_ENV's value `text` sets for `rank`, if any."""
        if not text:
            return None
        who, action, at = text.split(":")
        assert action in {"raise", "kill", "hang"}, text
        return cls(action, int(at)) if int(who) == rank else None

    def strike(self) -> None:
        if self.action == "raise":
            raise RuntimeError(f"injected fault before collective {self.at}")
        if self.action == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        while True:
            time.sleep(3600)


class Heartbeat:
    """One rank's pulse: beats before every collective (and fires an injected fault there)."""

    def __init__(self, rank: int, board: ProgressBoard | None = None,
                 fault: Fault | None = None) -> None:
        self.rank, self.board, self.fault, self.count = rank, board, fault, 0

    def collective(self) -> None:
        self.count += 1
        if self.fault is not None and self.count == self.fault.at:
            self.fault.strike()
        if self.board is not None:
            self.board.set(self.rank, self.count)

    def stamp(self, phase: str) -> None:
        """This rank reached `phase` (timeline.RANK_PHASES) now."""
        if self.board is not None:
            self.board.stamps.stamp(self.rank, phase)

    def token(self, index: int, token: int) -> None:
        """This rank knows generated token `index` now."""
        if self.board is not None:
            self.board.tokens.publish(self.rank, index, token)

    def finish(self) -> None:
        if self.board is not None:
            self.board.set(self.rank, DONE)


def die_with_parent() -> None:
    """Have the kernel SIGKILL this rank when its parent (the fork server, which the reaper
    ends with the launcher, or the launcher itself) dies, so no rank outlives a killed
    launcher (Linux)."""
    if sys.platform.startswith("linux"):
        pr_set_pdeathsig = 1
        ctypes.CDLL(None).prctl(pr_set_pdeathsig, signal.SIGKILL)


def record_failure(run_dir: Path, rank: int, cause: str, message: str) -> None:
    """`cause` is 'own' (this rank failed) or 'peer' (a collective failed under it)."""
    (run_dir / f"rank{rank}.error").write_text(json.dumps({"cause": cause, "message": message}))


def _recorded(run_dir: Path, rank: int) -> dict | None:
    path = run_dir / f"rank{rank}.error"
    return json.loads(path.read_text()) if path.exists() else None


# What a signal that ended a rank usually means, for the user reading the line.
SIGNAL_CAUSES = {signal.SIGKILL: "the kernel's out-of-memory killer, or a kill -9",
                 signal.SIGSEGV: "a crash in native code", signal.SIGBUS: "a crash in native code",
                 signal.SIGABRT: "aborted by native code", signal.SIGTERM: "stopped from outside"}


def _exit_reason(run_dir: Path, rank: int, code: int) -> str:
    if code < 0:
        sig = signal.Signals(-code)
        cause = SIGNAL_CAUSES.get(sig)
        return f"killed by signal {sig.name}" + (f" ({cause})" if cause else "")
    log = run_dir / f"rank{rank}.log"  # its last words, not a C++ stack frame
    lines = meaningful_lines(log.read_text(errors="replace")) if log.exists() else []
    return f"exited with status {code}" + (f": {elide(lines[-1])}" if lines else "")


def _diagnose(procs: list[BaseProcess], board: ProgressBoard, run_dir: Path,
              names: list[str]) -> str:
    """The first failure in words, the rank named by `names` (worker.rank_name)."""
    peer_errors = []
    for rank, proc in enumerate(procs):
        if proc.exitcode in (None, 0):
            continue
        record = _recorded(run_dir, rank)
        if record is None:
            return f"{names[rank]} {_exit_reason(run_dir, rank, proc.exitcode)}"
        if record["cause"] == "own":
            return f"{names[rank]} failed: {record['message']}"
        peer_errors.append(f"{names[rank]}: {record['message']}")
    counts = board.read()
    stuck = [r for r, p in enumerate(procs) if p.exitcode is None and counts[r] != DONE]
    if stuck:
        rank = min(stuck, key=lambda r: counts[r])
        reached = max(int(c) for c in counts)
        where = (f"stopped after {counts[rank]} collectives while others reached {reached}"
                 if reached > counts[rank] else f"no progress at collective {reached}")
        detail = f"; {peer_errors[0]}" if peer_errors else ""
        return f"{names[rank]} hung: {where}{detail}"
    return peer_errors[0] if peer_errors else "ranks stopped without a reason"


def _settle(procs: list[BaseProcess], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(p.exitcode is None for p in procs):
        time.sleep(POLL_S)


def watch(procs: list[BaseProcess], board: ProgressBoard, run_dir: Path,
          timeout_s: float, names: list[str],
          on_poll: Callable[[np.ndarray], None] | None = None) -> None:
    """Return when every rank exited cleanly. Raise RankFailure when one exits with an error
    or, once all have begun collectives, none progresses for `timeout_s` (+ grace), naming
    the rank by `names`.
    `on_poll` sees the board's counts at every poll (a progress bar)."""
    last, changed = board.read(), time.monotonic()
    while True:
        if on_poll is not None:
            on_poll(board.read())
        codes = [p.exitcode for p in procs]
        if all(c == 0 for c in codes):
            return
        if any(c not in (None, 0) for c in codes):
            _settle(procs, GRACE_S)
            raise RankFailure(_diagnose(procs, board, run_dir, names))
        seen = board.read()
        busy = (seen != DONE).any()  # a finished rank may still be writing results
        if (seen != last).any():
            last, changed = seen, time.monotonic()
        elif busy and (seen != 0).all() and time.monotonic() - changed > timeout_s + GRACE_S:
            raise RankFailure(_diagnose(procs, board, run_dir, names))
        # woken by a rank's exit at once: the last rank's is when the results are in
        wait([p.sentinel for p in procs if p.exitcode is None], POLL_S)


def stop(procs: list[BaseProcess]) -> None:
    """SIGKILL every rank still running and reap it."""
    started = [p for p in procs if p.pid is not None]
    for proc in started:
        if proc.exitcode is None:
            proc.kill()
    for proc in started:
        proc.join()

