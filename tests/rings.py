"""The ring program of a one-stage tensor-parallel plan: what tests of shards, steps and
compiled programs read (a staged plan's single stage's `Plan`)."""

from typing import Any

from archipelago.api import make_plan
from archipelago.strategies.tensor_parallel.plan import Plan
from archipelago.strategies.tensor_parallel.planning.rings import one_ring


def make_ring(*args: Any, **kwargs: Any) -> Plan:
    """`make_plan(...)`'s ring program; a plan of several stages is refused."""
    return one_ring(make_plan(*args, **kwargs), "a test of one ring")
