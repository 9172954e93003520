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
    hls         `archi build`: one hls4ml project per FPGA and a deployment manifest

This module is the kind's registration; the planners (planners.py, run behind progress.py's
bar) and the engine config (plan.py) are named as paths, imported when a strategy plans.
"""

from dataclasses import dataclass
from pathlib import Path

from archipelago.errors import ArchipelagoError
from archipelago.output_file import check_output_file
from archipelago.strategies.options import WorkloadOption, WorkloadType
from archipelago.strategies.registry import PlanKind, register, register_kind


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
    WorkloadOption("bandwidth", "overrides the cluster's links: GB/s between every pair of "
                   "FPGAs (presets 0.125, 3, 15)", "the cluster's", role="cluster",
                   writer="archipelago.strategies.chef.plan:bandwidth_override"),
    WorkloadOption("gantt", "write the schedule's Gantt chart to this HTML file", "",
                   role="output", commands=("plan", "report"),
                   writer="archipelago.strategies.chef.gantt:gantt_output"),
    WorkloadOption("hls_precision", "the hls4ml projects' fixed-point type, ap_fixed<W,I>",
                   "ap_fixed<16,6>", role="plan", commands=("build",)),
), _parse)

register_kind(PlanKind(
    "scheduled-dag", SCHEDULED_DAG,
    estimator="archipelago.strategies.chef.estimate:estimate",
    report="archipelago.strategies.chef.report",
    emulator="archipelago.strategies.chef.emulate:emulate_plan",
    writers="archipelago.strategies.chef.emit:write_build",
    page="archipelago.strategies.chef.page:page",
    floors="archipelago.strategies.chef.floors:floors",
))


_PLANNERS = "archipelago.strategies.chef.planners"
_CONFIG = "archipelago.strategies.chef.plan:ChefConfig"
# Without --cluster, the U280 + U250 cluster of seeds/004 §VII-B.
_ON = {"models": "archipelago.models.dag:ModelDAG", "default_cluster": "hacc"}
# `--engine best`: CHEF's own search (A2F's ILP and its re-deployment) over the IP templates
# grown to what each board holds (plan.py's ip_space, issue 34); H2H fixes one accelerator
# per FPGA and chef-exact enumerates the templates as written, so neither takes it.
SEARCHED = {"ip_space": "device"}
register("chef", "MMMT layer DAGs on heterogeneous FPGAs: IPs deployed by ILP + idle-aware "
         "re-deployment, layers mapped communication- and DRAM-aware (seeds/004)",
         "scheduled-dag", _CONFIG, **_ON,
         searched_engine=SEARCHED)(f"{_PLANNERS}:chef_planner")
register("h2h", "baseline of seeds/004: one fixed accelerator per FPGA, weights and "
         "features in host memory, H2H's four mapping steps", "scheduled-dag", _CONFIG,
         **_ON)(f"{_PLANNERS}:h2h_planner")
register("chef-exact", "exact optimum of small layer DAGs (<= ~10 layers): every "
         "deployment, every mapping (seeds/004 Tables VI, VII)", "scheduled-dag", _CONFIG,
         **_ON)(f"{_PLANNERS}:exact_planner")
