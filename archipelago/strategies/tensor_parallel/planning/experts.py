"""Expert-parallel placement of a mixture of experts inside one ring (`--split ...,ep=`).

`ep` = 1 is the ring plan as built (strategies/tensor_parallel/__init__.py): every expert's
columns split over the ring's boards. `ep` = the ring's size gives each board whole experts,
E / ep of them (the first E mod ep boards one more), the way GShard (Lepikhin et al. 2021,
§2.2) and DeepSpeed-MoE (Rajbhandari et al. 2022, §5) place experts; shared experts are
replicated whole on every board (splitting them would add an all-reduce of the hidden vector
for a few percent of the weights), the router too (every board must know the token's top-k).

Communication. GShard's expert layer is two all-to-alls: dispatch (each token's hidden
vector to the devices owning its top-k experts) and combine (their outputs back). On these
rings the dispatch moves nothing: before the experts every board already holds the token's
whole normalized vector (DFX runs its norms replicated, seeds/001 §IV-B; LORA all-gathers
the norm's output before FC0, seeds/002 §III-A, which the router needs anyway). What
remains is the combine, which replaces the expert-sharded plan's two syncs (after the
activation and after FFN2) with one `all_to_all` step: each board that ran some of the
token's experts sends its gate-weighted sum of their outputs (`hidden` values) to every
other board, and each board adds what it receives (DFX keeps the residual whole on every
board; LORA keeps it column-split, so each board receives only its slice). The routers cost
it as they move data (engines/router.py): DFX circulates each sender's vector round its one-way
ring, N - 1 store-and-forward hops in step (seeds/001 §V-E); LORA sends each board its
slice the short way round (seeds/002 §IV-C), the busiest link carrying the slices of every
sender whose short path crosses it.

Busiest device, at batch 1: every board waits at the combine for the slowest, the one
owning the most of the token's k experts. The plan costs the worst case, min(k, experts on
a board) experts on one board, and, for the combine, min(k, ep) senders side by side (the
most link sharing): both are upper bounds a router can always hit (routing changes every
token and layer, and DFX's and LORA's instruction streams are compiled ahead, so a layer's
schedule must allow for it); the expected busiest count under uniform routing
(`expected_busiest`, e.g. 8/7 of an expert for 8 experts, top-2, 4 boards) is lower, so
the expert-parallel figures here bound latency from above. The worst case holds for every
row a step runs (a prompt's tokens, a batch's sequences), so a long prompt, whose tokens
spread over the boards, is costed well above balanced routing. Weights read likewise: the
busiest board streams at most min(its experts, rows x that count) experts in a step of many
rows (`Routed.bound`), where the column-split plan streams the expected distinct experts.
"""

from dataclasses import replace
from math import comb

from archipelago.errors import ArchipelagoError
from archipelago.models.graph_ops import Op, Routed
from archipelago.models.spec import ModelSpec, MoE
from archipelago.split import split_bounds
from archipelago.strategies.tensor_parallel.plan import (
    CommStep,
    ComputeStep,
    DevicePlan,
    Plan,
    Shard,
    Step,
)

# Per-layer tensors of the routed experts, stacked (experts, in, out) (models/weights.py).
_EXPERTS = ("experts_gate", "experts_up", "experts_down")
# ... and those every board holds whole.
_WHOLE = ("router", "shared_gate", "shared_up", "shared_down", "shared_scale")
# The expert-sharded plan's syncs inside the FFN that whole experts do without.
_SHARDED_SYNCS = ("ffn_act", "ffn_down")


def ep_degrees(spec: ModelSpec, tp: int) -> list[int]:
    """Expert-parallel degrees a ring of `tp` boards can run: 1, and `tp` when the model has
    experts enough to give every board one and every layer routes over them (whole experts
    change the MoE block's syncs, which dense layers do not have)."""
    moe = spec.moe
    return [1, tp] if moe and not moe.dense_layers and 1 < tp <= moe.experts else [1]


def check_ep(spec: ModelSpec, tp: int, ep: int) -> None:
    """A one-line refusal of an `ep` the ring cannot run, naming the valid values."""
    if ep in ep_degrees(spec, tp):
        return
    if spec.moe is None:
        raise ArchipelagoError(f"--split ep={ep}: {spec.name} has no mixture of experts; "
                               "valid ep: 1")
    valid = ep_degrees(spec, tp)
    if spec.moe.dense_layers:
        raise ArchipelagoError(f"--split ep={ep}: {spec.name} has dense layers beside its MoE "
                               "ones, whose experts are split over the boards; valid ep: 1")
    if len(valid) == 1:
        raise ArchipelagoError(f"--split ep={ep}: {spec.moe.experts} experts cannot give each "
                               f"of the tp={tp} boards a whole one; valid ep: 1 (each "
                               "expert's columns split over the boards)")
    raise ArchipelagoError(f"--split ep={ep}: ep is 1 (each expert's columns split over the "
                           f"tp={tp} boards) or {tp} (whole experts on each board); valid "
                           f"ep: {', '.join(map(str, valid))}")


