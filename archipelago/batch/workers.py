"""Tasks on Dask's distributed scheduler: a local cluster of processes by default, or a running
cluster across machines (`--scheduler tcp://HOST:PORT`); each result comes back to the calling
process as soon as it finishes, so the caller can persist it before the next one arrives.
Dask is imported inside the functions: `import archipelago` stays free of it."""

import asyncio
import logging
import os
import queue
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from archipelago.errors import ArchipelagoError, Interrupted, elide

if TYPE_CHECKING:
    from distributed import Client, Future

# A scheduler on the network answers in milliseconds; five seconds covers a slow link
# without leaving the user staring at a mistyped address. It bounds the whole handshake:
# the connection and the scheduler's first reply.
CONNECT_TIMEOUT_S = 5.0
# Local worker processes per core this process may use, at most: each runs one pure-Python
# task at a time, so past one per core they only contend; four leaves room for a user who
# oversubscribes on purpose, while 1000 on two cores (70-80 processes starting, no answer
# in a minute: issue 39 point 4) is refused.
WORKERS_PER_CORE = 4
# A host name is at most 253 characters (RFC 1035 §2.3.4, without the trailing dot), an IPv6
# address at most 45 (with an IPv4 tail); a longer host is a typo, not an address.
_ADDRESS = re.compile(r"(tcp|tls)://(\[[0-9A-Fa-f:.]{2,45}\]|[A-Za-z0-9_.-]{1,253}):(\d{1,5})")


def check_scheduler(address: str) -> str:
    """`address` if it reads `tcp://HOST:PORT` (or `tls://HOST:PORT`, its certificates
    from Dask's own configuration), else one line naming it."""
    match = _ADDRESS.fullmatch(address)
    if match is None or not 0 < int(match.group(3)) < 65536:
        raise ArchipelagoError(f"--scheduler '{elide(address)}' is not a scheduler address; "
                               "give tcp://HOST:PORT, e.g. tcp://10.0.0.5:8786")
    return address


def usable_cores() -> int:
    """The cores this process may run on (a container's or taskset's share, not the
    host's count)."""
    return len(os.sched_getaffinity(0))


def check_workers(count: int, option: str = "--workers", low: int = 1) -> int:
    """`count` if this machine can run that many local worker processes (`low` ..
    WORKERS_PER_CORE per usable core), else one line naming the limit and why."""
    cores = usable_cores()
    limit = WORKERS_PER_CORE * cores
    if not low <= count <= limit:
        shown = str(count) if len(str(count)) <= 24 else f"a {len(str(count))}-digit number"
        raise ArchipelagoError(f"{option} {shown}: give {low} to {limit} ({WORKERS_PER_CORE} per "
                               f"core this process may use, {cores} here; more processes "
                               "only contend for the cores)")
    return count


@contextmanager
def dask_client(scheduler: str | None, workers: int | None,
                connect_timeout_s: float = CONNECT_TIMEOUT_S) -> Iterator["Client"]:
    """A Dask client, closed on leaving: with `scheduler` None, of a local cluster of
    `workers` processes (default one per core it may use) with one thread each, since the
    tasks are pure-Python estimates that hold the GIL; else of the running scheduler at
    `scheduler` (`workers` is then the cluster's business and ignored). Dask's own log
    lines are kept off the terminal: what goes wrong reaches the caller as an exception."""
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

    count = usable_cores() if workers is None else check_workers(workers)
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
    started = time.monotonic()
    handshake(scheduler, connect_timeout_s)
    left = max(connect_timeout_s - (time.monotonic() - started), 0.1)
    try:
        client = Client(scheduler, timeout=left)
    except Exception as err:  # it answered the probe, then stopped: gone, or not Dask
        raise ArchipelagoError(f"--scheduler {elide(scheduler)}: the scheduler answered, "
                               f"then the client could not connect ({type(err).__name__})"
                               ) from None
    with client:
        yield client


def handshake(address: str, timeout_s: float) -> None:
    """Connect to `address` and ask the scheduler who it is, all within `timeout_s`
    (Dask's own connect timeout stops at the TCP connection, so a port that accepts and
    never speaks would hold the client forever); else one line naming the address and the
    time waited."""
    from distributed.comm import connect
    from distributed.security import Security

    async def ask() -> object:
        comm = await connect(address, timeout=timeout_s,
                             **Security().get_connection_args("client"))
        try:
            await comm.write({"op": "identity", "reply": True})
            return await comm.read()
        finally:
            comm.abort()

    started = time.monotonic()
    shown = elide(address)
    try:
        reply = asyncio.run(asyncio.wait_for(ask(), timeout_s))
    except (OSError, TimeoutError):  # refused, unknown host, silent
        raise ArchipelagoError(f"--scheduler {shown}: no Dask scheduler answered within "
                               f"{timeout_s:g} s (waited "
                               f"{time.monotonic() - started:.1f} s)") from None
    except Exception as err:  # something else listens there: dask reads, say, an HTTP
        # reply as a frame length and fails with MemoryError or ValueError
        raise ArchipelagoError(f"--scheduler {shown}: what answered there is not a Dask "
                               f"scheduler ({type(err).__name__})") from None
    if not isinstance(reply, dict) or reply.get("type") != "Scheduler":
        raise ArchipelagoError(f"--scheduler {shown}: what answered there is not a Dask "
                               "scheduler (its reply to 'identity' names no scheduler)")


