"""A DFX core's off-chip memories holding values, addressed the way the programs address
them (isa.py: off-chip addresses count bytes; values are 16-bit words, FP16 or token IDs).

HBM is 32 channels (seeds/001 §IV-B, §V-B): a striped address lies in the channel
layout.py's `Tiling.channel_of` names, so a tiled matrix written through the layout is
spread over every channel, one d x l tile per beat of all of them (`OffChip.channel` shows
a channel's contents). DDR is one flat array. Only the bytes the memory map uses are
allocated.
"""

from functools import cache

import numpy as np

from archipelago.strategies.tensor_parallel.dfx_program.layout import (
    VALUE_BYTES,
    MemoryMap,
    Tiling,
    ceil_div,
)

WORD = np.uint16  # one FP16 value or token ID


@cache
def tile_offsets(tiling: Tiling, rows: int, cols: int) -> np.ndarray:
    """Byte offset from a tiled rows x cols matrix's base of every element, (rows, cols):
    `Tiling.offset` over the whole matrix at once."""
    r, c = np.arange(rows)[:, None], np.arange(cols)[None, :]
    tile_rows, tile_cols = tiling.grid(rows, cols)
    g, j = np.divmod(c // tiling.l, tiling.group)
    width = np.minimum(tiling.group, tile_cols - g * tiling.group)
    tile = g * tiling.group * tile_rows + (r // tiling.d) * width + j
    inside = (c % tiling.l) * tiling.d + r % tiling.d
    offsets = (tile * tiling.d * tiling.l + inside) * VALUE_BYTES
    offsets.flags.writeable = False
    return offsets


class OffChip:
    """HBM or DDR, `size` bytes from address 0, as one array of 16-bit words in address
    order. For HBM that order is the DMA's striped view, so channel c's contents are a
    view of the same array (`channel`): beat b of every channel_bytes lies in channel
    b % channels, as `Tiling.channel_of` says."""

    def __init__(self, tiling: Tiling | None, size: int) -> None:
        self.tiling = tiling
        unit = VALUE_BYTES if tiling is None else tiling.stripe
        self.words = np.zeros(ceil_div(size, unit) * unit // VALUE_BYTES, WORD)

    def channel(self, channel: int) -> np.ndarray:
        """HBM channel `channel`'s words in its own address order (a view)."""
        t = self.tiling
        if t is None:
            raise ValueError("DDR is one channel-wide port, not striped")
        beat = t.channel_bytes // VALUE_BYTES
        return self.words.reshape(-1, t.channels, beat)[:, channel, :].reshape(-1)

    def read(self, addresses: np.ndarray) -> np.ndarray:
        return self.words[np.asarray(addresses) // VALUE_BYTES]

    def write(self, addresses: np.ndarray, words: np.ndarray) -> None:
        self.words[np.asarray(addresses) // VALUE_BYTES] = words

    def span(self, address: int, count: int) -> np.ndarray:
        """Byte addresses of `count` consecutive words from `address`."""
        return address + VALUE_BYTES * np.arange(count)


def memories(memory_map: MemoryMap) -> dict[str, OffChip]:
    """Empty HBM and DDR of one core, as large as its map uses."""
    return {"hbm": OffChip(memory_map.tiling, memory_map.used["hbm"]),
            "ddr": OffChip(None, memory_map.used["ddr"])}


def as_words(values: np.ndarray) -> np.ndarray:
    """FP16 values as the 16-bit words memory holds."""
    return np.ascontiguousarray(values, dtype=np.float16).view(WORD)


def as_fp16(words: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(words, dtype=WORD).view(np.float16)
