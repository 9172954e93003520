"""Trial bookkeeping that stays exact with several runs on one study and with runs killed at
any moment: the study stops at its budget of finished trials in total, the published design
point is evaluated exactly once, and trials left RUNNING by a dead run are marked failed.

Each trial records the run that took it (host, pid and the pid's start time), so a run can
tell a peer's trial in flight from one whose run is gone. Trial numbers are handed out by the
storage in one order for all runs; a trial that finds `budget` live trials numbered before it
is not evaluated (marked FAIL with the reason), which is what makes concurrent runs exact.
"""

import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from archipelago.errors import ArchipelagoError
from archipelago.explore.stored import Worker, read_stored
from archipelago.processes import start_time

PUBLISHED = "published"  # user attr of the enqueued published design point
WORKER = "worker"  # user attr: the run that took the trial
SKIPPED = "skipped"  # user attr: why a trial was not evaluated
# A trial is claimed right after it is created; one unclaimed for this long lost its run.
UNCLAIMED_STALE_S = 10.0
# With the budget reached counting peers' trials in flight, how long to wait for them to
# finish, and how often to look (a trial takes milliseconds).
PEER_WAIT_S = 60.0
PEER_POLL_S = 0.05


class StopFlag:
    """Set by SIGINT or SIGTERM: the search ends after the trial in flight."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._event = threading.Event()

    def set(self, signum: int) -> None:
        self.signum = signum
        self._event.set()

    def is_set(self) -> bool:
        return self._event.is_set()


@contextmanager
def stop_on_signals() -> Iterator[StopFlag]:
    """Turn SIGINT/SIGTERM into a StopFlag while the search runs (main thread only: signal
    handlers cannot be installed elsewhere), restoring the previous handlers after."""
    flag = StopFlag()
    if threading.current_thread() is not threading.main_thread():
        yield flag
        return
    previous = {s: signal.signal(s, lambda signum, _frame: flag.set(signum))
                for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield flag
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def this_run() -> dict[str, Any]:
    pid = os.getpid()
    return {"host": socket.gethostname(), "pid": pid, "start": start_time(pid)}


def worker_of(trial: Any) -> Worker | None:
    """The run that took `trial`, as recorded (None before it claims it)."""
    value = trial.user_attrs.get(WORKER)
    if value is None:
        return None
    return read_stored(Worker, value, f"trial {trial.number}'s attribute '{WORKER}'")


def _run_alive(run: Worker | None, started: datetime | None) -> bool:
    if run is None:
        return started is None or (datetime.now() - started).total_seconds() < UNCLAIMED_STALE_S
    if run.host != socket.gethostname():
        return True  # another machine's process: nothing here can tell, so trust it
    if run.start is not None:
        return start_time(run.pid) == run.start
    try:
        os.kill(run.pid, 0)
    except (ProcessLookupError, OverflowError):  # OverflowError: no pid is that large
        return False
    except PermissionError:
        pass
    return True


def live_trials(study: Any) -> list[Any]:
    """Finished trials and trials in flight in live runs; RUNNING trials whose run is gone
    are marked FAIL on the way (a killed run cannot do it itself)."""
    from optuna.trial import TrialState

    live = []
    for trial in study.get_trials(deepcopy=False,
                                  states=(TrialState.COMPLETE, TrialState.RUNNING)):
        if trial.state == TrialState.RUNNING and not _run_alive(
                worker_of(trial), trial.datetime_start):
            study.tell(trial.number, state=TrialState.FAIL, skip_if_finished=True)
            continue
        live.append(trial)
    return live


def _published_pending(study: Any, live: list[Any]) -> bool:
    """Whether the published point is in flight or queued for a next trial."""
    from optuna.trial import TrialState

    waiting = study.get_trials(deepcopy=False, states=(TrialState.WAITING,))
    return any(t.user_attrs.get(PUBLISHED) for t in [*live, *waiting])


def _skip_reason(study: Any, trial: Any, budget: int) -> str | None:
    ahead = [t for t in live_trials(study) if t.number < trial.number]
    if len(ahead) >= budget:
        return f"the study already had {budget} trials finished or in flight"
    if trial.user_attrs.get(PUBLISHED) and any(t.user_attrs.get(PUBLISHED) for t in ahead):
        return "the published design point is evaluated by an earlier trial"
    return None


def _check_one_search(study: Any, live: list[Any], search: str) -> None:
    """Two runs of different searches that claimed one new study at the same instant both
    passed the identity check; their trials tell them apart."""
    searches = {worker.search for worker in map(worker_of, live) if worker is not None}
    if searches - {search, None}:
        raise ArchipelagoError(f"study '{study.study_name}' also holds trials of another "
                               "search, started at the same time; choose another --study")


def run_trials(study: Any, objective: Callable[[Any], tuple[float, ...]], budget: int,
               published: dict[str, Any], stop: StopFlag, search: str,
               on_trial: Callable[[int], None] | None = None) -> None:
    """Evaluate trials until the study holds `budget` finished ones, or `stop` is set.
    Trials in flight in other live runs count; this run waits up to PEER_WAIT_S for them
    (and takes over a slot whose trial fails). `search` is the study identity's digest,
    recorded on every trial."""
    from optuna.trial import TrialState

    me, published_done = {**this_run(), "search": search}, False
    waiting_since = None
    while not stop.is_set():
        live = live_trials(study)
        _check_one_search(study, live, search)
        if len(live) >= budget:
            if sum(t.state == TrialState.COMPLETE for t in live) >= budget:
                return
            waiting_since = waiting_since or time.monotonic()
            if time.monotonic() - waiting_since > PEER_WAIT_S:
                return
            time.sleep(PEER_POLL_S)
            continue
        waiting_since = None
        if not published_done:  # checked until done: a peer holding it may die
            published_done = any(t.user_attrs.get(PUBLISHED) and t.state == TrialState.COMPLETE
                                 for t in live)
            if not published_done and not _published_pending(study, live):
                study.enqueue_trial(published, user_attrs={PUBLISHED: True})
        trial = study.ask()
        trial.set_user_attr(WORKER, me)
        reason = _skip_reason(study, trial, budget)
        if reason is not None:
            trial.set_user_attr(SKIPPED, reason)
            study.tell(trial, state=TrialState.FAIL)
            continue
        try:
            values = objective(trial)
        except BaseException:
            study.tell(trial, state=TrialState.FAIL)
            raise
        study.tell(trial, values)
        if on_trial:
            on_trial(1)
