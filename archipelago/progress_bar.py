"""The one look of a long command's progress: a label, a bar, done/total, elapsed and
remaining time, on stderr, gone when it finishes. rich is imported when a bar is made."""

from typing import Any


def progress_bar(console: Any = None) -> Any:
    """A rich Progress in that look, on `console` (default: a stderr console)."""
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
                    console=console or Console(stderr=True), transient=True)
