"""Read a LORA build's board layouts back and check them against the model itself, not the
plan: each region's bytes from its shape and the number format, every region inside its
memory and channel, no two regions overlapping, and every element of every weight counted
where its tiles or rows say it lies, so a test can compare the counts with the split seeds/002
§III describes."""

import json
from collections import defaultdict
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np

from archipelago.models.spec import ModelSpec
from archipelago.models.weights import all_weights


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def layouts(out: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(out.glob("board*/layout.json"))]


def check_ranges(layout: dict[str, Any]) -> None:
    """Every region in bounds, aligned, on the channel range its base says; none overlap."""
    by_memory: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for region in layout["regions"]:
        by_memory[region["memory"]].append(region)
    for memory, regions in by_memory.items():
        spec = layout["memories"][memory]
        regions.sort(key=lambda r: r["base"])
        for region, after in pairwise(regions):
            assert region["base"] + region["bytes"] <= after["base"], (region, after)
        last = regions[-1]
        assert last["base"] + last["bytes"] <= spec["used_bytes"] <= spec["capacity_bytes"]
        for region in regions:
            assert region["base"] % spec["align"] == 0 and region["bytes"] > 0
            if memory == "hbm":
                channels, beat = spec["channels"], spec["channel_bytes"]
                stripe = channels * beat
                first = region["base"] // channels
                assert region["channel_range"] == [
                    first, first + ceil_div(region["bytes"], stripe) * beat]
                assert region["channel_range"][1] <= spec["channel_capacity_bytes"]


def _tile_bytes(region: dict[str, Any]) -> int:
    return ceil_div(region["tile"] ** 2 * region["bits"], 8)


def count(spec: ModelSpec, boards: list[dict[str, Any]]) -> dict[tuple[str, str], np.ndarray]:
    """(tensor name, memory) -> how often each element is placed, over `boards`; tiles
    walked in stream order (row_blocks, then left to right, `_mark_tiles`)."""
    shapes = {t.name: t.shape for t in all_weights(spec)}
    counts: dict[tuple[str, str], np.ndarray] = {}
    for layout in boards:
        for region in layout["regions"]:
            kind = region["kind"]
            if kind in ("kv", "scales"):
                continue
            key = (region["tensor"], region["memory"])
            shape = shapes[region["tensor"]]
            mark = counts.setdefault(key, np.zeros(shape, np.int8))
            if kind == "rows":
                mark[tuple(slice(a, b) for a, b in region["ranges"])] += 1
                assert region["bytes"] == np.prod([b - a for a, b in region["ranges"]]) * 2
                continue
            _mark_tiles(region, mark)
    return counts


def _mark_tiles(region: dict[str, Any], mark: np.ndarray) -> None:
    """Walk the stream: tile i is in tile row row_blocks[i // tile_cols], tile column
    i % tile_cols; every tile of the grid must be streamed exactly once, and the grid's
    rectangle (partial tiles clipped) is then marked."""
    t = region["tile"]
    (r0, r1), (c0, c1) = region["rows"], region["cols"]
    tile_rows, tile_cols = ceil_div(r1 - r0, t), ceil_div(c1 - c0, t)
    order = np.asarray(region["row_blocks"])
    assert sorted(region["row_blocks"]) == list(range(tile_rows))
    stream = np.arange(tile_rows * tile_cols)
    grid = np.zeros((tile_rows, tile_cols), np.int64)
    np.add.at(grid, (order[stream // tile_cols], stream % tile_cols), 1)
    assert (grid == 1).all()
    stack = region["stack"] or [0, 1]
    view = mark.T if region["transposed"] else mark
    if region["stack"] is None:
        view = view[None]
    view[stack[0]:stack[1], r0:r1, c0:c1] += 1
    assert region["bytes"] == (stack[1] - stack[0]) * tile_rows * tile_cols * _tile_bytes(region)
