"""Run one hostile case through the real code and name its outcome.

Allowed: a result whose figures are all finite and non-negative (`sane`), or the project's
own one-line error (`error`). Anything else is a finding: an exception that is not an
ArchipelagoError (`uncaught`), a case that runs past the time limit (`hang`), or a result with
a negative or non-finite number in it (`insane`)."""

import math
import random
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from archipelago.errors import ArchipelagoError

SANE, ERROR, UNCAUGHT, HANG, INSANE = "sane", "error", "uncaught", "hang", "insane"
OUTCOMES = (SANE, ERROR, UNCAUGHT, HANG, INSANE)
ALLOWED = {SANE, ERROR}
HANG_S = 5.0  # a plan of any input here takes well under a second


@contextmanager
def random_kept() -> Iterator[None]:
    """The global random's state put back after the block: hypothesis warns of a strategy
    that moves it, and a library's first import or Dask's client draws from it."""
    state = random.getstate()
    try:
        yield
    finally:
        random.setstate(state)


class _Hang(BaseException):
    """Raised by the alarm; a BaseException so no `except Exception` in the code swallows it."""


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    def alarm(signum: int, frame: Any) -> None:
        raise _Hang

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds, 0.5)  # again, if one is swallowed
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def insane_figures(value: Any, path: str = "") -> list[str]:
    """Where a result holds a negative or non-finite number (walked iteratively)."""
    found, stack = [], [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, dict):
            stack.extend((v, f"{where}.{k}") for k, v in item.items())
        elif isinstance(item, list | tuple):
            stack.extend((v, f"{where}[{i}]") for i, v in enumerate(item))
        elif (isinstance(item, int | float) and not isinstance(item, bool)
              and (not math.isfinite(item) or item < 0)):
            found.append(f"{where} = {item}")
    return found


def classify(case: Callable[[], Any], hang_s: float = HANG_S) -> tuple[str, str]:
    """(outcome, detail) of running `case`; `case` returns the result's figures (a dict),
    or None when it has none to check."""
    try:
        with time_limit(hang_s):
            figures = case()
    except _Hang:
        return HANG, f"ran past {hang_s} s"
    except ArchipelagoError as err:
        message = str(err)
        if "\n" in message or not message.strip():
            return UNCAUGHT, f"error message not one line: {message!r}"
        return ERROR, message
    except Exception as err:  # the finding itself: any escape is recorded, not hidden
        return UNCAUGHT, f"{type(err).__name__}: {err}"[:300]
    bad = insane_figures(figures) if figures is not None else []
    return (INSANE, "; ".join(bad[:3])) if bad else (SANE, "")
