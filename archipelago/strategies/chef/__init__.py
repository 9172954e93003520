"""CHEF (seeds/004): MMMT layer DAGs on heterogeneous FPGA clusters, and its baselines.

    deployment  accelerators on FPGAs and banks (Eq. 1's resources)
    simulate    cost tables of a deployment; the schedule of a mapping (§VI)
    a2f         CHEF-A2F: the ILP of Eq. (2) and idle-aware re-deployment (§IV)
    m2a         CHEF-M2A: list mapping with the DRAM budget, data-locality re-mapping (§V)
    exact       exhaustive deployment and mapping for small DAGs (Tables VI, VII)
    h2h         the H2H baseline (fixed accelerators, host memory, four steps)
    plan        the scheduled-DAG plan kind and the engine configuration
    estimate    the estimator (the schedule the search simulated)
    report      estimates and emulations as JSON or tables
    gantt       `--gantt FILE`'s writer (plotly, imported only there)
    page        the charts of `archi report` (plotly, imported only there)
"""

import time
from dataclasses import dataclass
from pathlib import Path

from archipelago.errors import ArchipelagoError
from archipelago.hardware.machines import Cluster
from archipelago.models.dag import ModelDAG
from archipelago.output_file import check_output_file
from archipelago.strategies.chef.plan import ChefConfig, ScheduledDAG
from archipelago.strategies.chef.planners import plan_chef, plan_exact, plan_h2h
from archipelago.strategies.options import WorkloadOption, WorkloadType
from archipelago.strategies.registry import PlanKind, register, register_kind

__all__ = ["ChefConfig", "ScheduledDAG"]


@dataclass(frozen=True)
class DagRun:
    """One inference of the DAG; `gantt` is where to write its Gantt chart (HTML)."""

    gantt: str | None = None


def _parse(gantt: str | None = None) -> DagRun:
    """The Gantt target is checked here, before the search runs: an HTML name in a
    writable directory, never an existing file, never the empty string."""
    if gantt is not None:
        if not gantt.strip():
            raise ArchipelagoError(f"--gantt {gantt!r} is an empty name; give an HTML file "
                                   "name")
        check_output_file(Path(gantt), "--gantt", None, (".html", ".htm"))
    return DagRun(gantt)


SCHEDULED_DAG = WorkloadType("scheduled DAG", (
    WorkloadOption("bandwidth", "GB/s between every pair of FPGAs (presets 0.125, 3, 15)",
                   "the cluster's", role="plan"),
    WorkloadOption("gantt", "write the schedule's Gantt chart to this HTML file", "",
                   role="output", commands=("plan", "report"),
                   writer="archipelago.strategies.chef.gantt:gantt_output"),
), _parse)

register_kind(PlanKind(
    "scheduled-dag", SCHEDULED_DAG,
    estimator="archipelago.strategies.chef.estimate:estimate",
    report="archipelago.strategies.chef.report",
    emulator="archipelago.strategies.chef.emulate:emulate_plan",
    page="archipelago.strategies.chef.page:page",
))


class _SlowProgress:
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


def _with_progress(planner, what: str):
    def run(dag: ModelDAG, cluster: Cluster, config: ChefConfig, workload: object):
        progress = _SlowProgress(f"{what} {dag.name}")
        try:
            return planner(dag, cluster, config, progress)
        finally:
            progress.close()

    return run


# Without --cluster, the U280 + U250 cluster of seeds/004 §VII-B.
_ON = {"models": ModelDAG, "default_cluster": "hacc"}
register("chef", "MMMT layer DAGs on heterogeneous FPGAs: IPs deployed by ILP + idle-aware "
         "re-deployment, layers mapped communication- and DRAM-aware (seeds/004)",
         "scheduled-dag", ChefConfig, **_ON)(_with_progress(plan_chef, "CHEF search:"))
register("h2h", "baseline of seeds/004: one fixed accelerator per FPGA, weights and "
         "features in host memory, H2H's four mapping steps", "scheduled-dag", ChefConfig,
         **_ON)(_with_progress(plan_h2h, "H2H mapping:"))
register("chef-exact", "exact optimum of small layer DAGs (<= ~10 layers): every "
         "deployment, every mapping (seeds/004 Tables VI, VII)", "scheduled-dag", ChefConfig,
         **_ON)(_with_progress(plan_exact, "exact search:"))
