"""The library entry points the CLI, benchmarks and searches call: names in, results out."""

from typing import Any

from archipelago.errors import ArchipelagoError, PartitionError
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


def plan_and_estimate_encoder(model: str, cluster: str, strategy: str, seq_len: int,
                              engine: dict[str, Any] | None = None) -> tuple[Any, Any]:
    """An encoder strategy's plan (galapagos: a DataflowPlan) and its streaming estimate at
    `seq_len` tokens."""
    from archipelago.estimate.streaming import estimate_stream

    if seq_len < 1:
        raise ArchipelagoError(f"--seq-len {seq_len}: a sequence has at least one token")
    plan = make_plan(model, cluster, strategy, engine)
    return plan, estimate_stream(plan, seq_len)


def plan_and_estimate(model: str, cluster: str, strategy: str, tokens: str,
                      engine: dict[str, Any] | None = None) -> tuple[Plan, Generation, Estimate]:
    workload = parse_tokens(tokens)
    plan = make_plan(model, cluster, strategy, engine)
    return plan, workload, estimate_generation(plan, workload)


def emulate(model: str, cluster: str, strategy: str, tokens: str, seed: int = 0,
            precision: str = "fp32", checkpoint: str | None = None,
            timeout_s: float = 30.0) -> dict[str, Any] | None:
    """Run the plan `make_plan` returns with one process per device and check it against the
    unsplit model (archipelago/emulate); None on torchrun ranks other than 0."""
    from archipelago.emulate.dispatch import emulate as run
    from archipelago.emulate.job import EmulationJob

    return run(EmulationJob(model, cluster, strategy, tokens, seed, precision, checkpoint,
                            timeout_s))


def build(model: str, cluster: str, strategy: str, out: str, force: bool = False,
          engine: dict[str, Any] | None = None) -> dict[str, Any]:
    """Plan with an encoder strategy and write its deployment files under `out`."""
    from archipelago.emit import write_build
    from archipelago.estimate.streaming import feasibility
    from archipelago.strategies.registry import get_strategy

    if get_strategy(strategy).workload != "encoder":
        raise ArchipelagoError(f"strategy '{strategy}' has no build files; "
                               "`archi build` emits Galapagos builds (strategy galapagos)")
    plan = make_plan(model, cluster, strategy, engine)
    reasons = feasibility(plan, 1)  # hardware limits only: any sequence length fits one token
    if reasons:
        raise PartitionError(f"no build for an infeasible plan: {'; '.join(reasons)}")
    return write_build(plan, out, force)


def emulate_encoder(model: str, cluster: str, strategy: str, seq_len: int, seed: int = 0,
                    timeout_s: float = 30.0) -> dict[str, Any]:
    """Run an encoder strategy's plan kernel by kernel (libGalapagos style) on one sequence
    and check it bit for bit against transformers' IBertModel."""
    from archipelago.emulate.galapagos import emulate_galapagos

    return emulate_galapagos(make_plan(model, cluster, strategy), seq_len, seed, timeout_s)
