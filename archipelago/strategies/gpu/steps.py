"""The kernels of one step on the GPUs, as arrays over the step's kernels and its contexts.

A step runs the model graph's ops in order, each one kernel (plan.py's split) plus the
Megatron collectives where the split needs them. The layers repeat their block's ops, so
GPT-2 1.5B's 773 kernels on four GPUs are 17 distinct ops and two collectives: each is costed
once per step shape (roofline.py: an array over the decode contexts where its time depends on
them) and gathered into issue order (`StepLayout`), a (kernels x contexts) array that the
issue recurrence (estimate.py) runs over with the contexts as an array axis.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from archipelago.memo import by_content
from archipelago.models.graph import build_graph
from archipelago.models.graph_ops import Op, Phase
from archipelago.models.spec import ModelSpec
from archipelago.strategies.gpu.eager import cache_copy_bytes, launches
from archipelago.strategies.gpu.plan import GPUPlan, ring_s
from archipelago.strategies.gpu.roofline import ACTIVATION_BYTES, op_cost, op_s

# Megatron all-reduces the partial sums of the row-split matrices (§3: "g" after the
# attention's output projection and the MLP's second matrix) and the vocabulary-split
# embedding lookup; the vocabulary-split logits are all-gathered.
_ALLREDUCE_AFTER = frozenset({"attn_out", "ffn_down"})
_PART = {"linear": "matrices", "lm_head": "matrices", "attn_score": "attention",
         "softmax": "attention", "attn_context": "attention", "norm": "norms and residuals",
         "residual": "norms and residuals", "activation": "activations",
         "gated_activation": "activations", "embedding": "embedding"}
COLLECTIVE = "all-reduce / gather"


@dataclass(frozen=True)
class StepLayout:
    """A step's kernels as indices into its distinct rows: the distinct ops (each op of
    the block templates once, however many layers run it), then the all-reduce of the
    hidden rows (row `len(ops)`) and the gather of the logits (row `len(ops) + 1`).
    It is read-only: one layout serves every plan of the same model and mode."""

    ops: tuple[tuple[Op, bool], ...]  # distinct (op, whether it runs on the last token only)
    op_order: np.ndarray  # the step's ops in order, indices into `ops`
    rows: np.ndarray  # the step's kernels in issue order, indices into the rows
    issued: np.ndarray  # launches the host issues for each kernel
    parts: Mapping[str, np.ndarray]  # each part of the breakdown's kernels, first seen first

    @property
    def all_reduce(self) -> int:
        return len(self.ops)

    @property
    def gather(self) -> int:
        return len(self.ops) + 1


@dataclass(frozen=True)
class Step:
    """One step's kernels in issue order: GPU seconds (kernels x contexts), launches the
    host issues for each, and which kernels make each part of the breakdown."""

    seconds: np.ndarray
    issued: np.ndarray
    parts: Mapping[str, np.ndarray]


def _read_only(values: list[int] | np.ndarray) -> np.ndarray:
    out = np.array(values, dtype=np.int64)
    out.flags.writeable = False
    return out


# A plan's graph is build_graph(plan.spec), so the layout is a pure function of the spec's
# fields and the two switches; searches and comparisons plan the same model many times.
@by_content(maxsize=64)
def layout(spec: ModelSpec, eager: bool, tensor_parallel: bool) -> StepLayout:
    """The kernels an eager framework (`eager`) or a captured graph issues for one step
    of `spec`, with the collectives when the model is split over several GPUs."""
    g = build_graph(spec)
    blocks = g.variants or ((g.block, tuple(range(spec.layers))),)
    index: dict[tuple[Op, bool], int] = {}

    def indices(ops: tuple[Op, ...], output: bool) -> list[int]:
        return [index.setdefault((op, output), len(index)) for op in ops]

    embed, output = indices(g.embed, False), indices(g.output, True)
    variant = {layer: indices(ops, False) for ops, ids in blocks for layer in ids}
    op_order = np.array(embed + [i for layer in sorted(variant) for i in variant[layer]]
                        + output, dtype=np.int64)
    ops = tuple(index)
    after = np.full(len(ops), -1)  # the collective row issued after each op, if any
    if tensor_parallel:
        for i, (op, _) in enumerate(ops):
            if op.name in _ALLREDUCE_AFTER or op.kind == "embedding":
                after[i] = len(ops)
            elif op.kind == "lm_head":  # every GPU's slice of the logits, gathered
                after[i] = len(ops) + 1
    pairs = np.stack([op_order, after[op_order]], axis=1).ravel()
    rows = pairs[pairs >= 0]
    issued = [launches(op, spec, eager) for op, _ in ops] + [1, 1]
    names = np.array([_PART[op.kind] for op, _ in ops] + [COLLECTIVE, COLLECTIVE])[rows]
    parts = MappingProxyType({name: _read_only(np.flatnonzero(names == name))
                              for name in dict.fromkeys(names.tolist())})
    return StepLayout(ops, _read_only(op_order), _read_only(rows),
                      _read_only(np.array(issued)[rows]), parts)


def plan_layout(plan: GPUPlan) -> StepLayout:
    return layout(plan.spec, not plan.config.graph, plan.link is not None)


def ops_in_order(plan: GPUPlan) -> list[tuple[Op, bool]]:
    """The step's ops in order, each with whether it is an output op (last token only)."""
    lay = plan_layout(plan)
    return [lay.ops[i] for i in lay.op_order]


def collectives_s(plan: GPUPlan, new_tokens: int, batch: int) -> tuple[float, float]:
    """One all-reduce of the step's hidden rows and the gather of the logits (every
    GPU's slice of the vocabulary, last token only); zeros on one GPU."""
    if plan.link is None:
        return 0.0, 0.0
    spec, ranks = plan.spec, plan.ranks
    hidden = batch * new_tokens * spec.hidden * ACTIVATION_BYTES
    logits = batch * spec.vocab * ACTIVATION_BYTES
    return (ring_s(plan.link, ranks, hidden),
            ring_s(plan.link, ranks, logits, gather=True))


def step_kernels(plan: GPUPlan, phase: Phase, batch: int) -> Step:
    """Every kernel of one step of `batch` sequences through `phase`, in issue order:
    each distinct op's kernel time (roofline.op_s; plus, eager, the dynamic KV cache's
    copies at the full GPU's streaming bandwidth) once, for every context of `phase` at
    once. Floors are the issue recurrence's (estimate.step_s)."""
    spec, ranks, fmt, core = plan.spec, plan.ranks, plan.format, plan.core
    lay = plan_layout(plan)
    last = Phase(1, phase.context, phase.causal)
    eager = not plan.config.graph
    seconds = np.empty((len(lay.ops) + 2, np.size(phase.context)))
    for i, (op, is_output) in enumerate(lay.ops):
        at = last if is_output else phase
        seconds[i] = op_s(op_cost(op, spec, at, batch, ranks, fmt, plan.config.expert_skew),
                          at, batch, ranks, fmt, core, split_kv=not eager)
        if eager:
            seconds[i] += cache_copy_bytes(op, spec, phase, batch, ranks, fmt.kv_bytes) / (
                core.memory_efficiency * core.memory_Bps)
    seconds[lay.all_reduce:] = np.array(collectives_s(plan, phase.new_tokens, batch))[:, None]
    return Step(seconds[lay.rows], lay.issued, lay.parts)
