"""Where one DFX core's weight shard, KV cache and tables live in HBM and DDR (seeds/001
§IV-B "Memory Mapping", §V-B "Tiling Scheme", "Transpose Scheme").

HBM matrices (every weight the MFU streams, the KV cache, the LM head) are stored as d x l
FP16 tiles, one tile per beat of the DMA's 32 x 512-bit stream at (d, l) = (64, 16) (§V-B).
A tile holds its l lanes' columns one after another, d values each: the lane a column of the
weight matrix feeds reads one contiguous run, so a vector written contiguously lands as a
column (§V-B: "the read from the HBM is column-wise and the write is row-wise"): a Key row
becomes a column of K^T for free, a Value row must go through the DMA's transpose unit to
become a row of V. Tiles follow the zigzag of Fig. 9: d / l tiles across (a d x d block,
the input of length d reused by each), then down the matrix, then the next block column.

HBM addresses are the DMA's striped view: consecutive beats of `channel_bytes` rotate over
the channels, so one tile is spread over all of them (`channel_of`). Each decoder layer
owns one block of HBM (its weights in the order they run, then its K and V caches) and one
block of DDR (norm parameters and biases); the controller reaches layer i's blocks by adding
i strides (§V-A). What the plan places in DDR (biases, norm parameters, WTE/WPE rows read
once per token, §IV-B) is stored row-major; on a board without DDR it goes to HBM like the
plan says.
"""

from dataclasses import dataclass
from typing import Any, Literal

from archipelago.errors import PartitionError
from archipelago.models.weights import template_weights
from archipelago.strategies.tensor_parallel.dfx_program.isa import DDR_BYTES, HBM_BYTES
from archipelago.strategies.tensor_parallel.engines.dfx import DFXConfig
from archipelago.strategies.tensor_parallel.hbm_striping import Striping, ceil_div
from archipelago.strategies.tensor_parallel.plan import Plan

Memory = Literal["hbm", "ddr"]
VALUE_BYTES = 2  # FP16 (seeds/001 §IV-B)
CAPACITY: dict[str, int] = {"hbm": HBM_BYTES, "ddr": DDR_BYTES}


