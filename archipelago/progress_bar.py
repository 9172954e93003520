"""The one look of a long command's progress: a label, a bar, done/total, elapsed and
remaining time, on stderr, gone when it finishes (a batch of runs, a search); and a search's
bar that shows only once it has run a second. rich is imported when a bar is made."""

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


def progress_bar(console: Any = None, shown: bool = True) -> Any:
    """A rich Progress in that look, on `console` (default: a stderr console); not `shown`,
    it draws nothing (off a terminal, where rich would leave a blank line)."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), TimeRemainingColumn(),
                    console=console or Console(stderr=True), transient=True,
                    disable=not shown)


class SlowProgress:
    """A progress bar on stderr, shown only once a search has run for a second, and only on
    a terminal: elsewhere rich leaves a blank line behind it, before the result or error.
    `progress(total=N, what=...)` starts a stage of N steps (A2F's re-deployment step: its
    removals), shown with a count and the time left; `progress()` advances it."""

    def __init__(self, what: str) -> None:
        self.what, self.started, self.bar, self.task = what, time.perf_counter(), None, None
        self.stage: tuple[int | None, str] = (None, "")
        self.done = 0  # steps of the stage, counted before the bar shows too

    def __call__(self, total: int | None = None, what: str | None = None) -> None:
        if what is not None:
            self.stage, self.done = (total, what), 0
            if self.bar is not None:
                self.bar.reset(self.task, total=total, description=self._description())
        if self.bar is None and time.perf_counter() - self.started > 1.0:
            from rich.console import Console

            console = Console(stderr=True)
            if not console.is_terminal:
                self.started = float("inf")  # never shown
                return
            self.bar = progress_bar(console)
            self.bar.start()
            self.task = self.bar.add_task(self._description(), total=self.stage[0],
                                          completed=self.done)
        if what is None:
            self.done += 1
            if self.bar is not None:
                self.bar.advance(self.task)

    def _description(self) -> str:
        return f"{self.what}, {self.stage[1]}" if self.stage[1] else self.what

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


@contextmanager
def slow_progress(what: str) -> Iterator[SlowProgress]:
    """A SlowProgress labelled `what`, closed when the search ends or fails."""
    progress = SlowProgress(what)
    try:
        yield progress
    finally:
        progress.close()
