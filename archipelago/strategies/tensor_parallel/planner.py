"""The tensor-parallel kind's planners: a strategy's ring program (a synchronization scheme,
planning/sync.py, run by its engine) over every stage of the split the planner makes.

Decoders beyond GPT-2/OPT/LLaMA (models/hf_families/) split the same way: query heads of
any head_dim and GQA key/value heads head-wise, per-head q/k norms with their heads, parallel
blocks' sublayers each as their sequential twin. A mixture of experts is split here like
any FFN: every expert's columns across the ring (the router whole on every device), with
a token's active experts as one FFN of `MoE.active_ffn` columns (a step of many tokens
streams the distinct experts they route to, `ComputeStep.read`); planning/experts.py places whole
experts on each board instead (`--split ...,ep=`), with the all-to-all combine that needs.
Features whose synchronization neither paper defines are refused (the kind declares what
it splits in __init__.py).

A one-ring cluster without `--split` is one stage of all its boards; a given split is
checked and completed (layer boundaries, expert placement) and `auto`, or a cluster of
several rings, is chosen for the workload (split_choice.py).
"""

from collections.abc import Callable
from typing import Any

from pydantic import Field, field_validator

from archipelago.engines.base import EngineConfig
from archipelago.errors import PartitionError
from archipelago.estimate.workload import Generation
from archipelago.hardware.cluster import Cluster
from archipelago.hardware.device import Device
from archipelago.models.spec import ModelSpec
from archipelago.strategies.registry import feature_refusal
from archipelago.strategies.tensor_parallel.engines.dfx import DFXConfig, DFXEngine
from archipelago.strategies.tensor_parallel.engines.systolic import SystolicEngine
from archipelago.strategies.tensor_parallel.engines.systolic_config import SystolicConfig
from archipelago.strategies.tensor_parallel.plan import Plan
from archipelago.strategies.tensor_parallel.planning import sync_schemes  # noqa: F401 (registers)
from archipelago.strategies.tensor_parallel.planning.experts import ep_degrees, expert_parallel
from archipelago.strategies.tensor_parallel.planning.heads import check_heads
from archipelago.strategies.tensor_parallel.planning.shards import kinds_of_layer_tensors
from archipelago.strategies.tensor_parallel.planning.stages import Split, parse_split
from archipelago.strategies.tensor_parallel.planning.sync import Scheme, get_scheme, ring_program
from archipelago.strategies.tensor_parallel.split_choice import (
    Candidate,
    check_given,
    choose_auto,
    choose_given,
    degrees,
)
from archipelago.strategies.tensor_parallel.staged import Stage, StagedPlan

# A strategy's ring program: its scheme run by its engine on one ring.
RingPlanner = Callable[[str, Scheme, ModelSpec, Cluster, Any], Plan]


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


def check_inputs(spec: ModelSpec, cluster: Cluster, strategy: str, scheme: Scheme) -> None:
    """A one-line refusal of what no ring program of `scheme` can run."""
    refused = feature_refusal(spec, strategy)
    if refused:
        raise PartitionError(refused)
    device = cluster.require_identical(strategy)
    if device.kind != "fpga" or device.memory("hbm") is None:
        raise PartitionError(f"strategy '{strategy}' runs on HBM FPGAs; '{device.key}' is a "
                             f"{device.kind} without HBM")
    if cluster.size > 1 and cluster.topology != "ring":
        raise PartitionError(f"strategy '{strategy}' synchronizes over a ring; cluster "
                             f"'{cluster.name}' has topology '{cluster.topology}'")
    check_heads(spec, cluster.size)
    if spec.vocab < cluster.size:
        raise PartitionError(f"{spec.name}: the vocabulary ({spec.vocab} tokens) is smaller "
                             f"than the device count ({cluster.size}); each device scores a "
                             "slice of at least one token")
    if not spec.is_decoder:
        raise PartitionError(f"strategy '{strategy}' generates text with decoders; {spec.name}"
                             " is an encoder (try strategy 'galapagos')")
    biased = sorted({t.role for t in kinds_of_layer_tensors(spec)
                     if t.role.endswith(".bias") and t.role.split(".")[0] in
                     scheme.reduce_after})
    if biased:
        raise PartitionError(f"strategy '{strategy}' sums partial products of "
                             f"{', '.join(scheme.reduce_after)}; {spec.name} has biases "
                             f"({', '.join(biased)}) its scheme '{scheme.name}' cannot add once")


