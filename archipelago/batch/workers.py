"""Tasks on Dask's distributed scheduler: a local cluster of processes by default, or a running
cluster across machines (`--scheduler tcp://HOST:PORT`); each result comes back to the calling
process as soon as it finishes, so the caller can persist it before the next one arrives.
Dask is imported inside the functions: `import archipelago` stays free of it."""

import logging
import os
import queue
import re
import signal
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from archipelago.errors import ArchipelagoError, Interrupted

if TYPE_CHECKING:
    from distributed import Client, Future

# A scheduler on the network answers in milliseconds; five seconds covers a slow link
# without leaving the user staring at a mistyped address.
CONNECT_TIMEOUT_S = 5.0
_ADDRESS = re.compile(r"(tcp|tls)://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(\d{1,5})")


def check_scheduler(address: str) -> str:
    """`address` if it reads `tcp://HOST:PORT` (or `tls://`), else one line naming it."""
    match = _ADDRESS.fullmatch(address)
    if match is None or not 0 < int(match.group(3)) < 65536:
        raise ArchipelagoError(f"--scheduler '{address[:80]}' is not a scheduler address; "
                               "give tcp://HOST:PORT, e.g. tcp://10.0.0.5:8786")
    return address


@contextmanager
def dask_client(scheduler: str | None, workers: int | None,
                connect_timeout_s: float = CONNECT_TIMEOUT_S) -> Iterator["Client"]:
    """A Dask client, closed on leaving: with `scheduler` None, of a local cluster of
    `workers` processes (default one per core) with one thread each, since the tasks are
    pure-Python estimates that hold the GIL; else of the running scheduler at `scheduler`
    (`workers` is then the cluster's business and ignored). Dask's own log lines are kept
    off the terminal: what goes wrong reaches the caller as an exception."""
    from distributed.utils import silence_logging_cmgr

    with silence_logging_cmgr(logging.CRITICAL):
        if scheduler is None:
            with _local_client(workers) as client:
                yield client
        else:
            with _remote_client(scheduler, connect_timeout_s) as client:
                yield client


@contextmanager
def _local_client(workers: int | None) -> Iterator["Client"]:
    from distributed import Client, LocalCluster

    count = (os.cpu_count() or 1) if workers is None else workers
    if count < 1:
        raise ArchipelagoError(f"--workers {count}: give at least 1")
    # No dashboard; the scheduler's HTTP routes (health, metrics) on a free local port, not
    # on 8787, which concurrent runs would contend for.
    quiet = {"dashboard": False, "dashboard_address": "127.0.0.1:0"}
    with LocalCluster(n_workers=count, threads_per_worker=1, processes=True,
                      dashboard_address=None, scheduler_kwargs=quiet,
                      silence_logs=logging.CRITICAL, preload=[__name__]) as cluster, \
            Client(cluster) as client:
        yield client


@contextmanager
def _remote_client(scheduler: str, connect_timeout_s: float) -> Iterator["Client"]:
    from distributed import Client

    check_scheduler(scheduler)
    try:
        client = Client(scheduler, timeout=connect_timeout_s)
    except (OSError, TimeoutError):  # refused, unknown host, silent: dask retries, then this
        raise ArchipelagoError(f"--scheduler {scheduler}: no Dask scheduler answered within "
                               f"{connect_timeout_s:g} s") from None
    except Exception as err:  # something else listens there: dask reads, say, an HTTP
        # reply as a frame length and fails with MemoryError or ValueError
        raise ArchipelagoError(f"--scheduler {scheduler}: what answered there is not a Dask "
                               f"scheduler ({type(err).__name__})") from None
    with client:
        yield client


