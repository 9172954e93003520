"""Where one LORA board keeps its weights and KV cache: the layout its Control Unit's
address generators are built from (seeds/002 §IV-A, §V-C).

- HBM: one striped address space over the core's `hbm_channels` pseudo-channels, a beat of
  `hbm_axi_bits` each (hbm_striping.py, as DFX's map): every region starts on a stripe, so
  each channel holds the same range of it (`channel_range`) and a tile stream draws on all
  channels at once. It holds the decode copy of every matrix (§V-C: "the weights for the
  Decode stage") and the KV cache past what the URAMs hold: each layer's matrices in the
  order they run, then its spilled KV cache; the LM head's copy after the layers.
- DDR, flat: the prefill copy of every matrix (§V-C), the embedding tables, the biases and
  norm parameters (on a board without DDR the plan puts them in HBM, shards.py).
- URAM: the `kv_uram` URAMs as one flat space (kv.py).

Matrices, the weights the MPU streams, are stored in the plan's number format as T_m x T_m
tiles (Fig. 3b, Fig. 8), row-major inside a tile, `bits` per value (two INT4 a byte), a
partial tile padded whole (the MPU loads whole tiles, systolic.py). A tile row is the T_m
input rows one activation tile meets; tile rows (`row_blocks`) run in the order the
Control Unit consumes the gathered input (§III-B's fourth method, Eq. 4 traversed
column-major): this board's own activation columns first, then each peer's as the ring
delivers it, nearest first (LORA's router gathers both ways round the ring, §IV-C); each
tile row's tiles left to right. A group-quantized format's FP16 scales (one per GROUP_SIZE
input rows of each column) follow the tiles in a region of their own. Embedding tables,
biases and norm parameters stay FP16 row-major (the VFU's operands: SmoothQuant and
AWQ/GPTQ quantize the linear layers only).
"""

from typing import Any

from archipelago.models.graph_ops import Op
from archipelago.models.weights import (
    WeightTensor,
    embedding_weights,
    layer_weights,
    output_weights,
)
from archipelago.number_formats import SCALE_BYTES
from archipelago.strategies.tensor_parallel.engines.systolic import SystolicEngine
from archipelago.strategies.tensor_parallel.engines.systolic_resources import URAM_BYTES
from archipelago.strategies.tensor_parallel.hbm_striping import Striping, ceil_div
from archipelago.strategies.tensor_parallel.lora_build.kv import place_kv
from archipelago.strategies.tensor_parallel.lora_build.regions import Memory, Space
from archipelago.strategies.tensor_parallel.plan import CommStep, Plan, Shard
from archipelago.strategies.tensor_parallel.planning.heads import head_share
from archipelago.strategies.tensor_parallel.planning.shards import columns
from archipelago.strategies.tensor_parallel.staged import Stage

FP16_BITS = 16
Ranges = list[list[int]]


def spaces(plan: Plan, rank: int) -> dict[Memory, Space]:
    """Board `rank`'s HBM, DDR and URAM bank, empty."""
    device, engine = plan.devices[rank].device, plan.engine
    assert isinstance(engine, SystolicEngine)
    c = engine.config
    hbm, ddr = device.memory("hbm"), device.memory("ddr")
    assert hbm is not None, "LORA streams decode weights from HBM (seeds/002 §V-C)"
    beat = c.hbm_axi_bits // 8
    striping = Striping(c.hbm_channels, beat)
    # the core's channels' share of the board's HBM (it may use fewer than the board has)
    hbm_bytes = hbm.capacity_bytes // hbm.channels * min(c.hbm_channels, hbm.channels)
    out: dict[Memory, Space] = {
        "hbm": Space("hbm", hbm_bytes, striping.stripe, striping),
        "uram": Space("uram", c.kv_uram * URAM_BYTES, 1)}
    if ddr is not None:  # one beat of the same 512-bit AXI port aligns DDR regions
        out["ddr"] = Space("ddr", ddr.capacity_bytes, beat)
    return out


