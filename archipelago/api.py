"""The library entry points the CLI, benchmarks and searches call: names in, results out."""

from typing import Any

from archipelago.estimate.generation import Estimate, estimate_generation
from archipelago.estimate.workload import Generation, parse_tokens
from archipelago.hardware.cluster import resolve_cluster
from archipelago.models.zoo import resolve_model
from archipelago.plan import Plan
from archipelago.strategies.registry import get_strategy
from archipelago.strategies.tensor_parallel import PlanOptions


def make_plan(model: str, cluster: str, strategy: str,
              engine: dict[str, Any] | None = None) -> Plan:
    info = get_strategy(strategy)
    return info.planner(resolve_model(model), resolve_cluster(cluster),
                        PlanOptions(engine=engine or {}))


def plan_and_estimate(model: str, cluster: str, strategy: str, tokens: str,
                      engine: dict[str, Any] | None = None) -> tuple[Plan, Generation, Estimate]:
    workload = parse_tokens(tokens)
    plan = make_plan(model, cluster, strategy, engine)
    return plan, workload, estimate_generation(plan, workload)
