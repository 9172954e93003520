"""How a tensor-parallel degree splits attention heads, divisible or not, as serving systems
do (Megatron-LM and vLLM's GQA handling).

Query heads are cut into contiguous near-equal runs (`split_bounds`); each device holds the
key/value heads its query heads read. When the degree exceeds the key/value heads, a
device's query heads fall in one group and that group's key/value head is replicated on
every device of the group (Llama-2-70B's 8 on 32 boards: each on 4); when the query heads
do not divide evenly, some devices hold one head more, and where a run straddles a group
boundary, one key/value head more. Every device runs in lockstep at the collectives, so
the busiest device's share sets the pace (`busiest`).
"""

from dataclasses import dataclass
from functools import cache

from archipelago.errors import PartitionError, elide
from archipelago.models.spec import ModelSpec
from archipelago.split import split_bounds


@dataclass(frozen=True)
class HeadShare:
    """One device's query heads [q_start, q_stop) and key/value heads [kv_start, kv_stop)."""

    q_start: int
    q_stop: int
    kv_start: int
    kv_stop: int

    @property
    def q_heads(self) -> int:
        return self.q_stop - self.q_start

    @property
    def kv_heads(self) -> int:
        return self.kv_stop - self.kv_start


def check_heads(spec: ModelSpec, ranks: int) -> None:
    """A head's scores and softmax run whole on one device: a degree above the query heads
    would leave a device with no head and need a reduction inside softmax that neither
    DFX's nor LORA's router has (seeds/001 §V-E, seeds/002 §IV-C)."""
    if ranks > spec.heads:
        raise PartitionError(f"{spec.name}: {ranks} devices exceed its {spec.heads} attention "
                             f"heads; a head runs whole on one device (choose at most "
                             f"{spec.heads} devices per ring)")


def head_share(spec: ModelSpec, ranks: int, rank: int) -> HeadShare:
    """The query heads of `rank` and the key/value heads they read."""
    q_start, q_stop = split_bounds(spec.heads, ranks, rank)
    group = spec.heads // spec.kv_heads  # query heads per key/value head
    return HeadShare(q_start, q_stop, q_start // group, (q_stop - 1) // group + 1)


def busiest(spec: ModelSpec, ranks: int) -> HeadShare:
    """The most query heads and the most key/value heads any device holds (as a share
    starting at 0: only the counts matter)."""
    return _busiest(spec.heads, spec.kv_heads, ranks)


@cache
def _busiest(heads: int, kv_heads: int, ranks: int) -> HeadShare:
    """Every op of a plan asks; the answer depends on the head counts alone."""
    group = heads // kv_heads
    spans = [split_bounds(heads, ranks, r) for r in range(ranks)]
    return HeadShare(0, max(b - a for a, b in spans), 0,
                     max((b - 1) // group + 1 - a // group for a, b in spans))


def even(spec: ModelSpec, ranks: int) -> bool:
    """Every device holds the same heads, key/value heads and columns (what the emulator's
    SPMD interpreter runs: one step list with one local size per op)."""
    moe = spec.moe
    ffns = (spec.ffn, *((moe.expert_ffn, moe.shared_ffn) if moe else ()))
    return (spec.heads % ranks == 0 and spec.hidden % ranks == 0
            and all(f % ranks == 0 for f in ffns)
            and (spec.kv_heads % ranks == 0 or ranks % spec.kv_heads == 0))


def require_even(spec: ModelSpec, ranks: int, what: str) -> None:
    """Refuse, in one line, running `what` (which needs the same program on every core) on
    a count of cores that splits `spec` unevenly, naming the counts that split it evenly."""
    if even(spec, ranks):
        return
    fits = ", ".join(str(n) for n in range(1, spec.heads + 1) if even(spec, n))
    raise PartitionError(f"{elide(spec.name)} on {ranks} cores: {what} runs the same program on "
                         f"every core, so each must hold an equal share (heads {spec.heads}, "
                         f"key/value heads {spec.kv_heads}, hidden {spec.hidden} and FFN "
                         f"{spec.ffn} each a multiple of the cores); counts that split it "
                         f"so: {fits}; `archi plan` estimates {ranks} cores")


def head_width(spec: ModelSpec, name: str) -> tuple[int, bool] | None:
    """Columns per head of the output of op or tensor `name` where it is split by whole
    heads, and whether those heads are key/value heads (else query heads); None where
    `name` is not split by heads. "attn_context" is the attention's per-head result (the
    rows of the output projection). Latent attention (DeepSeek-V2 §2.1.2) splits its up
    projections by query heads: q_b's (or q's) qk_dim columns and kv_b's nope_dim + v_dim
    columns per head, and in the absorbed form each head's latent query (kv_rank) and
    value (v_dim); its down projections run whole on every device (shards.py)."""
    m = spec.mla
    if m is not None:
        widths = {"q": m.qk_dim, "q_b": m.qk_dim, "kv_b": m.nope_dim + m.v_dim,
                  "q_latent": m.kv_rank, "v_up": m.v_dim, "attn_context": m.v_dim}
        return (widths[name], False) if name in widths else None
    if name in ("q", "q_norm", "attn_context"):
        return spec.head_dim, False
    if name in ("k", "v", "k_norm"):
        return spec.head_dim, True
    return None


def cached_values(spec: ModelSpec, ranks: int) -> int:
    """Values the busiest device caches per token and layer: K and V of its key/value
    heads, or latent attention's whole latent and rotary key, which every device holds
    (shards.py)."""
    if spec.mla is not None:
        return spec.kv_values_per_token()
    return 2 * busiest(spec, ranks).kv_heads * spec.head_dim
