"""The pipeline: names in, results out. The CLI, benchmarks, searches, report sweeps and the
kinds' services all call these, so they cannot drift apart:

    resolve model + cluster -> strategy.plan -> plan kind's estimator (every figure checked
    finite, every phase checked above its physical floors) -> the outputs asked for |
    emulator | writers

Nothing here knows a strategy or plan kind by name; the registry says which code runs.
`workload` is the text of the kind's command-line options ({"tokens": "64:64"}); options
left out take the kind's defaults, options the kind does not take are refused (once, by
`Strategy.workload`).
"""

from pathlib import Path
from typing import Any, NamedTuple

from archipelago.errors import ArchipelagoError
from archipelago.estimate.figures import finite_estimate
from archipelago.estimate.floors import PhaseFloor, check_floors
from archipelago.families import family_of
from archipelago.hardware.cluster import resolve_cluster
from archipelago.models.zoo import resolve_model
from archipelago.strategies.registry import default_strategy, get_strategy, resolve


class Result(NamedTuple):
    """A plan, the workload it was costed on, and its estimate (the kind's report renders
    all three)."""

    plan: Any
    workload: Any
    estimate: Any


def choose(command: str, strategy: str | None, cluster: str | None) -> tuple[str, str]:
    """The strategy and cluster `command` runs on: the given ones, else the command's
    default strategy and that strategy's default cluster (both declared at registration)."""
    chosen = get_strategy(strategy) if strategy is not None else default_strategy(command)
    return chosen.name, cluster if cluster is not None else chosen.cluster_for(command)


def listed_parameters(model: str) -> int | None:
    """The parameter count of a model no catalog lists (a config.json), which `archi plan`
    shows beside its estimate; None for a zoo name (`archi catalog` lists its count) or a
    family that cannot count."""
    family = family_of("model", model)
    return None if family.parameters is None else family.parameters(family.load(model))


def make_plan(model: str, cluster: str, strategy: str,
              engine: dict[str, Any] | None = None,
              workload: dict[str, str] | None = None, command: str = "plan") -> Any:
    """Strategy `strategy`'s plan of `model` on `cluster` for the workload `workload` gives
    (the kind's defaults for `command` where left out), engine parameters validated; the
    kind's plan-shaping options among `workload` join the engine parameters, its cluster
    overrides (CHEF's `--bandwidth`) replace the cluster's links."""
    options = get_strategy(strategy).plan_kind.workload
    shaping = options.plan_texts(workload or {}, command)
    machines = resolve_cluster(cluster)
    for override, text in options.cluster_overrides(workload or {}, command).items():
        machines = resolve(override)(machines, text)
    return plan_on(resolve_model(model), machines, strategy, {**(engine or {}), **shaping},
                   parse_workload(strategy, workload, command))


def plan_on(spec: Any, cluster: Any, strategy: str, engine: dict[str, Any] | None,
            workload: Any) -> Any:
    """`make_plan` for a model, cluster and workload already resolved (a sweep's resized
    cluster): the planner receives the workload, since a split may depend on it."""
    return get_strategy(strategy).plan(spec, cluster, engine, workload)


def parse_workload(strategy: str, workload: dict[str, str] | None = None,
                   command: str = "plan") -> Any:
    """The kind's workload from option texts; a number among them (a library caller's) is
    refused in one line naming the typed calls that take numbers."""
    for name, text in (workload or {}).items():
        if isinstance(text, int | float):
            raise ArchipelagoError(f"option '{name}' = {text!r}: give its command-line text "
                                   f"('{text}'), or use the typed calls (archipelago.plan("
                                   f"..., {name}={text!r}); docs/python.md)")
    return get_strategy(strategy).workload(workload, command)


def estimate(strategy: str, plan: Any, workload: Any, where: str) -> Any:
    """The kind's estimate of `plan`, every figure finite and non-negative or a one-line
    error naming the input behind it (`where` says which plan), and no phase faster than
    its physical floors (estimate/floors.py) or a one-line error naming the phase, its
    estimate and its floor."""
    return estimate_and_floors(strategy, plan, workload, where)[0]


def estimate_and_floors(strategy: str, plan: Any, workload: Any, where: str
                        ) -> tuple[Any, list[PhaseFloor]]:
    """`estimate`, and the phase floors it was checked against (a comparison's store keeps
    them beside the figures, so a record read back is held to them too)."""
    kind = get_strategy(strategy).plan_kind
    est = finite_estimate(kind.hook("estimator"), plan, workload, where)
    floors = [] if kind.floors is None else kind.hook("floors")(plan, workload, est)
    check_floors(floors, where)  # every built-in kind has floors (tests/test_floors.py)
    return est, floors


def plan_and_estimate(model: str, cluster: str, strategy: str,
                      workload: dict[str, str] | None = None,
                      engine: dict[str, Any] | None = None, command: str = "plan") -> Result:
    """Plan and estimate; then the kind's outputs the user asked for (`--gantt FILE`) are
    written by their writers, targets having been checked when the workload was parsed."""
    kind = get_strategy(strategy).plan_kind
    work = parse_workload(strategy, workload, command)
    plan = make_plan(model, cluster, strategy, engine, workload, command)
    est = estimate(strategy, plan, work, f"{strategy} plan of {model} on {cluster}")
    for writer, target in kind.workload.outputs(workload or {}, command).items():
        resolve(writer)(plan, work, est, Path(target))
    return Result(plan, work, est)


def emulate(model: str, cluster: str, strategy: str, workload: dict[str, str] | None = None,
            seed: int = 0, timeout_s: float = 30.0) -> dict[str, Any] | None:
    """Run the plan `make_plan` returns (archipelago/emulate) and check it against a
    reference model; None on torchrun ranks other than 0. The kind's job options
    (`--precision`, `--checkpoint` where it takes them) come among `workload`."""
    from archipelago.emulate.job import EmulationJob
    from archipelago.estimate.figures import finite_report

    kind = get_strategy(strategy).plan_kind
    if kind.emulator is None:  # a kind without one fails before planning
        kind.hook("emulator")
    work = parse_workload(strategy, workload, "emulate")
    job = EmulationJob(work, seed, timeout_s=timeout_s, model=model,
                       **kind.workload.job_texts(workload or {}, "emulate"))
    plan = make_plan(model, cluster, strategy, workload=workload, command="emulate")
    # the emulator (torch) is imported only once the request is known to be runnable
    report = kind.hook("emulator")(plan, job)
    return None if report is None else finite_report(
        report, f"emulation of {model} on {cluster} ({strategy})")


def explore_kind(model: str, cluster: str, strategy: str,
                 workload: dict[str, str] | None = None) -> dict[str, Any]:
    """`archi explore` of a kind that answers it itself (server sizing, not an
    engine-parameter search), its options checked first."""
    parse_workload(strategy, workload, "explore")
    return get_strategy(strategy).plan_kind.hook("explorer")(model, cluster, strategy,
                                                             dict(workload or {}))


def build(model: str, cluster: str, strategy: str, out: str, force: bool = False,
          engine: dict[str, Any] | None = None, workload: dict[str, str] | None = None
          ) -> dict[str, Any]:
    """Plan, then write the kind's deployment files under `out`; returns their summary.
    The kind's options among `workload` shape the plan as they do `plan`'s (a host
    program's `--hidden`, `--steps`)."""
    writers = get_strategy(strategy).plan_kind.hook("writers")
    return writers(make_plan(model, cluster, strategy, engine, workload, "build"), out, force)
