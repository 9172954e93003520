"""Stopping a search between two steps on SIGINT or SIGTERM, so a batch is persisted whole
or not at all and the run ends with one line giving the study's count."""

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class StopFlag:
    """Set by SIGINT or SIGTERM: the search ends after the step under way."""

    def __init__(self) -> None:
        self.signum: int | None = None

    def set(self, signum: int) -> None:
        self.signum = signum


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