def busiest_experts(moe: MoE, ep: int) -> int:
    """The most of one token's experts a board runs, at worst."""
    return min(moe.per_token, -(-moe.experts // ep))


def senders(moe: MoE, ep: int) -> int:
    """Boards that send expert outputs to the combine, at most."""
    return min(moe.per_token, ep)


def expected_busiest(moe: MoE, ep: int) -> float:
    """E[the most of a token's k experts on one board] when the router picks k of E
    uniformly: sum over m of P(max >= m), each from the count of k-subsets with at most
    m - 1 on every board (a product of per-board generating polynomials)."""
    sizes = [stop - start for start, stop in (split_bounds(moe.experts, ep, r)
                                               for r in range(ep))]
    k, total = moe.per_token, comb(moe.experts, moe.per_token)

    def at_most(m: int) -> int:
        ways = [1] + [0] * k  # ways[i]: i experts chosen on the boards so far
        for n in sizes:
            ways = [sum(ways[i - j] * comb(n, j) for j in range(min(m, n, i) + 1))
                    for i in range(k + 1)]
        return ways[k]

    return sum(1 - at_most(m - 1) / total for m in range(1, k + 1))


def _whole_experts(step: Step, spec: ModelSpec, width: int, ep: int) -> Step:
    """`step` on whole experts: the router whole, the FFN ops `width` columns wide."""
    if not isinstance(step, ComputeStep):
        return step
    op = step.op
    if op.name in _WHOLE:
        return replace(step, local_out=op.fan_out)
    if op.name in ("ffn_gate", "ffn_up"):
        return replace(step, op=replace(op, fan_out=width, routed=_board(op, spec, ep)),
                       local_out=width)
    if op.name == "ffn_act":
        return replace(step, op=replace(op, fan_in=width, fan_out=width), local_out=width)
    if op.name == "ffn_down":
        return replace(step, op=replace(op, fan_in=width, routed=_board(op, spec, ep)),
                       local_out=op.fan_out)
    return step


def _board(op: Op, spec: ModelSpec, ep: int) -> Routed:
    """The busiest board's experts: ceil(E / ep) whole ones, a token running at most
    `busiest_experts` of them, read at worst (module docstring)."""
    assert spec.moe is not None and op.routed is not None
    return replace(op.routed, experts=-(-spec.moe.experts // ep),
                   per_token=busiest_experts(spec.moe, ep), bound=True)


def _steps(steps: list[Step], spec: ModelSpec, ep: int) -> list[Step]:
    """Block steps with whole experts: the sharded FFN's syncs dropped, the combine after
    FFN2 (see the module docstring)."""
    assert spec.moe is not None
    width = busiest_experts(spec.moe, ep) * spec.moe.expert_ffn + spec.moe.shared_ffn
    gathers = [s for s in steps if isinstance(s, CommStep) and s.tensor in _SHARDED_SYNCS]
    value_bytes = gathers[0].value_bytes if gathers else 2.0
    out: list[Step] = []
    for step in steps:
        if isinstance(step, CommStep) and step.tensor in _SHARDED_SYNCS:
            continue
        out.append(_whole_experts(step, spec, width, ep))
        if isinstance(step, ComputeStep) and step.op.name == "ffn_down":
            out.append(CommStep("all_to_all", "ffn_down", spec.hidden, value_bytes,
                                senders=senders(spec.moe, ep)))
    return out


def _device(dp: DevicePlan, experts: int, ep: int) -> DevicePlan:
    """This board's whole experts (a contiguous run) and whole router and shared experts."""
    first, last = split_bounds(experts, ep, dp.rank)
    layer: dict[str, Shard] = {}
    for role, shard in dp.layer_shards.items():
        name = role.split(".")[0]
        if name in _EXPERTS:
            shard = replace(shard, axis=0, start=first, stop=last)
        elif name in _WHOLE:
            shard = replace(shard, axis=None, start=0, stop=0)
        layer[role] = shard
    return replace(dp, layer_shards=layer)


def expert_parallel(plan: Plan, ep: int) -> Plan:
    """`plan` (a ring plan, experts column-split) with whole experts on each of its `ep`
    boards; `ep` 1 returns it unchanged."""
    check_ep(plan.spec, plan.ranks, ep)
    if ep == 1:
        return plan
    assert plan.spec.moe is not None
    decode = plan.decode_steps
    return replace(plan, block_steps=_steps(plan.block_steps, plan.spec, ep),
                   decode_steps=None if decode is None else _steps(decode, plan.spec, ep),
                   devices=[_device(dp, plan.spec.moe.experts, ep) for dp in plan.devices])

