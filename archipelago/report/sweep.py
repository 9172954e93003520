"""Sweeps a report asks the pipeline for, with a progress bar on stderr: the same strategy
and engine re-planned on 1, 2, 4, 8 devices of the plan's kind, or the same plan estimated
on a series of workloads. Plans and estimates come from `archipelago.api`, so a sweep's
figures are checked as the headline's are."""

from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from rich.console import Console

from archipelago.api import estimate, plan_on
from archipelago.errors import ArchipelagoError
from archipelago.hardware.cluster import Cluster, parse_shorthand
from archipelago.progress_bar import progress_bar

T = TypeVar("T")
DEVICE_COUNTS = (1, 2, 4, 8)


def progress(items: Iterable[T], label: str, total: int) -> Iterator[T]:
    """`items`, with a transient progress bar on a terminal's stderr while they are worked
    on."""
    errors = Console(stderr=True)
    with progress_bar(errors, shown=errors.is_terminal) as bar:
        task = bar.add_task(label, total=total)
        for item in items:
            yield item
            bar.advance(task)


def resized(cluster: Cluster, count: int) -> Cluster:
    """`count` of the cluster's first device on the same network (a one-device cluster has
    no link: the shorthand's default network for the device then)."""
    device = cluster.devices[0]
    if cluster.ring_link is None and count > 1:
        shorthand = parse_shorthand(f"{count}x{device.key}")
        assert shorthand is not None
        return shorthand
    return cluster.resized(count)


def device_count_sweep(plan: Any, workload: Any, metric: Callable[[Any], float],
                       counts: Iterable[int] = DEVICE_COUNTS
                       ) -> tuple[list[int], list[float], list[str]]:
    """`metric` of the estimate when the plan's strategy and engine parameters are
    re-planned on each device count; counts the strategy refuses come back as notes."""
    engine = plan.engine.config.model_dump()
    done, values, refused = [], [], []
    counts = list(counts)
    for count in progress(counts, "tokens/s against device count", len(counts)):
        cluster = resized(plan.cluster, count)
        try:
            again = plan_on(plan.spec, cluster, plan.strategy, engine, workload)
        except ArchipelagoError as err:
            refused.append(f"{count} device(s): {err}")
            continue
        done.append(count)
        values.append(metric(estimate(plan.strategy, again, workload,
                                      f"{plan.strategy} plan of {plan.spec.name} on "
                                      f"{cluster.name}")))
    return done, values, refused


def workload_sweep(plan: Any, workloads: list[Any], label: str) -> list[Any]:
    """The plan's estimate on each of `workloads` (a sequence-length sweep)."""
    where = f"{plan.strategy} plan of {plan.spec.name} on {plan.cluster.name}"
    return [estimate(plan.strategy, plan, work, where)
            for work in progress(workloads, label, len(workloads))]