class BoardLayout:
    """Board `rank` of stage `stage` (node `stage.nodes[rank]`): its regions by memory."""

    def __init__(self, stage: Stage, rank: int) -> None:
        self.stage, self.rank, self.plan = stage, rank, stage.program
        self.node = stage.nodes[rank]
        self.engine = engine = self.plan.engine
        assert isinstance(engine, SystolicEngine)
        self.format = engine.format
        self.spaces = spaces(self.plan, rank)
        self._owners = _input_owners(self.plan)
        spec, device = self.plan.spec, self.plan.devices[rank]
        for layer in stage.layers:
            for tensor in layer_weights(spec, layer):
                self._place(tensor, device.layer_shards[tensor.role], len(tensor.shape) >= 2)
            place_kv(self.plan, rank, layer, self.add)
        graph = self.plan.graph
        head = next(op.weight for op in graph.output if op.kind == "lm_head")
        for tensor in embedding_weights(spec):  # tables, but a projection is a matrix
            shard = device.other_shards[tensor.role]
            if stage.first:
                self._place(tensor, Shard(shard.axis, shard.start, shard.stop, shard.memory),
                            _runs_linear(graph.embed, tensor))
            if stage.last and tensor.role == f"{head}.weight" and shard.mirror:
                self._mirror_head(tensor, shard)
        if stage.last:
            for tensor in output_weights(spec):
                self._place(tensor, device.other_shards[tensor.role],
                            _runs_linear(graph.output, tensor))

    def add(self, memory: Memory, name: str, size: int, holds: dict[str, Any]) -> None:
        self.spaces[memory].add(name, size, holds, self.node)

    # --- weights -----------------------------------------------------------------------
    def _place(self, tensor: WeightTensor, shard: Shard, matrix: bool) -> None:
        """Each copy the shard says (its memory, its mirror): tiled where the MPU streams
        it (`matrix`), else row-major."""
        ranges = [[0, n] for n in tensor.shape]
        if shard.axis is not None:
            ranges[shard.axis] = [shard.start, shard.stop]
        copies: list[Memory] = [shard.memory]  # type: ignore[list-item]
        if shard.mirror is not None:
            copies.append(shard.mirror)  # type: ignore[arg-type]
        for memory in copies:
            if matrix:
                self._tiles(tensor, memory, ranges, transposed=False)
            else:
                self.add(memory, f"{tensor.name}@{memory}", _numel(ranges) * FP16_BITS // 8,
                         {"kind": "rows", "tensor": tensor.name, "ranges": ranges,
                          "bits": FP16_BITS})

    def _mirror_head(self, tensor: WeightTensor, shard: Shard) -> None:
        """A tied LM head: this board's vocabulary rows of the token table, transposed into
        a (width x vocabulary slice) matrix like any the MPU streams (seeds/001 §IV-B)."""
        rows = shard.mirror_rows or (0, tensor.shape[0])
        self._tiles(tensor, shard.mirror, [[rows[0], rows[1]], [0, tensor.shape[1]]],  # type: ignore[arg-type]
                    transposed=True)

    def _tiles(self, tensor: WeightTensor, memory: Memory, ranges: Ranges,
               transposed: bool) -> None:
        """The tiles of a matrix (a stack of them: a mixture's experts) and its scales."""
        t_m, fmt = self.engine.config.t_m, self.format
        *stack, rows, cols = ranges
        if transposed:
            rows, cols = cols, rows
        count = _numel(stack)
        tile_rows, tile_cols = ceil_div(rows[1] - rows[0], t_m), ceil_div(cols[1] - cols[0], t_m)
        tile_bytes = ceil_div(t_m * t_m * fmt.weight_bits, 8)
        name = tensor.role.split(".")[0]
        holds = {"kind": "tiles", "tensor": tensor.name, "stack": stack[0] if stack else None,
                 "rows": rows, "cols": cols, "transposed": transposed, "tile": t_m,
                 "bits": fmt.weight_bits, "tile_bytes": tile_bytes,
                 "row_blocks": self._row_blocks(name, rows, t_m)}
        self.add(memory, f"{tensor.name}@{memory}",
                 count * tile_rows * tile_cols * tile_bytes, holds)
        if fmt.group:
            groups = ceil_div(rows[1] - rows[0], fmt.group)
            self.add(memory, f"{tensor.name}.scales@{memory}",
                     count * groups * (cols[1] - cols[0]) * SCALE_BYTES,
                     {"kind": "scales", "tensor": tensor.name, "stack": holds["stack"],
                      "rows": rows, "cols": cols, "transposed": transposed,
                      "group": fmt.group, "bits": SCALE_BYTES * 8})

    def _row_blocks(self, op_weight: str, rows: list[int], t_m: int) -> list[int]:
        """Tile rows in the order their input arrives: the board's own columns first, then
        the peers' by ring distance (natural order for an input every board holds)."""
        blocks = list(range(ceil_div(rows[1] - rows[0], t_m)))
        owners = self._owners.get(op_weight)
        if owners is None:
            return blocks
        ranks = len(owners)

        def owner(block: int) -> int:
            row = rows[0] + block * t_m
            return next((r for r, (a, b) in enumerate(owners) if a <= row < b), 0)

        def key(block: int) -> tuple[int, int, int]:
            d = (owner(block) - self.rank) % ranks
            return min(d, ranks - d), d, block

        return sorted(blocks, key=key)

    def as_json(self) -> dict[str, Any]:
        return {"board": self.node, "rank": self.rank, "ranks": len(self.stage.nodes),
                "stage": self.stage.index,
                "layers": [self.stage.layers.start, self.stage.layers.stop],
                "format": self.format.name,
                "memories": {m: s.as_json() for m, s in self.spaces.items()},
                "regions": [s.region_json(r) for s in self.spaces.values() for r in s.regions]}


def _runs_linear(ops: tuple[Op, ...], tensor: WeightTensor) -> bool:
    """Whether one of `ops` multiplies by `tensor` (a matrix the MPU streams)."""
    role = tensor.role.split(".")
    return role[1] == "weight" and any(op.weight == role[0] and op.kind in ("linear", "lm_head")
                                       for op in ops)


def _numel(ranges: Ranges) -> int:
    out = 1
    for start, stop in ranges:
        out *= stop - start
    return out


def _input_owners(plan: Plan) -> dict[str, list[tuple[int, int]] | None]:
    """For each linear op's weight: which input rows each board produces, where its input
    is all-gathered (the column split of the producing op, shards.columns), else None."""
    spec, ranks = plan.spec, plan.ranks
    blocks = [plan.embed_steps, plan.output_steps, plan.block_steps, plan.decode_steps or [],
              *([*b.steps, *(b.decode_steps or [])] for b in plan.other_blocks)]
    gathered = {s.tensor for steps in blocks for s in steps
                if isinstance(s, CommStep) and s.kind == "all_gather"}
    graph = plan.graph
    ops = [*graph.embed, *graph.output, *(op for block, _ in graph.variants for op in block),
           *graph.block]
    out: dict[str, list[tuple[int, int]] | None] = {}
    for op in ops:
        if op.weight is None or op.kind not in ("linear", "lm_head"):
            continue
        producer = op.inputs[0] if op.inputs else None
        out[op.weight] = None if producer not in gathered else [
            columns(spec, producer, op.fan_in, ranks, r, head_share(spec, ranks, r))
            for r in range(ranks)]
    return out
