"""The tensor-parallel kind's plan: stages of tensor-parallel groups, and its replicas.

Every plan of the kind is a `StagedPlan`. Stage k runs a contiguous run of layers (the
first stage also the embedding, the last the final norm and LM head) on `tp` boards of one
ring, as the ring program `Plan` (plan.py: the steps every board runs and its shards) over
the group's own cluster; its mixture of experts is split column-wise (`ep` 1) or as whole
experts (`ep` = tp, planning/experts.py). Between stages each token's hidden vector crosses one
link (the ring's own inside a ring, the switch port between rings) and the sampled token
returns to the first stage. A single ring is one stage of one replica.

The planner (planner.py) makes the whole split, the user's (`--split`) or its own choice
(`auto`, which depends on the workload), and keeps it here with why other tensor-parallel
degrees were refused; the estimator, report, page and emulator only walk the stages.
"""

from dataclasses import dataclass, field
from typing import Literal

from archipelago.hardware.cluster import Cluster
from archipelago.models.spec import ModelSpec
from archipelago.strategies.tensor_parallel.costs import Costed
from archipelago.strategies.tensor_parallel.plan import Plan, StepEngine
from archipelago.strategies.tensor_parallel.planning.stages import Split

# Where the split came from: the cluster's own shape (one ring, no --split), the user's
# --split, or the planner's choice for the workload (--split auto, or several rings).
Chosen = Literal["cluster", "given", "auto"]


@dataclass(frozen=True)
class Stage:
    """Stage `index` of a replica: the layers it runs, its boards (cluster node indices, in
    rank order), the ring program they run, and how it places experts."""

    index: int
    layers: range
    nodes: tuple[int, ...]
    program: Plan
    ep: int = 1

    @property
    def first(self) -> bool:
        """It embeds the tokens."""
        return self.layers.start == 0

    @property
    def last(self) -> bool:
        """It runs the output ops and picks the token."""
        return self.layers.stop == self.program.spec.layers


@dataclass
class StagedPlan:
    """A strategy's whole split of a model over a cluster. `replicas` copies of the stages
    serve side by side and `micro_batches` travel through them at once: 1 each today (a
    serving issue adds more); `refused` says why a tensor-parallel degree has no plan."""

    strategy: str
    spec: ModelSpec
    cluster: Cluster
    stages: list[Stage]
    split: Split  # every stage's layer count and the expert placement filled in
    chosen: Chosen
    refused: dict[int, str] = field(default_factory=dict)
    replicas: int = 1
    micro_batches: int = 1
    # What its planner costed while choosing the split, for the estimator to read.
    costed: Costed = field(default_factory=Costed, compare=False, repr=False)

    @property
    def program(self) -> Plan:
        """The ring program of the first stage (every stage runs the same steps)."""
        return self.stages[0].program

    @property
    def engine(self) -> StepEngine:
        """The core every board runs (the same in every stage)."""
        return self.program.engine

    @property
    def ranks(self) -> int:
        """Boards the plan uses."""
        return self.replicas * sum(len(s.nodes) for s in self.stages)

    @property
    def shows_split(self) -> bool:
        """Whether a split was asked for or chosen (reports then show it and each stage);
        a ring planned as its cluster stands reports as a ring."""
        return self.chosen != "cluster"