def _table_Bps(device: Device) -> float | None:
    """Where DFX reads WTE/WPE rows: one HBM pseudo-channel on a board without DDR (U55C),
    else None (the engine's DDR channel)."""
    hbm = device.memory("hbm")
    if device.memory("ddr") is not None or hbm is None:
        return None
    return hbm.bandwidth_Bps / hbm.channels


def dfx_ring(strategy: str, scheme: Scheme, spec: ModelSpec, cluster: Cluster,
             config: DFXConfig) -> Plan:
    """`scheme` on DFX cores: FP16 activations, weights and KV cache stored in the config's
    format (widened to FP16 before the MFU)."""
    check_inputs(spec, cluster, strategy, scheme)
    engine = DFXEngine(config, cluster.size, _table_Bps(cluster.devices[0]))
    fmt = config.format
    return ring_program(strategy, scheme, spec, cluster, engine, fmt.weight_bytes,
                        numerics=fmt.name, kv_bytes=fmt.kv_bytes)


def systolic_ring(strategy: str, scheme: Scheme, spec: ModelSpec, cluster: Cluster,
                  config: SystolicConfig) -> Plan:
    """`scheme` on LORA's systolic cores, at their precision and row packing."""
    check_inputs(spec, cluster, strategy, scheme)
    engine = SystolicEngine(config, cluster.devices[0], spec, cluster.size)
    fmt = config.format
    return ring_program(strategy, scheme, spec, cluster, engine, fmt.weight_bytes,
                        fmt.activation_bytes, config.pack_rows, fmt.name, fmt.kv_bytes)


def _whole_ring(strategy: str, spec: ModelSpec, cluster: Cluster, program: Plan
                ) -> StagedPlan:
    """A ring as its cluster stands: one stage of every board, all layers."""
    layers = range(spec.layers)
    stage = Stage(0, layers, tuple(range(cluster.size)), program)
    return StagedPlan(strategy, spec, cluster, [stage], Split(cluster.size, 1, (spec.layers,), 1),
                      "cluster")


def in_format(config: Any, workload: Generation) -> Any:
    """The engine parameters in the workload's `--precision` where one is given (the config
    refuses a format its engine cannot run, in one line), else the strategy's own format."""
    if getattr(workload, "precision", None) is None or workload.precision == config.precision:
        return config
    return type(config).model_validate({**config.model_dump(), "precision": workload.precision})


def staged(strategy: str, scheme: str, ring: RingPlanner) -> Callable[..., StagedPlan]:
    """The planner of strategy `strategy`: `ring`'s program of `scheme` on every stage of
    the split it makes for the workload (this module's docstring)."""

    def planner(spec: ModelSpec, cluster: Cluster, config: Any, workload: Generation
                ) -> StagedPlan:
        config = in_format(config, workload)
        sync = get_scheme(scheme)
        request = parse_split(getattr(config, "split", None))
        if request is None and cluster.rings == 1:
            return _whole_ring(strategy, spec, cluster, ring(strategy, sync, spec, cluster,
                                                             config))
        refused: dict[int, str] = {}
        if isinstance(request, Split):
            check_given(request, spec, cluster)
            program = ring(strategy, sync, spec, cluster.group(0, request.tp), config)
            eps = ep_degrees(spec, request.tp) if request.ep is None else [request.ep]
            cand, split = choose_given([Candidate(expert_parallel(program, ep), request.tp,
                                                  ep, cluster, workload) for ep in eps],
                                       request)
        else:
            candidates = []
            for tp in degrees(cluster):
                try:
                    program = ring(strategy, sync, spec, cluster.group(0, tp), config)
                except PartitionError as err:
                    refused[tp] = str(err)
                    continue
                candidates += [Candidate(expert_parallel(program, ep), tp, ep, cluster,
                                         workload) for ep in ep_degrees(spec, tp)]
            if not candidates:
                raise PartitionError(f"no tensor-parallel degree plans {spec.name} on "
                                     f"'{cluster.name}': " + "; ".join(
                                         f"tp={tp}: {why}" for tp, why in refused.items()))
            cand, split = choose_auto(candidates)
        return StagedPlan(strategy, spec, cluster, cand.stages(split), split,
                          "given" if isinstance(request, Split) else "auto", refused,
                          costed=cand.costed(split))

    return planner


plan_dfx = staged("dfx", "dfx", dfx_ring)
plan_lora_f = staged("lora-f", "lora", systolic_ring)
plan_lora_q = staged("lora-q", "lora", systolic_ring)

