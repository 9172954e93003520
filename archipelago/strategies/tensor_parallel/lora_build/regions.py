"""A LORA board's memories as bump-allocated regions: HBM in the striped view DFX's map
uses too (hbm_striping.py), DDR and the URAM bank flat. A region that would pass a
memory's capacity is a one-line refusal naming the board, the memory and the sizes."""

from dataclasses import dataclass, field
from typing import Any, Literal

from archipelago.errors import PartitionError
from archipelago.strategies.tensor_parallel.hbm_striping import Striping, aligned

Memory = Literal["hbm", "ddr", "uram"]


@dataclass(frozen=True)
class Region:
    """`size` bytes from `base` in `memory`, holding what `holds` says (layout.py)."""

    name: str
    memory: Memory
    base: int
    size: int
    holds: dict[str, Any]


@dataclass
class Space:
    """One memory of a board: regions bump-allocated from 0, each aligned to `align`
    (HBM: a whole stripe, so every channel holds the same range of it)."""

    memory: Memory
    capacity: int
    align: int
    striping: Striping | None = None
    top: int = 0
    regions: list[Region] = field(default_factory=list)

    def add(self, name: str, size: int, holds: dict[str, Any], board: int) -> Region:
        region = Region(name, self.memory, self.top, size, holds)
        self.top += aligned(size, self.align)
        if self.top > self.capacity:
            raise PartitionError(f"board {board}'s {self.memory.upper()} layout needs more "
                                 f"than its {self.capacity:,} bytes at {name} "
                                 f"({self.top:,} bytes)")
        self.regions.append(region)
        return region

    def region_json(self, region: Region) -> dict[str, Any]:
        out = {"name": region.name, "memory": region.memory, "base": region.base,
               "bytes": region.size, **region.holds}
        if self.striping is not None:
            out["channel_range"] = list(self.striping.channel_range(region.base, region.size))
        return out

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"capacity_bytes": self.capacity, "used_bytes": self.top,
                               "align": self.align}
        if self.striping is not None:
            s = self.striping
            out |= {"channels": s.channels, "channel_bytes": s.channel_bytes,
                    "channel_capacity_bytes": self.capacity // s.channels,
                    "striping": "beat b of channel_bytes lies in channel b % channels"}
        return out
