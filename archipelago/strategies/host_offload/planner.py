"""The persistent-weights planner: a built-in application sized, its weights laid over the
cards (layout.py) and its API program recorded (program.py, apps.py)."""

from archipelago.errors import PartitionError
from archipelago.hardware.cluster import Cluster
from archipelago.models.recurrent import RecurrentSpec
from archipelago.strategies.host_offload.config import HostConfig
from archipelago.strategies.host_offload.plan import HostPlan, configured_plan


def plan_persistent(spec: RecurrentSpec, cluster: Cluster, config: HostConfig,
                    workload: object) -> HostPlan:
    """Size the built-in, lay its weights over the cards, record its application. Weights
    that do not fit as asked are the user's to change (more cards, --weights)."""
    plan = configured_plan(spec, cluster, config)
    reasons = plan.feasibility()
    if reasons:
        raise PartitionError(f"{plan.spec.name} does not fit {cluster.name}: {reasons[0]}")
    return plan
