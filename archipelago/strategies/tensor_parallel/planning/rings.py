"""Hooks that run one ring program (the design search, build files, program simulation)
take a staged plan of one stage; a plan of several stages gets a one-line refusal."""

from archipelago.errors import PartitionError
from archipelago.strategies.tensor_parallel.plan import Plan
from archipelago.strategies.tensor_parallel.staged import StagedPlan


def one_ring(plan: StagedPlan, what: str) -> Plan:
    """The ring program of a one-stage plan; a one-line refusal naming `what` otherwise."""
    if len(plan.stages) == 1 and plan.replicas == 1:
        return plan.program
    cluster = plan.cluster
    raise PartitionError(f"{what} runs one ring; '{cluster.name}' plans stages of rings "
                         f"(estimate it with `archi plan`, or name one ring such as "
                         f"{cluster.ring_size}x{cluster.nodes[0].device.key})")
