"""Plan: the one description of a split that the estimator, emulator and writers all read.

A tensor-parallel plan is an SPMD program: every device runs the same `block_steps` on its
own weight shards, and the communication steps say exactly where data is exchanged.
"""

from dataclasses import dataclass, field, replace
from math import ceil
from typing import ClassVar, Literal, Protocol

import numpy as np

from archipelago.engines.base import Engine
from archipelago.hardware.cluster import Cluster
from archipelago.hardware.device import Device, Resources
from archipelago.models.graph import Graph, build_graph
from archipelago.models.graph_ops import Op, Phase
from archipelago.models.spec import ModelSpec
from archipelago.models.weights import WeightTensor, layer_weights, template_weights
from archipelago.split import split_bounds

MemoryKind = Literal["hbm", "ddr", "onchip"]


@dataclass(frozen=True)
class Shard:
    """Rows/columns [start, stop) of a tensor along `axis`; axis None means a full copy.
    `mirror` is a second copy in another memory (LORA keeps prefill weights in DDR and
    decode weights in HBM, seeds/002 §V-C); `mirror_rows` narrows that copy to rows
    [start, stop) (a tied LM head: the whole table in DDR for the embedding lookup, this
    device's vocabulary slice in HBM for the head, seeds/001 §IV-B)."""

    axis: int | None
    start: int = 0
    stop: int = 0
    memory: MemoryKind = "hbm"
    mirror: MemoryKind | None = None
    mirror_rows: tuple[int, int] | None = None

    def numel(self, tensor: WeightTensor) -> int:
        if self.axis is None:
            return tensor.numel
        other = tensor.numel // tensor.shape[self.axis]
        return (self.stop - self.start) * other

    def numel_in(self, tensor: WeightTensor, memory: MemoryKind) -> int:
        """Elements of this shard held in `memory` (0, the shard, or the narrowed mirror)."""
        if memory == self.memory:
            return self.numel(tensor)
        if memory != self.mirror:
            return 0
        if self.mirror_rows is None:
            return self.numel(tensor)
        start, stop = self.mirror_rows
        return (stop - start) * (tensor.numel // tensor.shape[0])


@dataclass(frozen=True)
class ComputeStep:
    """Run `op` on this device's slice: `local_out` output features, `local_heads` heads.

    A LayerNorm over column-split activations runs in two stages around an all-reduce of
    its partial sums (seeds/002 §III-B): `stats` then `apply`; everything else is `whole`.
    `sequences` run it together (a batch: the phase's new tokens of each, every sequence
    attending to its own KV cache); the estimator sets it, plans leave it 1.
    """

    op: Op
    local_out: int
    local_heads: int = 0
    stage: Literal["whole", "stats", "apply"] = "whole"
    sequences: int = 1

    def read(self, tokens: int, skew: float) -> tuple["ComputeStep", float]:
        """This step as the matrix its `tokens` tokens read, and the share of them that
        meets each of its weights. Dense: itself, all. Over a mixture's experts
        (`Op.routed`): the distinct experts' columns, r = `Op.read_scale(tokens, skew)`
        times one token's, each met by 1/r of the rows on average (a token runs its own
        experts' columns only), so the multiply-adds stay the tokens'."""
        op = self.op
        if op.routed is None:
            return self, 1.0
        r = op.read_scale(tokens, skew)
        if op.routed.axis == "out":
            wide = replace(op, fan_out=ceil(op.fan_out * r), routed=None)
            return replace(self, op=wide, local_out=ceil(self.local_out * r)), 1 / r
        return replace(self, op=replace(op, fan_in=ceil(op.fan_in * r), routed=None)), 1 / r


@dataclass(frozen=True)
class CommStep:
    """A collective on the output of op `tensor`; `width` is the full per-token result size
    in elements (the all-gathered or all-reduced vector) of `value_bytes` each.

    `overlap` says what hides it: `none` stalls compute (DFX); `matmul_blocks` is hidden
    behind the consuming matmuls traversed column-major, local block first (seeds/002
    Eq. 4, 9); `row_groups` pipelines LayerNorm partial sums in packed row groups (Eq. 3).
    An `all_to_all` combines expert outputs (planning/experts.py): `senders` boards each send their
    `width` values to every other board.
    """

    kind: Literal["all_gather", "all_reduce", "argmax_gather", "all_to_all"]
    tensor: str
    width: int
    value_bytes: float = 2.0
    overlap: Literal["none", "matmul_blocks", "row_groups"] = "none"
    group_rows: int = 1
    # Early broadcast (seeds/002 §III-B, third method): each head's slice leaves as soon as
    # the producing op finishes that head, so the transfer starts under its remaining heads.
    early: bool = False
    # The busiest device's part of `width` (whole heads of an uneven head split); 0 for the
    # widest near-equal slice.
    local: int = 0
    senders: int = 0

    def share(self, ranks: int) -> int:
        """Elements of the widest slice one device contributes."""
        return self.local or -(-self.width // ranks)


Step = ComputeStep | CommStep


@dataclass
class DevicePlan:
    """What one device holds: shards of per-layer tensors (by role) and of the others, the
    vocabulary rows its LM head scores, and (for schemes that keep activations column-split)
    which columns of a split activation it owns."""

    rank: int
    device: Device
    layer_shards: dict[str, Shard]
    other_shards: dict[str, Shard]
    vocab_slice: tuple[int, int]
    ranks: int

    def columns(self, width: int) -> tuple[int, int]:
        """This device's columns of a column-split activation `width` wide."""
        return split_bounds(width, self.ranks, self.rank)

    def shard_for(self, tensor: WeightTensor) -> Shard:
        table = self.other_shards if tensor.layer is None else self.layer_shards
        return table[tensor.role]

    def layer_elements(self, spec: ModelSpec, memory: MemoryKind, layer: int = 0) -> int:
        """Elements of layer `layer`'s tensors this device keeps in `memory` (every layer of
        a kind, dense or MoE, shares one shard template)."""
        return sum(self.layer_shards[t.role].numel_in(t, memory)
                   for t in layer_weights(spec, layer))

    def held_bytes(self, spec: ModelSpec, bytes_per_param: float, memory: MemoryKind) -> float:
        """Bytes this device keeps in `memory`: every layer's and the others'."""
        _, outside = template_weights(spec)  # `shard_for`'s other table
        other = sum(self.other_shards[t.role].numel_in(t, memory) for t in outside)
        layers = sum(len(ids) * self.layer_elements(spec, memory, ids[0])
                     for _, ids in build_graph(spec).variants)
        return (layers + other) * bytes_per_param


class StepEngine(Engine, Protocol):
    """A core that runs a plan's steps: what the generation estimator and the search ask.
    Cycles come from one handler per op kind; `token_serial_prefill` says whether the
    prompt runs token by token (DFX) or as one matrix pass (LORA); `one_sequence` is why
    the core runs one sequence at a time (a batch then runs its sequences in turn), or None
    where a step's `sequences` run together."""

    token_serial_prefill: ClassVar[bool]
    one_sequence: ClassVar[str | None]
    # Where the core's instruction set is described (a build emits programs), or None.
    instruction_set: ClassVar[str | None]
    # `module:attribute` of the writer of its `archi build` files, (staged plan, out,
    # force) -> summary (tensor_parallel/emit.py).
    builder: ClassVar[str]

    @property
    def expert_skew(self) -> float:
        """The routing skew a step's tokens spread over a mixture's experts with
        (models/expert_routing.py; 0: uniform)."""
        ...

    @property
    def hbm_bytes_per_cycle(self) -> float: ...

    @property
    def peak_ops_per_s(self) -> float:
        """Operations per second the matrix unit can do at most (a roofline's roof)."""
        ...

    def seconds(self, step: ComputeStep, phase: Phase) -> np.ndarray: ...

    def streamed_bytes(self, step: ComputeStep, phase: Phase) -> np.ndarray:
        """Bytes `step` reads from a memory at each context (weights, the KV cache)."""
        ...

    def read_roof(self, step: ComputeStep, phase: Phase) -> tuple[str, np.ndarray] | None:
        """The memory `streamed_bytes` come from and its most bytes a second at each
        context (a roofline's slope for the step); None: the step reads none."""
        ...

    def collective_seconds(self, step: CommStep, rows: int, cluster: Cluster) -> float: ...

    def resources(self, spec: ModelSpec) -> dict[str, Resources]:
        """Resources of one core for `spec`, by unit (matrix unit, vector unit, buffers)."""
        ...


@dataclass(frozen=True)
class LayerBlock:
    """The steps of the layers of another kind than a plan's `block_steps` (DeepSeek's
    dense layers before its MoE ones): for a prompt, and for one new token (None: the
    prompt's)."""

    layers: tuple[int, ...]
    steps: list[Step]
    decode_steps: list[Step] | None = None


@dataclass
class Plan:
    """Strategy output. `engine` is the compute core every device runs."""

    strategy: str
    scheme: str
    spec: ModelSpec
    graph: Graph
    cluster: Cluster
    engine: StepEngine
    bytes_per_param: float
    embed_steps: list[Step]
    block_steps: list[Step]
    output_steps: list[Step]
    devices: list[DevicePlan]
    numerics: str = "fp16"  # the datapath's number format (number_formats.py)
    # Bytes of one cached key or value (None: `bytes_per_param`, the weights')
    kv_bytes: float | None = None
    # The block a pass of one new token runs where it differs from a prompt's (latent
    # attention absorbed, graph.absorbed_block); None: `block_steps` alike.
    decode_steps: list[Step] | None = None
    # The layers of other kinds (graph.variants after the first), each with its steps.
    other_blocks: list[LayerBlock] = field(default_factory=list)

    def layer_steps(self, rows: int, layer: int | None = None) -> list[Step]:
        """The block steps of a pass of `rows` new tokens per sequence through `layer`
        (None: the layers most of the model runs)."""
        block = next((b for b in self.other_blocks if layer in b.layers), None)
        steps, one = (self.block_steps, self.decode_steps) if block is None \
            else (block.steps, block.decode_steps)
        return one if rows == 1 and one is not None else steps

    def block_counts(self, start: int, count: int) -> list[tuple[int | None, int]]:
        """(a layer of each kind, None for the most common, and how many of them) among
        layers [start, start + count): the most common kind first, always; the others
        where the range holds any."""
        others = [(b.layers[0], sum(start <= i < start + count for i in b.layers))
                  for b in self.other_blocks]
        return [(None, count - sum(n for _, n in others)), *((i, n) for i, n in others if n)]

    @property
    def ranks(self) -> int:
        return len(self.devices)

    @property
    def kv_value_bytes(self) -> float:
        """Bytes of one cached key or value in the plan's format."""
        return self.bytes_per_param if self.kv_bytes is None else self.kv_bytes

    def fabric(self, rank: int) -> Resources:
        """The fabric rank `rank`'s design may use: its cluster node's, which a cluster
        file may set below the catalog board's (a shell's share taken out)."""
        return self.cluster.nodes[rank].resources

    def comm_steps(self) -> list[CommStep]:
        return [s for s in self.block_steps if isinstance(s, CommStep)]
