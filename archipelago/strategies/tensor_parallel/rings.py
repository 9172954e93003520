"""Which plan shapes a hook takes: the report page and the design search run a single-ring
`Plan`; a plan of stages across rings (pipeline.py) is estimated, reported and emulated
(emulate/pipeline.py), and the others say so in one line."""

from typing import Any

from archipelago.errors import PartitionError
from archipelago.strategies.tensor_parallel.plan import Plan


def one_ring(plan: Any, what: str) -> Plan:
    """`plan` if it runs on one ring; a one-line refusal naming `what` otherwise."""
    if isinstance(plan, Plan):
        return plan
    cluster = plan.cluster
    raise PartitionError(f"{what} runs one ring; '{cluster.name}' plans stages of rings "
                         f"(estimate it with `archi plan`, or name one ring such as "
                         f"{cluster.ring_size}x{cluster.nodes[0].device.key})")
