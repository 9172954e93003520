"""How close a generation estimate is to the two physical limits of decode.

A decoder at batch 1 reads every weight once per output token, plus the KV cache, so the
fastest any design could go is those bytes over the memory bandwidth the boards have
together; it also cannot beat its FLOPs over the matrix units' peak. A decode step of a
batch of B reads the weights once (B times where the engine runs the sequences in turn;
of a mixture's experts, those its tokens route to, models/graph.py) and every sequence's
KV cache, for B tokens' FLOPs. The ratios of those
bounds to the predicted time per output token tell a reader at once whether a plan is
memory-bound and how much of the hardware it uses, independently of the engine's model.
"""

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from archipelago.estimate.workload import Generation
from archipelago.hardware.device import Device
from archipelago.models.graph import Graph
from archipelago.models.graph_ops import Op, decode
from archipelago.strategies.tensor_parallel.estimate import Estimate
from archipelago.strategies.tensor_parallel.plan import Plan
from archipelago.strategies.tensor_parallel.staged import StagedPlan

_WEIGHT_KINDS = frozenset({"linear", "lm_head"})
Number = float | np.ndarray


@dataclass(frozen=True)
class DecodeEfficiency:
    """Decode at the mean context of a workload, against its bandwidth and compute roofs."""

    context: float
    bytes_per_token: float  # per decode step: weights read plus the KV caches attended
    flops_per_token: float  # per decode step (every sequence of the batch)
    memory_Bps: float  # the weight memories of all devices together
    peak_ops_per_s: float  # the matrix units of all devices together
    seconds_per_token: float  # predicted

    @property
    def streamed_Bps(self) -> float:
        """The rate the predicted decode moves its bytes at."""
        return self.bytes_per_token / self.seconds_per_token

    @property
    def bandwidth(self) -> float:
        """Bandwidth-bound time per token over the predicted time (1 = at the limit)."""
        return self.streamed_Bps / self.memory_Bps

    @property
    def compute(self) -> float:
        return self.flops_per_token / self.seconds_per_token / self.peak_ops_per_s


def weight_bytes_per_token(graph: Graph, bytes_per_param: float, tokens: int = 1,
                           skew: float = 0.0) -> float:
    """Bytes of the weight matrices a decode step of `tokens` tokens multiplies: each
    layer's block once (of its experts, the distinct ones the tokens route to under routing
    skew `skew`), and the LM head's (an embedding lookup reads one row: negligible)."""

    def read(ops: tuple[Op, ...]) -> float:
        return sum(op.fan_in * op.fan_out * op.read_scale(tokens, skew) for op in ops
                   if op.kind in _WEIGHT_KINDS)

    blocks = graph.variants or ((graph.block, range(graph.spec.layers)),)
    return (sum(len(ids) * read(ops) for ops, ids in blocks) + read(graph.output)) \
        * bytes_per_param


def weight_memory_Bps(device: Device) -> float:
    """Where decode streams weights from: HBM on boards that have it (DFX, seeds/001 §IV-B;
    LORA, seeds/002 §V-C), otherwise their DDR."""
    memory = device.memory("hbm") or device.memory("ddr")
    return memory.bandwidth_Bps if memory else 0.0


def decode_efficiency(plan: StagedPlan, workload: Generation, est: Estimate
                      ) -> DecodeEfficiency | None:
    """None when the workload decodes no token after the first (nothing to rate). Against
    every device of every stage: one stage works at a time, so a plan of several is at
    most one over their count."""
    devices = [d.device for stage in plan.stages for d in stage.program.devices]
    return _roofline(plan.program, devices, workload, est.decode_s_per_token)


def _roofline(program: Plan, devices: Sequence[Device], workload: Generation,
              seconds_per_token: float) -> DecodeEfficiency | None:
    """`decode_roofline` of `program`'s engine on `devices`: sequences run in turn (an
    engine without batching, whose estimate says so) reread the weights, each step a
    token's experts."""
    engine = program.engine
    weight_reads = workload.batch if workload.batch > 1 and engine.one_sequence else 1
    return decode_roofline(program.graph, program.bytes_per_param, devices,
                           len(devices) * engine.peak_ops_per_s, workload, seconds_per_token,
                           weight_reads, engine.expert_skew, program.kv_value_bytes)


def decode_stream_share(program: Plan, workload: Generation, seconds_per_token: Number
                        ) -> Number:
    """The share of the boards' weight-memory bandwidth decode streams at, for one or many
    designs' mean decode step (an array over them): `archi plan`'s "decode streams" figure
    and a design search's `hbm_bandwidth`, one definition (0 when nothing is decoded)."""
    roof = _roofline(program, [dp.device for dp in program.devices], workload, 1.0)
    if roof is None:
        return 0.0
    return roof.bytes_per_token / np.maximum(seconds_per_token, 1e-30) / roof.memory_Bps


def decode_roofline(graph: Graph, bytes_per_param: float, devices: Sequence[Device],
                    peak_ops_per_s: float, workload: Generation, seconds_per_token: float,
                    weight_reads: int = 1, skew: float = 0.0, kv_bytes: float | None = None
                    ) -> DecodeEfficiency | None:
    """`decode_efficiency` of any set of devices running `graph`. A
    decode step of a batch yields `workload.batch` tokens, each sequence reading its own KV
    cache; the weights are read once, or `weight_reads` times (by batch / weight_reads
    tokens each, whose experts are routed with skew `skew`); a cached value takes
    `kv_bytes` (None: a weight's)."""
    if workload.output_tokens < 2 or seconds_per_token <= 0:
        return None
    # decode step i (1 .. n_out - 1) attends n_in + i keys: the mean is the midpoint
    context = workload.input_tokens + workload.output_tokens / 2
    kv = graph.kv_cache_bytes(context, bytes_per_param if kv_bytes is None else kv_bytes)
    memory = sum(weight_memory_Bps(d) for d in devices)
    if memory <= 0:
        return None
    return DecodeEfficiency(
        context=context,
        bytes_per_token=(weight_reads * weight_bytes_per_token(
            graph, bytes_per_param, workload.batch // weight_reads, skew)
                         + workload.batch * kv),
        flops_per_token=float(workload.batch * graph.flops(decode(round(context)))),
        memory_Bps=memory,
        peak_ops_per_s=peak_ops_per_s,
        seconds_per_token=seconds_per_token,
    )
