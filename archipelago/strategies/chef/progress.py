"""CHEF's searches run for seconds to minutes: a progress bar for them, shown on a terminal
only, and the wrapper that runs a planner behind one."""

import time
from collections.abc import Callable

from archipelago.hardware.machines import Cluster
from archipelago.models.dag import ModelDAG
from archipelago.strategies.chef.plan import ChefConfig, ScheduledDAG


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

            from archipelago.progress_bar import progress_bar

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


def with_progress(planner: Callable[..., ScheduledDAG], what: str
                  ) -> Callable[[ModelDAG, Cluster, ChefConfig], ScheduledDAG]:
    """`planner(dag, cluster, config, progress)` as the registry calls it, behind a bar."""

    def run(dag: ModelDAG, cluster: Cluster, config: ChefConfig) -> ScheduledDAG:
        progress = SlowProgress(f"{what} {dag.name}")
        try:
            return planner(dag, cluster, config, progress)
        finally:
            progress.close()

    return run