def dask_setup(worker: object) -> None:
    """Run by each local worker process as it starts (a Dask preload of this module): a
    Ctrl-C reaches the terminal's whole process group, workers included, where each would
    print a traceback; the parent alone stops the run and closes its workers."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def stream(client: "Client", fn: Callable[[Any], Any], tasks: Mapping[str, Any],
           on_done: Callable[[str, Any], None], progress: str | None = None,
           chunk: int | None = None) -> None:
    """Run `fn(task)` for every task on the cluster and call `on_done(key, result)` here as
    each finishes, once per key. `fn` must be a module-level function (it is pickled by
    name). Tasks travel in chunks of `chunk` (default: at most CHUNK_MAX, and small enough
    to give every worker thread CHUNKS_PER_THREAD of them), since Dask spends about a
    millisecond on each of its tasks, as long as a whole plan and estimate. A worker killed
    mid-task is survived: Dask runs its chunk again elsewhere. SIGINT or SIGTERM stops the
    run as Interrupted once the `on_done` under way returns, so every result handed over is
    whole; the tasks not handed over are cancelled, left to a rerun (which a journal of the
    handed ones makes resume where this one stopped)."""
    if chunk is not None and chunk < 1:
        raise ValueError(f"chunk must be at least 1, not {chunk}")
    if not tasks:
        return
    keys = list(tasks)
    size = chunk or _chunk_size(len(keys), sum(client.nthreads().values()))
    groups = [keys[start:start + size] for start in range(0, len(keys), size)]
    futures: list[Future] = [client.submit(_run_chunk, fn, [tasks[key] for key in group],
                                           pure=False) for group in groups]
    owner = dict(zip((future.key for future in futures), groups, strict=True))
    finished: queue.SimpleQueue[Any] = queue.SimpleQueue()  # put() is signal-safe
    for future in futures:
        future.add_done_callback(finished.put)
    handed: set[str] = set()
    try:
        with signals_into(finished) as heard, progress_steps(progress, len(keys)) as advance:
            while len(handed) < len(keys):
                item = finished.get()
                stop_if(heard, len(handed), len(keys))  # before results queued ahead of it
                if isinstance(item, int) or owner[item.key][0] in handed:
                    continue
                group = owner[item.key]
                for key, result in zip(group, _results(item, group, len(handed), len(keys)),
                                       strict=True):
                    on_done(key, result)
                    handed.add(key)
                    advance()
                    stop_if(heard, len(handed), len(keys))
    finally:
        client.cancel([future for future in futures if not future.done()])


# Tasks per chunk at most: a chunk of plan-and-estimate tasks (~1 ms each) then runs ~50 ms,
# so Dask's ~1 ms per chunk costs a few per cent, and a stop or a killed worker loses little.
CHUNK_MAX = 48
CHUNKS_PER_THREAD = 4  # chunks per worker thread at least, so uneven ones even out


def stop_if(heard: list[int], handed: int, total: int) -> None:
    """Interrupted, if a signal was heard."""
    if heard:
        raise Interrupted(f"interrupted by {signal.Signals(heard[0]).name} with {handed} of "
                          f"{total} tasks finished", heard[0])


def _chunk_size(tasks: int, threads: int) -> int:
    return max(1, min(CHUNK_MAX, -(-tasks // (CHUNKS_PER_THREAD * max(threads, 1)))))


def _run_chunk(fn: Callable[[Any], Any], tasks: list[Any]) -> list[Any]:
    """On a worker: `fn` over one chunk of tasks."""
    return [fn(task) for task in tasks]


def _results(future: "Future", group: list[str], handed: int, total: int) -> list[Any]:
    """The chunk's results; a task's own exception as is, except Dask giving up on the chunk
    (its worker processes kept dying under it: a crash, or memory exhausted; or the
    scheduler went away), which is one line naming it and how many tasks were handed over."""
    from concurrent.futures import CancelledError

    import dask
    from distributed import KilledWorker

    named = f"task '{group[0]}'" + (f" (or the {len(group) - 1} run with it)"
                                     if len(group) > 1 else "")
    finished = f"{handed} of {total}"
    try:
        return future.result()
    except KilledWorker:
        times = dask.config.get("distributed.scheduler.allowed-failures") + 1
        raise ArchipelagoError(f"the worker processes running {named} died {times} "
                               f"time{'s' * (times > 1)}; stopped with {finished} tasks "
                               "finished") from None
    except CancelledError as err:  # the connection to the scheduler was lost, mostly
        reason = getattr(err, "reason", None) or "cancelled"
        raise ArchipelagoError(f"Dask dropped {named} ({reason}); stopped with "
                               f"{finished} tasks finished") from None


@contextmanager
def signals_into(finished: "queue.SimpleQueue[Any]") -> Iterator[list[int]]:
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
def progress_steps(label: str | None, total: int) -> Iterator[Callable[[], None]]:
    """A progress bar on stderr labelled `label` (none when None); yields `advance`."""
    if label is None:
        yield lambda: None
        return
    from archipelago.progress_bar import progress_bar

    with progress_bar() as bar:
        task = bar.add_task(label, total=total)
        yield lambda: bar.advance(task)
