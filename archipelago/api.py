"""The pipeline: names in, results out. The CLI, benchmarks and searches all call these, so
they cannot drift apart:

    resolve model + cluster -> strategy.plan -> plan kind's estimator | emulator | writers

Nothing here knows a strategy or plan kind by name; the registry says which code runs.
`workload` is the text of the kind's command-line options ({"tokens": "64:64"}); options
left out take the kind's defaults.
"""

from typing import Any, NamedTuple

from archipelago.hardware.cluster import resolve_cluster
from archipelago.models.zoo import resolve_model
from archipelago.strategies.registry import get_strategy


class Result(NamedTuple):
    """A plan, the workload it was costed on, and its estimate (the kind's report renders
    all three)."""

    plan: Any
    workload: Any
    estimate: Any


def make_plan(model: str, cluster: str, strategy: str,
              engine: dict[str, Any] | None = None,
              workload: dict[str, str] | None = None, command: str = "plan") -> Any:
    """Strategy `strategy`'s plan of `model` on `cluster`, engine parameters validated; the
    kind's plan-shaping options among `workload` join the engine parameters."""
    chosen = get_strategy(strategy)
    shaping = chosen.plan_kind.workload.plan_texts(workload or {}, command)
    return chosen.plan(resolve_model(model), resolve_cluster(cluster),
                       {**(engine or {}), **shaping})


def parse_workload(strategy: str, workload: dict[str, str] | None = None,
                   command: str = "plan") -> Any:
    return get_strategy(strategy).workload(workload, command)


def plan_and_estimate(model: str, cluster: str, strategy: str,
                      workload: dict[str, str] | None = None,
                      engine: dict[str, Any] | None = None) -> Result:
    kind = get_strategy(strategy).plan_kind
    work = parse_workload(strategy, workload)
    plan = make_plan(model, cluster, strategy, engine, workload)
    return Result(plan, work, kind.hook("estimator")(plan, work))


def emulate(model: str, cluster: str, strategy: str, workload: dict[str, str] | None = None,
            seed: int = 0, precision: str = "fp32", checkpoint: str | None = None,
            timeout_s: float = 30.0) -> dict[str, Any] | None:
    """Run the plan `make_plan` returns (archipelago/emulate) and check it against a
    reference model; None on torchrun ranks other than 0."""
    from archipelago.emulate.job import EmulationJob
    from archipelago.estimate.figures import finite_report

    kind = get_strategy(strategy).plan_kind
    if kind.emulator is None:  # a kind without one fails before planning
        kind.hook("emulator")
    job = EmulationJob(parse_workload(strategy, workload, "emulate"), seed, precision,
                       checkpoint, timeout_s)
    plan = make_plan(model, cluster, strategy, workload=workload, command="emulate")
    # the emulator (torch) is imported only once the request is known to be runnable
    report = kind.hook("emulator")(plan, job)
    return None if report is None else finite_report(
        report, f"emulation of {model} on {cluster} ({strategy})")


def build(model: str, cluster: str, strategy: str, out: str, force: bool = False,
          engine: dict[str, Any] | None = None) -> dict[str, Any]:
    """Plan, then write the kind's deployment files under `out`; returns their summary."""
    writers = get_strategy(strategy).plan_kind.hook("writers")
    return writers(make_plan(model, cluster, strategy, engine), out, force)
