"""Libraries that log or warn on their way to an exception (torch logs a whole traceback
when it fails to read a .pt2; transformers, onnx, Dask and optuna log and warn about
inputs they dislike) must not print ahead of the one-line error: the CLI keeps their log
records and warnings for the whole command (`libraries_kept`, installed once at its edge),
and a reader of a user's file can keep them for one block (`kept_library_logs`).

Set ARCHIPELAGO_LIBRARY_LOGS=show to let them through when debugging a library."""

import logging
import os
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from archipelago.errors import Notice

# The top-level packages whose log records and warnings are kept off the terminal.
LIBRARIES = ("torch", "sympy", "transformers", "huggingface_hub", "onnx", "onnxruntime",
             "onnxscript", "dask", "distributed", "tornado", "optuna")
SHOW_ENV = "ARCHIPELAGO_LIBRARY_LOGS"


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


def _library(module: str) -> bool:
    return module.partition(".")[0] in LIBRARIES


class _KeptLogger(logging.Logger):
    """A logger whose records, when it or its package is a library's, go to `kept` instead
    of any handler: a library that adds its own handler later (transformers and optuna do
    on first use, Dask on import) still prints nothing."""

    kept: list[logging.LogRecord] | None = None

    def callHandlers(self, record: logging.LogRecord) -> None:
        if _KeptLogger.kept is not None and _library(record.name):
            _KeptLogger.kept.append(record)
        else:
            super().callHandlers(record)


@contextmanager
def libraries_kept() -> Iterator[list[Any]]:
    """For the whole block, every library logger's records and every warning but the
    project's own notices are kept in the yielded list, not shown: a warning torch's C++
    code raises names no library frame, only the Python line that called it, so what is
    not a Notice is taken for a library's (numpy's about overflowing input included).
    Loggers made before it are switched too."""
    if os.environ.get(SHOW_ENV) == "show" or _KeptLogger.kept is not None:
        yield []
        return
    kept: list[Any] = []
    before = logging.getLoggerClass()
    switched = [logger for name, logger in logging.root.manager.loggerDict.items()
                if _library(name) and type(logger) is logging.Logger]
    for logger in switched:
        logger.__class__ = _KeptLogger
    logging.setLoggerClass(_KeptLogger)
    _KeptLogger.kept = kept
    show = warnings.showwarning

    def keep_or_show(message: Warning | str, category: type[Warning], filename: str,
                     *args: Any, **kwargs: Any) -> None:
        if issubclass(category, Notice):
            show(message, category, filename, *args, **kwargs)
        else:
            kept.append(message)

    warnings.showwarning = keep_or_show
    try:
        yield kept
    finally:
        warnings.showwarning = show
        _KeptLogger.kept = None
        logging.setLoggerClass(before)
        for logger in switched:
            logger.__class__ = logging.Logger
