"""Sweeps a report asks the estimator for, with a progress bar on stderr: the same strategy
and engine re-planned on 1, 2, 4, 8 devices of the plan's kind."""

from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from rich.console import Console
from rich.progress import Progress

from archipelago.errors import ArchipelagoError
from archipelago.hardware.cluster import Cluster, parse_shorthand
from archipelago.strategies.registry import get_strategy

T = TypeVar("T")
DEVICE_COUNTS = (1, 2, 4, 8)


def progress(items: Iterable[T], label: str, total: int) -> Iterator[T]:
    """`items`, with a transient rich progress bar on stderr while they are worked on."""
    with Progress(console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(label, total=total)
        for item in items:
            yield item
            bar.advance(task)


def resized(cluster: Cluster, count: int) -> Cluster:
    """`count` of the cluster's first device on the same network (a one-device cluster has
    no link: the shorthand's default network for the device then)."""
    device = cluster.devices[0]
    if cluster.link is None and count > 1:
        shorthand = parse_shorthand(f"{count}x{device.key}")
        assert shorthand is not None
        return shorthand
    return cluster.resized(count)


def device_count_sweep(plan: Any, workload: Any, metric: Callable[[Any], float],
                       counts: Iterable[int] = DEVICE_COUNTS
                       ) -> tuple[list[int], list[float], list[str]]:
    """`metric` of the estimate when the plan's strategy and engine parameters are
    re-planned on each device count; counts the strategy refuses come back as notes."""
    strategy = get_strategy(plan.strategy)
    estimator = strategy.plan_kind.hook("estimator")
    done, values, refused = [], [], []
    counts = list(counts)
    for count in progress(counts, "tokens/s against device count", len(counts)):
        try:
            again = strategy.planner(plan.spec, resized(plan.cluster, count), plan.engine.config)
        except ArchipelagoError as err:
            refused.append(f"{count} device(s): {err}")
            continue
        done.append(count)
        values.append(metric(estimator(again, workload)))
    return done, values, refused
