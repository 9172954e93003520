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
_STOP = object()  # put in the completion queue by a signal


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
    (`workers` is then the cluster's business and ignored)."""
    from distributed import Client, LocalCluster

    if scheduler is None:
        count = (os.cpu_count() or 1) if workers is None else workers
        if count < 1:
            raise ArchipelagoError(f"--workers {count}: give at least 1")
        # No dashboard; the scheduler's HTTP routes (health, metrics) on a free local port,
        # not on 8787, which concurrent runs would contend for.
        quiet = {"dashboard": False, "dashboard_address": "127.0.0.1:0"}
        with LocalCluster(n_workers=count, threads_per_worker=1, processes=True,
                          dashboard_address=None, scheduler_kwargs=quiet,
                          silence_logs=logging.ERROR) as cluster, \
                Client(cluster) as client:
            yield client
        return
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


def stream(client: "Client", fn: Callable[[Any], Any], tasks: Mapping[str, Any],
           on_done: Callable[[str, Any], None], progress: str | None = None) -> None:
    """Run `fn(task)` for every task on the cluster and call `on_done(key, result)` here as
    each finishes, once per key. `fn` must be a module-level function (it is pickled by
    name). A worker killed mid-task is survived: Dask runs the task again elsewhere. SIGINT
    or SIGTERM stops the run as Interrupted, after the `on_done` under way returns, with
    every result that finished before it already handed over; the rest are cancelled."""
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
        with _signals_into(finished), _bar(progress, len(keys)) as advance:
            while len(handed) < len(keys):
                item = finished.get()
                if isinstance(item, int):
                    name = signal.Signals(item).name
                    raise Interrupted(f"interrupted by {name} with {len(handed)} of "
                                      f"{len(keys)} tasks finished", item)
                key = owner[item.key]
                if key in handed:
                    continue
                on_done(key, _result(item, key))
                handed.add(key)
                advance()
    finally:
        client.cancel([future for future in futures if not future.done()])


def _result(future: "Future", key: str) -> Any:
    """The task's result; its own exception as is, except Dask giving up on a task whose
    worker processes kept dying under it (a crash, or memory exhausted), which is one line
    naming it."""
    import dask
    from distributed import KilledWorker

    try:
        return future.result()
    except KilledWorker:
        times = dask.config.get("distributed.scheduler.allowed-failures") + 1
        raise ArchipelagoError(f"the worker processes running task '{key}' died {times} "
                               "times; stopped") from None


@contextmanager
def _signals_into(finished: "queue.SimpleQueue[Any]") -> Iterator[None]:
    """While inside, SIGINT and SIGTERM put their number into `finished` instead of raising
    wherever the main thread happens to be: the loop reading it stops between two results,
    never inside `on_done` (a result half persisted). Signals reach only the main thread,
    so elsewhere nothing is installed."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {number: signal.signal(number, lambda signum, _frame: finished.put(signum))
                for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
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
