"""A LORA board's KV cache: each layer's keys and values of the board's key/value heads
(latent attention: the whole latent and rotary key, which every board holds, shards.py),
for every position of the context. The first `kv_tokens_onchip` tokens of every layer sit
in the URAMs (seeds/002 §IV-A: the on-chip buffer "supports the partial implementation of
KV Cache"; §VI-A-d: "All 864 URAMs are dedicated to KV Cache buffering"), as many as the
estimate holds there (systolic.py); the rest spill to HBM (§V-C), after the layer's
matrices. Values are in the format's KV width, token-major: token t's row of the board's
heads at base + (t - first token) x row bytes."""

from collections.abc import Callable
from typing import Any

from archipelago.strategies.tensor_parallel.engines.systolic import SystolicEngine
from archipelago.strategies.tensor_parallel.lora_build.regions import Memory
from archipelago.strategies.tensor_parallel.plan import Plan
from archipelago.strategies.tensor_parallel.planning.heads import head_share

Add = Callable[[Memory, str, int, dict[str, Any]], None]


def kv_parts(plan: Plan, rank: int) -> list[tuple[str, int, list[int] | None]]:
    """(part, values per token, key/value heads [start, stop)) board `rank` caches."""
    spec = plan.spec
    if spec.mla is not None:
        return [("latent", spec.kv_values_per_token(), None)]
    share = head_share(spec, plan.ranks, rank)
    width = share.kv_heads * spec.head_dim
    heads = [share.kv_start, share.kv_stop]
    return [("k", width, heads), ("v", width, heads)]


def onchip_tokens(plan: Plan) -> int:
    """Tokens of every layer's cache the URAMs hold (the estimate's count, at most the
    context)."""
    engine = plan.engine
    assert isinstance(engine, SystolicEngine)
    return min(int(engine.kv_tokens_onchip), plan.spec.max_positions)


def place_kv(plan: Plan, rank: int, layer: int, add: Add) -> None:
    """Layer `layer`'s cache on board `rank`: its first tokens in URAM, the rest in HBM."""
    engine = plan.engine
    assert isinstance(engine, SystolicEngine)
    positions, kv_bits = plan.spec.max_positions, int(engine.format.kv_bytes * 8)
    onchip = onchip_tokens(plan)
    spans: list[tuple[Memory, list[int]]] = [("uram", [0, onchip]),
                                             ("hbm", [onchip, positions])]
    for part, width, heads in kv_parts(plan, rank):
        row = width * kv_bits // 8
        for memory, tokens in spans:
            if tokens[1] > tokens[0]:
                add(memory, f"layers.{layer}.{part}_cache@{memory}",
                    (tokens[1] - tokens[0]) * row,
                    {"kind": "kv", "layer": layer, "part": part, "heads": heads,
                     "width": width, "tokens": tokens, "bits": kv_bits})
