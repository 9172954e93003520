"""Ending the `archi` process without the interpreter's module teardown: once torch,
transformers or onnx is loaded, clearing every module and collecting their cycles costs
0.6-0.9 s of CPU after the command's output is complete (issue 36; `python -m
benchmarks.bench_exit` measures it). What a user would lose to `os._exit` is kept: exit
handlers run (logging, Dask, temporary directories' finalizers), the standard streams are
flushed, and a process with another non-daemon thread still running, or an exit that is
not a plain status, ends the ordinary way."""

import atexit
import os
import sys
import threading
from collections.abc import Callable
from typing import NoReturn

# Modules whose presence makes the teardown cost worth skipping; without them it is 40-60 ms
# of CPU (measured after importing archipelago.cli and .api), and the ordinary exit is kept.
_HEAVY = ("torch", "transformers", "onnx")


def run_then_exit(command: Callable[[], object]) -> NoReturn:
    """Run `command` (a CLI that ends by raising SystemExit, as click's does) and end the
    process with its status."""
    try:
        command()
        status: object = 0
    except SystemExit as done:
        status = 0 if done.code is None else done.code
    if not isinstance(status, int) or not _heavy_loaded() or _threads_running():
        sys.exit(status)
    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:  # a closed pipe: let the interpreter say so, as it would have
        sys.exit(status)
    os._exit(status)


def _heavy_loaded() -> bool:
    return any(name in sys.modules for name in _HEAVY)


def _threads_running() -> bool:
    """Non-daemon threads besides this one, which the ordinary exit waits for."""
    return any(t is not threading.current_thread() and not t.daemon and t.is_alive()
               for t in threading.enumerate())