@dataclass(frozen=True)
class Tiling:
    """The tile shape and the HBM stream it is cut for."""

    d: int
    l: int  # noqa: E741
    channels: int
    channel_bytes: int  # one channel's beat

    @classmethod
    def of(cls, config: DFXConfig) -> "Tiling":
        return cls(config.d, config.l, config.hbm_channels, config.channel_bits // 8)

    @property
    def group(self) -> int:
        """Tiles across one d x d zigzag block (§V-B, Fig. 9)."""
        return max(1, self.d // self.l)

    @property
    def tile_bytes(self) -> int:
        return self.d * self.l * VALUE_BYTES

    @property
    def stripe(self) -> int:
        """Bytes of one beat over every channel: the alignment of every HBM region."""
        return self.striping.stripe

    def grid(self, rows: int, cols: int) -> tuple[int, int]:
        return ceil_div(rows, self.d), ceil_div(cols, self.l)

    def tile_index(self, rows: int, cols: int, tr: int, tc: int) -> int:
        """Position of tile (tr, tc) in the zigzag stream."""
        tile_rows, tile_cols = self.grid(rows, cols)
        g, j = divmod(tc, self.group)
        width = min(self.group, tile_cols - g * self.group)
        return g * self.group * tile_rows + tr * width + j

    def tile_at(self, rows: int, cols: int, index: int) -> tuple[int, int]:
        """Inverse of `tile_index`."""
        tile_rows, tile_cols = self.grid(rows, cols)
        g, rest = divmod(index, self.group * tile_rows)
        width = min(self.group, tile_cols - g * self.group)
        tr, j = divmod(rest, width)
        return tr, g * self.group + j

    def zigzag(self, rows: int, cols: int) -> list[tuple[int, int]]:
        """Every tile (tile row, tile column) in stream order."""
        tile_rows, tile_cols = self.grid(rows, cols)
        return [self.tile_at(rows, cols, i) for i in range(tile_rows * tile_cols)]

    def offset(self, rows: int, cols: int, r: int, c: int) -> int:
        """Byte offset of element (r, c) from the matrix's base: its tile's place in the
        stream, then lane-major inside the tile."""
        tile = self.tile_index(rows, cols, r // self.d, c // self.l)
        return (tile * self.d * self.l + (c % self.l) * self.d + r % self.d) * VALUE_BYTES

    def element(self, rows: int, cols: int, offset: int) -> tuple[int, int] | None:
        """Inverse of `offset`; None for the padding of a partial tile."""
        tile, inside = divmod(offset // VALUE_BYTES, self.d * self.l)
        tr, tc = self.tile_at(rows, cols, tile)
        lane, r = divmod(inside, self.d)
        row, col = tr * self.d + r, tc * self.l + lane
        return (row, col) if row < rows and col < cols else None

    def token_offsets(self, width: int, context: int, token: int, transpose: bool
                      ) -> list[int]:
        """Byte offsets, from a KV cache matrix's base, of the `width` values a dma store
        with TOKEN writes for `token`: column `token` of K^T (width x context), or with
        TRANSPOSE row `token` of V (context x width) (§V-B)."""
        if transpose:
            return [self.offset(context, width, token, c) for c in range(width)]
        return [self.offset(width, context, r, token) for r in range(width)]

    def covering_tiles(self, rows: int, cols: int, used_rows: int, used_cols: int
                       ) -> list[int]:
        """Stream positions of the tiles holding [0:used_rows, 0:used_cols] of a rows x cols
        matrix, in stream order: what a CONTEXT dma of the KV cache reads."""
        tr, tc = self.grid(used_rows, used_cols)
        return sorted(self.tile_index(rows, cols, r, c) for r in range(tr) for c in range(tc))

    @property
    def striping(self) -> Striping:
        """The HBM's striped view (hbm_striping.py, shared with LORA's layout)."""
        return Striping(self.channels, self.channel_bytes)

    def channel_of(self, address: int) -> tuple[int, int]:
        """(channel, byte offset inside that channel) of a striped HBM address."""
        return self.striping.channel_of(address)

    def striped(self, channel: int, offset: int) -> int:
        """Inverse of `channel_of`."""
        return self.striping.striped(channel, offset)


@dataclass(frozen=True)
class Region:
    """A matrix or vector table: `rows` x `cols` FP16 values from `base` (layer 0's when
    `per_layer`), tiled (HBM matrices) or row-major."""

    name: str
    memory: Memory
    base: int
    rows: int
    cols: int
    tiled: bool
    per_layer: bool

    def size(self, tiling: Tiling) -> int:
        if not self.tiled:
            return self.rows * self.cols * VALUE_BYTES
        tile_rows, tile_cols = tiling.grid(self.rows, self.cols)
        return tile_rows * tile_cols * tiling.tile_bytes

    def as_json(self, tiling: Tiling) -> dict[str, Any]:
        return {"name": self.name, "memory": self.memory, "base": self.base,
                "bytes": self.size(tiling), "rows": self.rows, "cols": self.cols,
                "layout": "tiled-zigzag" if self.tiled else "row-major",
                "per_layer": self.per_layer}


class _Allocator:
    """Bump allocation in one memory, every region aligned to `align` bytes."""

    def __init__(self, memory: Memory, align: int, tiling: Tiling) -> None:
        self.memory, self.align, self.tiling, self.top = memory, align, tiling, 0
        self.regions: list[Region] = []

    def add(self, name: str, rows: int, cols: int, tiled: bool, per_layer: bool) -> Region:
        region = Region(name, self.memory, self.top, rows, cols, tiled, per_layer)
        self.top += ceil_div(region.size(self.tiling), self.align) * self.align
        self.regions.append(region)
        return region


@dataclass(frozen=True)
class MemoryMap:
    """One core's HBM and DDR contents; layer i of a per-layer region is at its base plus
    i strides of its memory."""

    tiling: Tiling
    layers: int
    regions: dict[str, Region]
    strides: dict[str, int]
    used: dict[str, int]

    def region_address(self, name: str, layer: int = 0) -> int:
        region = self.regions[name]
        return region.base + (layer * self.strides[region.memory] if region.per_layer else 0)

    def address(self, name: str, row: int, col: int, layer: int = 0) -> int:
        """Byte address (striped for HBM) of element (row, col) of region `name`."""
        region = self.regions[name]
        if not (0 <= row < region.rows and 0 <= col < region.cols):
            raise IndexError(f"{name}: ({row}, {col}) outside {region.rows} x {region.cols}")
        inside = (self.tiling.offset(region.rows, region.cols, row, col) if region.tiled
                  else (row * region.cols + col) * VALUE_BYTES)
        return self.region_address(name, layer) + inside

    def locate(self, memory: Memory, address: int) -> tuple[str, int, int, int] | None:
        """Inverse of `address`: (region, layer, row, col), None for padding or free space."""
        for region in self.regions.values():
            if region.memory != memory:
                continue
            layers = self.layers if region.per_layer else 1
            layer, inside = divmod(address - region.base, self.strides[memory])
            if not region.per_layer:
                layer, inside = 0, address - region.base
            if not (0 <= layer < layers and 0 <= inside < region.size(self.tiling)):
                continue
            if region.tiled:
                at = self.tiling.element(region.rows, region.cols, inside)
            else:
                at = divmod(inside // VALUE_BYTES, region.cols)
            return None if at is None else (region.name, layer, *at)
        return None

    def as_json(self) -> dict[str, Any]:
        t = self.tiling
        return {"tile": {"d": t.d, "l": t.l, "bytes": t.tile_bytes, "order": "zigzag"},
                "hbm": {"channels": t.channels, "channel_bytes": t.channel_bytes,
                        "striping": "beat b of channel_bytes lies in channel b % channels"},
                "layers": self.layers, "layer_stride": self.strides,
                "used_bytes": self.used,
                "regions": [r.as_json(t) for r in self.regions.values()]}


def memory_map(plan: Plan, rank: int, config: DFXConfig) -> MemoryMap:
    """The map of core `rank`: its weight shards from the plan, whole-context KV caches for
    its heads (`max_positions` tokens), the tables and the token buffer."""
    spec, device = plan.spec, plan.devices[rank]
    tiling = Tiling.of(config)
    block_align = {"hbm": tiling.stripe, "ddr": tiling.channel_bytes}
    alloc = {m: _Allocator(m, block_align[m], tiling) for m in ("hbm", "ddr")}
    matrices = [op for op in plan.graph.block if op.kind == "linear"]
    # in the order they run, Value first (§V-B's reordering; the plan already lists v, k, q)
    ordered = sorted(matrices, key=lambda op: op.name != "v")
    for op in ordered:
        shard = device.layer_shards[f"{op.weight}.weight"]
        alloc[_memory(shard.memory)].add(f"{op.weight}.weight", op.fan_in,
                                          shard.stop - shard.start, True, True)
    k = device.layer_shards["k.weight"]
    for h in range((k.stop - k.start) // spec.head_dim):
        alloc["hbm"].add(f"k_cache.h{h}", spec.head_dim, spec.max_positions, True, True)
        alloc["hbm"].add(f"v_cache.h{h}", spec.max_positions, spec.head_dim, True, True)
    block, _ = template_weights(spec)
    for tensor in block:
        if tensor.role in regions_of(alloc):
            continue
        shard = device.layer_shards[tensor.role]
        cols = shard.stop - shard.start if shard.axis is not None else tensor.shape[-1]
        alloc[_memory(shard.memory)].add(tensor.role, 1, cols, False, True)
    strides = {m: a.top for m, a in alloc.items()}
    for a in alloc.values():
        a.top *= spec.layers
    _tables(plan, rank, alloc)
    regions = {r.name: r for a in alloc.values() for r in a.regions}
    used = {m: a.top for m, a in alloc.items()}
    for memory, top in used.items():
        if top > CAPACITY[memory]:
            raise PartitionError(f"core {rank}'s {memory.upper()} image is {top / 2**30:.2f} "
                                 f"GiB; the U280 has {CAPACITY[memory] >> 30} GiB (seeds/001 "
                                 "§IV-B)")
    return MemoryMap(tiling, spec.layers, regions, strides, used)


def _memory(kind: str) -> Memory:
    if kind not in ("hbm", "ddr"):
        raise PartitionError(f"a DFX program keeps weights in HBM or DDR, not {kind}")
    return kind  # type: ignore[return-value]


def _tables(plan: Plan, rank: int, alloc: dict[Memory, _Allocator]) -> None:
    """Regions outside the layers: the token buffer, the constants, WTE/WPE rows, the final
    norm, and the LM head's tiled HBM copy of the token table (§IV-B)."""
    spec, device = plan.spec, plan.devices[rank]
    tables = _memory(device.other_shards[f"{plan.graph.embed[0].weight}.weight"].memory)
    alloc[tables].add("tokens", 1, spec.max_positions, False, False)  # 16-bit token IDs
    alloc[tables].add("consts", 1, 1, False, False)  # LayerNorm's epsilon
    head = next(op for op in plan.graph.output if op.kind == "lm_head")
    _, outside = template_weights(spec)
    for tensor in outside:
        rows, cols = tensor.shape if len(tensor.shape) == 2 else (1, tensor.shape[0])
        alloc[_memory(device.other_shards[tensor.role].memory)].add(
            tensor.role, rows, cols, False, False)
        if tensor.role == f"{head.weight}.weight":
            # the table transposed, tiled like any MM weight (fan_in x vocabulary)
            alloc["hbm"].add("lm_head", head.fan_in, head.fan_out, True, False)


def regions_of(alloc: dict[Memory, _Allocator]) -> set[str]:
    return {r.name for a in alloc.values() for r in a.regions}
