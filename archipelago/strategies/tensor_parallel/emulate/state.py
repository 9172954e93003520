"""What one rank carries while it interprets a plan."""

from dataclasses import dataclass, field

import torch

from archipelago.emulate.exchange import Exchange
from archipelago.models.graph_ops import Op
from archipelago.models.spec import ModelSpec
from archipelago.strategies.tensor_parallel.emulate.numerics import Numerics
from archipelago.strategies.tensor_parallel.emulate.quant_formats import QuantizedMatrix


@dataclass
class RankState:
    """This rank's weight slices (canonical names), its channel to the other ranks, the vocab
    rows its LM head scores, the hidden columns it owns when activations stay column-split,
    W8A8 scales (canonical weight name -> (weight scale, input scale); None in float runs),
    and the layer, token positions, KV cache and (MoE) router choices of the pass at hand."""

    spec: ModelSpec
    weights: dict[str, torch.Tensor]
    numerics: Numerics
    exchange: Exchange
    vocab_slice: tuple[int, int]
    columns: tuple[int, int]
    ranks: int = 1
    scales: dict[str, tuple[float, float]] | None = None
    column_offsets: dict[str, int] = field(default_factory=dict)  # W8A8 slices' first column
    integer_checksum: int = 0  # W8A8: additive digest of every int32 accumulator
    # --precision w8a8 / w4a16: the block matrices' slices in that format (canonical name)
    quantized: dict[str, QuantizedMatrix] = field(default_factory=dict)
    layer: int | None = None
    seen: int = 0  # tokens already in the KV cache
    positions: torch.Tensor = field(default_factory=lambda: torch.zeros(0, dtype=torch.long))
    cache: dict[tuple[int | None, str], torch.Tensor] = field(default_factory=dict)
    # The experts this layer's router picked for the tokens at hand, and their weights,
    # (tokens, per_token) each: set by the up projections, read by the down projection.
    routes: tuple[torch.Tensor, torch.Tensor] | None = None

    def param_name(self, op: Op, part: str) -> str:
        role = f"{op.weight}.{part}"
        return role if self.layer is None else f"layers.{self.layer}.{role}"

    def param(self, op: Op, part: str) -> torch.Tensor | None:
        """`op`'s weight or bias in the current layer; None when the model has no such tensor."""
        return self.weights.get(self.param_name(op, part))

    def extend_cache(self, name: str, new: torch.Tensor, keep: int | None = None) -> torch.Tensor:
        """Append (heads, tokens, head_dim) `new` to this layer's cache of op `name`'s output
        and return it all; a sliding-window layer then keeps only its last `keep` tokens,
        the most any later query attends to (the KV cache graph.kv_cache_bytes costs)."""
        key = (self.layer, name)
        old = self.cache.get(key)
        full = new if old is None else torch.cat((old, new), dim=1)
        self.cache[key] = full if keep is None else full[:, -keep:]
        return full
