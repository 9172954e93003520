"""Where a batch of tasks runs, chosen at the edge: in this process by default, on Dask only
when asked (`--workers N` local processes, or `--scheduler tcp://HOST:PORT`). Both hand each
result to the caller's `on_done` as it finishes and stop on SIGINT or SIGTERM between two
results, so a journal written through either is the same and resumes the same way.

In process is the default because Dask's local cluster costs seconds of CPU to start and
stop (about 9 s for the default `archi compare`, whose 200 estimates take 0.3-0.4 s in one
process: benchmarks/bench_compare.py), more than the estimates it would spread."""

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from queue import SimpleQueue
from typing import Any, Protocol

from archipelago.batch.workers import dask_client, progress_steps, signals_into, stop_if, stream


class Runner(Protocol):
    """Runs `fn(task)` for every task and calls `on_done(key, result)` here as each
    finishes; a signal stops it as Interrupted once the `on_done` under way returns."""

    def __call__(self, fn: Callable[[Any], Any], tasks: Mapping[str, Any],
                 on_done: Callable[[str, Any], None], progress: str | None = None) -> None: ...


def in_process(workers: int | None, scheduler: str | None) -> bool:
    """Whether `--workers`/`--scheduler` as given ask for this process: neither given, or
    `--workers 0`."""
    return scheduler is None and not workers


def run_here(fn: Callable[[Any], Any], tasks: Mapping[str, Any],
             on_done: Callable[[str, Any], None], progress: str | None = None) -> None:
    """The tasks one after another in this process, with the Dask path's stopping rule."""
    with signals_into(SimpleQueue()) as heard, progress_steps(progress, len(tasks)) as advance:
        for handed, (key, task) in enumerate(tasks.items()):
            on_done(key, fn(task))
            advance()
            stop_if(heard, handed + 1, len(tasks))


@contextmanager
def runner(workers: int | None, scheduler: str | None) -> Iterator[Runner]:
    """This process's loop, or a Dask client's `stream` (the cluster started on entering
    and closed on leaving)."""
    if in_process(workers, scheduler):
        yield run_here
        return
    with dask_client(scheduler, workers) as client:

        def on_dask(fn: Callable[[Any], Any], tasks: Mapping[str, Any],
                    on_done: Callable[[str, Any], None], progress: str | None = None) -> None:
            stream(client, fn, tasks, on_done, progress)

        yield on_dask
