"""The host's side of a DFX run (seeds/001 §IV-B, §V-A): write each core's shard of the
FP16 weights into its HBM and DDR through the memory map (tiled matrices through the
zigzag tile layout, everything else row-major), the prompt's token IDs into the token
buffer, and LayerNorm's epsilon into the constants; read the generated tokens back.

Weights come as full (unsplit) tensors by canonical name (models/weights.py: matrices are
(in_features, out_features)); each core's slice is the one its DevicePlan names.
"""

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from archipelago.errors import ArchipelagoError
from archipelago.models.spec import ModelSpec
from archipelago.models.weights import all_weights, template_weights
from archipelago.strategies.tensor_parallel.dfx_program.layout import (
    VALUE_BYTES,
    MemoryMap,
    Region,
)
from archipelago.strategies.tensor_parallel.dfx_program.memory import (
    WORD,
    OffChip,
    as_words,
    tile_offsets,
)
from archipelago.strategies.tensor_parallel.plan import Plan, Shard

Weights = Mapping[str, np.ndarray]


def _slice(data: np.ndarray, shard: Shard) -> np.ndarray:
    if shard.axis is None:
        return data
    index = [slice(None)] * data.ndim
    index[shard.axis] = slice(shard.start, shard.stop)
    return data[tuple(index)]


def write_region(mem: OffChip, memory_map: MemoryMap, region: Region, layer: int,
                 values: np.ndarray) -> None:
    """`values` (rows x cols, any float) as FP16 words into `region` of `layer`."""
    if values.shape != (region.rows, region.cols):
        raise ArchipelagoError(f"weights for {region.name}: shape {values.shape}, the memory "
                               f"map holds {region.rows} x {region.cols}")
    base = memory_map.region_address(region.name, layer)
    offsets = (tile_offsets(memory_map.tiling, region.rows, region.cols) if region.tiled
               else VALUE_BYTES * np.arange(values.size).reshape(values.shape))
    mem.write(base + offsets, as_words(values))


def _tensor(weights: Weights, name: str) -> np.ndarray:
    if name not in weights:
        raise ArchipelagoError(f"weights: no tensor '{name}' (canonical names, e.g. "
                               f"{', '.join(list(weights)[:3])})")
    return np.asarray(weights[name])


def load_image(plan: Plan, rank: int, memory_map: MemoryMap, mems: dict[str, OffChip],
               weights: Weights, norm_eps: float, prompt: list[int]) -> None:
    """Core `rank`'s HBM/DDR image: its weight shards of every layer, the tables, the LM
    head (the token table transposed, tiled like any MM weight), epsilon and the prompt;
    the KV caches start empty."""
    spec, device = plan.spec, plan.devices[rank]
    block, outside = template_weights(spec)
    per_layer = {t.role for t in block}
    head = next(op for op in plan.graph.output if op.kind == "lm_head")
    for region in memory_map.regions.values():
        mem = mems[region.memory]
        if region.name in per_layer:
            shard = device.layer_shards[region.name]
            for layer in range(spec.layers):
                data = _slice(_tensor(weights, f"layers.{layer}.{region.name}"), shard)
                write_region(mem, memory_map, region, layer, data.reshape(region.rows, -1))
        elif region.name == "lm_head":
            table = _tensor(weights, f"{head.weight}.weight")
            if table.shape != (head.fan_in, head.fan_out):  # a (vocab, hidden) lookup table
                table = table.T
            write_region(mem, memory_map, region, 0, table)
        elif region.name == "consts":
            write_region(mem, memory_map, region, 0, np.array([[norm_eps]]))
        elif region.name == "tokens":
            base = memory_map.region_address("tokens")
            mem.write(mem.span(base, len(prompt)), np.asarray(prompt, dtype=WORD))
        elif region.name in {t.role for t in outside}:
            data = _tensor(weights, region.name)
            write_region(mem, memory_map, region, 0, data.reshape(region.rows, region.cols))


def read_tokens(memory_map: MemoryMap, mems: dict[str, OffChip], start: int,
                count: int) -> list[int]:
    """Token IDs [start, start + count) of the token buffer."""
    region = memory_map.regions["tokens"]
    mem = mems[region.memory]
    return [int(t) for t in mem.read(mem.span(region.base + VALUE_BYTES * start, count))]


def check_weights(spec: ModelSpec, weights: Weights) -> None:
    """Every tensor of the model, full size, before any core is written."""
    for tensor in all_weights(spec):
        data = _tensor(weights, tensor.name)
        if tuple(data.shape) != tensor.shape:
            raise ArchipelagoError(f"weights: '{tensor.name}' has shape {tuple(data.shape)}, "
                                   f"{spec.name} needs {tensor.shape}")


def checkpoint_weights(spec: ModelSpec, directory: Path) -> dict[str, np.ndarray]:
    """Every tensor of `spec` from a Hugging Face safetensors checkpoint, canonical names
    and layouts, float32 (torch is imported here only)."""
    from archipelago.models.hf_state_dict import hf_source
    from archipelago.strategies.tensor_parallel.emulate.checkpoint import CheckpointReader

    with CheckpointReader(Path(directory)) as reader:
        return {t.name: reader.read(hf_source(spec, t), t, Shard(None)).float().numpy()
                for t in all_weights(spec)}


def seeded_weights(spec: ModelSpec, seed: int) -> dict[str, np.ndarray]:
    """The random weights `archi emulate --seed` uses (transformers' initialization after
    manual_seed(seed), cached as a checkpoint), so the two runs can be compared."""
    from archipelago.strategies.tensor_parallel.emulate.reference import (
        cached_seeded_checkpoint,
    )

    return checkpoint_weights(spec, cached_seeded_checkpoint(spec, seed))
