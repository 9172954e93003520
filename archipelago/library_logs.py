"""Libraries that log or warn on their way to an exception (torch logs a whole traceback
when it fails to read a .pt2) must not print ahead of the one-line error: while a user's
file is read, their log records and warnings are kept, not shown."""

import logging
import warnings
from collections.abc import Iterator
from contextlib import contextmanager


class _Keep(logging.Handler):
    """Holds the records a library logged, for a caller that wants to look at them."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextmanager
def kept_library_logs(*loggers: str) -> Iterator[list[logging.LogRecord]]:
    """Within the block, what the named loggers (and their children) log is collected in
    the yielded list instead of reaching their handlers or the terminal, and warnings are
    recorded instead of shown; both are restored after."""
    keep = _Keep()
    saved = []
    for name in loggers:
        logger = logging.getLogger(name)
        saved.append((logger, logger.handlers[:], logger.propagate))
        logger.handlers[:] = [keep]
        logger.propagate = False
    try:
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            yield keep.records
    finally:
        for logger, handlers, propagate in saved:
            logger.handlers[:] = handlers
            logger.propagate = propagate
