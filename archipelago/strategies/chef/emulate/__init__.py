"""Emulation of scheduled DAGs (CHEF, H2H): see run.py."""

from typing import Any


def emulate_plan(plan, job) -> dict[str, Any]:
    """The plan kind's emulator hook: the schedule's placement and order, run for real."""
    from archipelago.strategies.chef.emulate.run import emulate_dag

    placement = plan.placement()
    start = dict(zip(plan.tables.names, plan.schedule.start, strict=True))
    order = sorted(placement, key=lambda name: (start[name], plan.dag.order.index(name)))
    report = emulate_dag(plan.dag, placement, order, [f.name for f in plan.cluster.nodes],
                         job.seed, job.timeout_s)
    return {"strategy": plan.strategy, "cluster": plan.cluster.name, **report}
