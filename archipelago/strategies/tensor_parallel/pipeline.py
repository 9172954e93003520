"""Tensor x pipeline plans: the single-ring plan as every stage's program, stages across rings.

A cluster of several rings (`8x4xu280`), or any cluster given `--split`, runs `pp` stages
of `tp` boards each: stage k holds boards [k tp, (k + 1) tp) of one ring (a group smaller
than its ring is re-cabled as a ring of its own) and a contiguous run of layers, the first
stage also the embedding, the last the final norm and LM head. Inside a stage everything is
the strategy's single-ring plan (its steps, shards and engine: DFX, LORA-F or LORA-Q), its
mixture of experts split column-wise or, at `ep` = tp, as whole experts (experts.py);
between stages the hidden vector of each token crosses one link (the ring's own inside a
ring, the switch port between rings), and the sampled token returns to the first stage.

The split and its layer boundaries depend on the workload (prompt and output lengths set
the time each part takes and the KV cache each stage holds), so the plan keeps the ring plan
of every candidate (tensor-parallel degree, expert placement) and the estimator
(pipeline_estimate.py) chooses among them, or checks the user's.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import Field, field_validator

from archipelago.engines.base import EngineConfig
from archipelago.errors import ArchipelagoError, PartitionError
from archipelago.estimate.workload import Generation
from archipelago.hardware.cluster import Cluster
from archipelago.models.spec import ModelSpec
from archipelago.strategies.tensor_parallel.dfx import DFXConfig
from archipelago.strategies.tensor_parallel.experts import check_ep, ep_degrees, expert_parallel
from archipelago.strategies.tensor_parallel.pipeline_estimate import (
    PipelineEstimate,
    estimate_pipeline,
)
from archipelago.strategies.tensor_parallel.plan import Plan, StepEngine
from archipelago.strategies.tensor_parallel.stages import Split, parse_split
from archipelago.strategies.tensor_parallel.systolic import SystolicConfig

if TYPE_CHECKING:  # rich is the report's import, loaded when a report is asked for
    from rich.console import Console

RingPlanner = Callable[[ModelSpec, Cluster, Any], Plan]


class SplitOption(EngineConfig):
    """The `--split` text among a strategy's parameters, read (and refused in one line,
    naming the valid forms) where it is given."""

    split: str | None = Field(default=None, max_length=200)

    @field_validator("split")
    @classmethod
    def _readable(cls, text: str | None) -> str | None:
        parse_split(text)  # raises ArchipelagoError naming the bad part
        return text


class DFXSplitConfig(SplitOption, DFXConfig):
    """DFX's engine parameters and the split its stages run in."""


class SystolicSplitConfig(SplitOption, SystolicConfig):
    """LORA's engine parameters and the split its stages run in."""


@dataclass
class PipelinePlan:
    """Every candidate ring plan by (tp, ep), the user's split or "auto", and the cluster
    the stages run on; `refused` says why a tensor-parallel degree has no plan."""

    strategy: str
    spec: ModelSpec
    cluster: Cluster
    rings: dict[tuple[int, int], Plan]
    request: Split | str
    refused: dict[int, str]

    @property
    def engine(self) -> StepEngine:
        """The stages' engine (the same core at every degree; figures checks read it)."""
        return next(iter(self.rings.values())).engine

    def estimate(self, workload: Generation) -> PipelineEstimate:
        """The kind's estimator hands a plan of stages here (estimate.estimate)."""
        return estimate_pipeline(self, workload)

    def report_dict(self, workload: Generation, est: PipelineEstimate) -> dict[str, Any]:
        """The kind's report hands a plan of stages here (report.estimate_to_dict)."""
        from archipelago.strategies.tensor_parallel.pipeline_report import pipeline_to_dict

        return pipeline_to_dict(self, workload, est)

    def print_report(self, workload: Generation, est: PipelineEstimate,
                     console: "Console") -> None:
        """The kind's report hands a plan of stages here (report.print_estimate)."""
        from archipelago.strategies.tensor_parallel.pipeline_report import print_pipeline

        print_pipeline(self, workload, est, console)


def _degrees(cluster: Cluster) -> list[int]:
    """Tensor-parallel degrees a stage can have: divisors of the ring size, largest first."""
    size = cluster.ring_size
    return [t for t in range(size, 0, -1) if size % t == 0]


def _check_given(split: Split, spec: ModelSpec, cluster: Cluster) -> None:
    degrees = _degrees(cluster)
    if split.tp not in degrees:
        raise ArchipelagoError(f"--split tp={split.tp}: a stage's boards sit in one ring of "
                               f"{cluster.ring_size} on '{cluster.name}'; valid tp: "
                               f"{', '.join(map(str, sorted(degrees)))}")
    most = min(cluster.size // split.tp, spec.layers)
    if split.pp > most:
        raise ArchipelagoError(f"--split pp={split.pp}: {cluster.size} devices at tp="
                               f"{split.tp} and {spec.layers} layers allow pp 1..{most}")
    if split.layers is not None and sum(split.layers) != spec.layers:
        raise ArchipelagoError(f"--split layers={'+'.join(map(str, split.layers))}: the "
                               f"stages hold {sum(split.layers)} layers; {spec.name} has "
                               f"{spec.layers}")
    if split.ep is not None:
        check_ep(spec, split.tp, split.ep)


def pipelined(strategy: str, ring_planner: RingPlanner) -> Callable[..., Plan | PipelinePlan]:
    """A planner taking any cluster: a one-ring cluster without `--split` gets the ring
    planner's plan unchanged; otherwise a PipelinePlan over the ring plans of the given
    degree and expert placement (each one its ring can run, when not given), or (auto) of
    every degree the ring planner accepts, each with every placement its ring can run."""

    def planner(spec: ModelSpec, cluster: Cluster, config: Any, workload: Generation
                ) -> Plan | PipelinePlan:
        request = parse_split(config.split)
        if request is None and cluster.rings == 1:
            return ring_planner(spec, cluster, config)
        if isinstance(request, Split):
            _check_given(request, spec, cluster)
            ring = ring_planner(spec, cluster.group(0, request.tp), config)
            eps = ep_degrees(spec, request.tp) if request.ep is None else [request.ep]
            rings = {(request.tp, ep): expert_parallel(ring, ep) for ep in eps}
            return PipelinePlan(strategy, spec, cluster, rings, request, {})
        rings, refused = {}, {}
        for tp in _degrees(cluster):
            try:
                ring = ring_planner(spec, cluster.group(0, tp), config)
            except PartitionError as err:
                refused[tp] = str(err)
                continue
            for ep in ep_degrees(spec, tp):
                rings[tp, ep] = expert_parallel(ring, ep)
        if not rings:
            raise PartitionError(f"no tensor-parallel degree plans {spec.name} on "
                                 f"'{cluster.name}': " + "; ".join(
                                     f"tp={tp}: {why}" for tp, why in refused.items()))
        return PipelinePlan(strategy, spec, cluster, rings, "auto", refused)

    return planner