def dask_setup(worker: object) -> None:
    """Run by each local worker process as it starts (a Dask preload of this module): a
    Ctrl-C reaches the terminal's whole process group, workers included, where each would
    print a traceback; the parent alone stops the run and closes its workers."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def stream(client: "Client", fn: Callable[[Any], Any], tasks: Mapping[str, Any],
           on_done: Callable[[str, Any], None], progress: str | None = None) -> None:
    """Run `fn(task)` for every task on the cluster and call `on_done(key, result)` here as
    each finishes, once per key. `fn` must be a module-level function (it is pickled by
    name). A worker killed mid-task is survived: Dask runs the task again elsewhere. SIGINT
    or SIGTERM stops the run as Interrupted once the `on_done` under way returns, so every
    result handed over is whole; the tasks not handed over are cancelled, left to a rerun
    (which a journal of the handed ones makes resume where this one stopped)."""
    if not tasks:
        return
    keys = list(tasks)
    futures: list[Future] = client.map(fn, [tasks[key] for key in keys], pure=False)
    owner = dict(zip((future.key for future in futures), keys, strict=True))
    finished: queue.SimpleQueue[Any] = queue.SimpleQueue()  # put() is signal-safe
    for future in futures:
        future.add_done_callback(finished.put)
    handed: set[str] = set()
    try:
        with _signals_into(finished) as heard, _bar(progress, len(keys)) as advance:
            while len(handed) < len(keys):
                item = finished.get()
                if heard:  # before results queued ahead of the signal: stop promptly
                    name = signal.Signals(heard[0]).name
                    raise Interrupted(f"interrupted by {name} with {len(handed)} of "
                                      f"{len(keys)} tasks finished", heard[0])
                key = owner[item.key]
                if key in handed:
                    continue
                on_done(key, _result(item, key, f"{len(handed)} of {len(keys)}"))
                handed.add(key)
                advance()
    finally:
        client.cancel([future for future in futures if not future.done()])


def _result(future: "Future", key: str, finished: str) -> Any:
    """The task's result; its own exception as is, except Dask giving up on it (its worker
    processes kept dying under it: a crash, or memory exhausted; or the scheduler went
    away), which is one line naming it and how many tasks had `finished`."""
    from concurrent.futures import CancelledError

    import dask
    from distributed import KilledWorker

    try:
        return future.result()
    except KilledWorker:
        times = dask.config.get("distributed.scheduler.allowed-failures") + 1
        raise ArchipelagoError(f"the worker processes running task '{key}' died {times} "
                               f"time{'s' * (times > 1)}; stopped with {finished} tasks "
                               "finished") from None
    except CancelledError as err:  # the connection to the scheduler was lost, mostly
        reason = getattr(err, "reason", None) or "cancelled"
        raise ArchipelagoError(f"Dask dropped task '{key}' ({reason}); stopped with "
                               f"{finished} tasks finished") from None


@contextmanager
def _signals_into(finished: "queue.SimpleQueue[Any]") -> Iterator[list[int]]:
    """While inside, SIGINT and SIGTERM put their number into `finished` instead of raising
    wherever the main thread happens to be: the loop reading it stops between two results,
    never inside `on_done` (a result half persisted). A second signal stops at once (a
    journal cuts off a line torn that way). Signals reach only the main thread, so
    elsewhere nothing is installed. Yields the signals heard."""
    heard: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield heard
        return

    def stop(signum: int, _frame: object) -> None:
        if heard:  # a second signal: the user wants out now, even mid-`on_done`
            name = signal.Signals(signum).name
            raise Interrupted(f"interrupted by {name} again; stopped at once", signum)
        heard.append(signum)
        finished.put(signum)  # wakes the loop waiting for the next result

    previous = {number: signal.signal(number, stop) for number in (signal.SIGINT,
                                                                     signal.SIGTERM)}
    try:
        yield heard
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


@contextmanager
def _bar(label: str | None, total: int) -> Iterator[Callable[[], None]]:
    """A progress bar on stderr labelled `label` (none when None); yields `advance`."""
    if label is None:
        yield lambda: None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), TimeRemainingColumn(),
                  console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(label, total=total)
        yield lambda: bar.advance(task)
