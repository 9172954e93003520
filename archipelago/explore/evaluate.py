"""Scoring a batch of engine designs of one search: the plan kind's `batch_evaluator` (all
variants of one plan at once, with numpy) where it has one, else each design planned and
estimated through the pipeline and measured by the kind's `utilization` hook.

`evaluate_chunk` is what a Dask worker runs: a module-level function of picklable
arguments, which resolves the model and cluster once per process.
"""

import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from archipelago.api import estimate, plan_on
from archipelago.errors import ArchipelagoError
from archipelago.hardware.cluster import resolve_cluster
from archipelago.models.zoo import resolve_model
from archipelago.strategies.registry import get_strategy

FABRIC = ("dsp", "bram", "uram")  # the resources of the second objective


@dataclass(frozen=True)
class Problem:
    """What every trial of one search shares."""

    model: str
    cluster: str
    strategy: str
    workload: Any  # what the strategy's plan kind parsed from the command line


@lru_cache(maxsize=8)
def _resolved(model: str, cluster: str) -> tuple[Any, Any]:
    return resolve_model(model), resolve_cluster(cluster)


def _one(problem: Problem, engine: dict[str, Any]) -> dict[str, Any]:
    """One design through the pipeline; one the plan refuses reads as the batch evaluator
    reads it: infeasible, infinitely slow, over every limit."""
    spec, machines = _resolved(problem.model, problem.cluster)
    kind = get_strategy(problem.strategy).plan_kind
    try:
        plan = plan_on(spec, machines, problem.strategy, engine, problem.workload)
        est = estimate(problem.strategy, plan, problem.workload,
                       f"{problem.strategy} plan of {problem.model} on {problem.cluster}")
    except ArchipelagoError:
        return {"latency_s": math.inf, "tokens_per_s": 0.0, "feasible": False,
                "utilization": dict.fromkeys(FABRIC, math.inf)}
    used = kind.hook("utilization")(plan, problem.workload, est)
    return {"latency_s": float(est.latency_s), "tokens_per_s": float(est.tokens_per_s),
            "feasible": bool(est.feasible),
            "utilization": {k: float(v) for k, v in used.items()}}


def evaluate_chunk(task: tuple[Problem, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The scores of each engine of `task`, in order: latency_s, tokens_per_s, feasible
    (the estimator's) and utilization (worst-device fraction of each limited resource),
    all at once through the kind's `batch_evaluator` where it has one."""
    problem, engines = task
    kind = get_strategy(problem.strategy).plan_kind
    if kind.batch_evaluator is None:
        return [_one(problem, engine) for engine in engines]
    got = kind.hook("batch_evaluator")(problem.model, problem.cluster, problem.strategy,
                                       problem.workload, engines)
    return [{"latency_s": latency, "tokens_per_s": rate, "feasible": fits, "utilization": used}
            for latency, rate, fits, used in zip(got.latency_s.tolist(), got.tokens_per_s.tolist(),
                                                 got.feasible.tolist(), got.utilizations(),
                                                 strict=True)]


def violation(utilization: Mapping[str, float], feasible: bool) -> float:
    """How far a design is from fitting (0 when it fits): the worst overuse of any limit,
    or 1 when the estimator finds it infeasible otherwise (memory)."""
    return max(max(utilization.values()) - 1.0, 0.0 if feasible else 1.0)


def fabric(utilization: Mapping[str, float]) -> float:
    """The second objective: the worst fraction of any fabric resource (seeds/002 Eq. 13)."""
    return max(map(utilization.__getitem__, FABRIC))
