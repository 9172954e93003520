"""The timing simulator beside the analytical estimate (issue #23): what `archi simulate`
prints, what `benchmarks/dfx_sim_vs_estimate.py` tabulates over a grid.

Both sides are cut into the same classes, the op groups of the plan's steps (`GROUPS`):
each step goes to the group of its op (Q, K and V to "qkv", the FFN's matrices and GELU to
"ffn", every collective to "sync", ...). The simulator's cycles of a group are the cycles its
instructions add to the critical path, every core done (`SimResult.group_cycles`, the
instructions named by the compiler's notes); the estimate's are its steps' critical-path
seconds (`steps_seconds`, what its latency adds up) converted at the core clock. The two are
separate models of the machine: the simulator schedules the compiled instructions on the
core's units, the estimate adds closed forms per step. Both carry the same two calibrated
figures (dfx.DFX_TILE_EFFICIENCY, router.DFX_SYNC_OVERHEAD_S; `units_of`).
"""

from typing import Any

import numpy as np

from archipelago.estimate.workload import Generation
from archipelago.models.graph_ops import Phase
from archipelago.strategies.tensor_parallel.costs import steps_seconds
from archipelago.strategies.tensor_parallel.dfx_program.compile import compile_plan
from archipelago.strategies.tensor_parallel.dfx_program.timing import SimResult, Simulator
from archipelago.strategies.tensor_parallel.dfx_program.units import UnitModel
from archipelago.strategies.tensor_parallel.engines import dfx, router
from archipelago.strategies.tensor_parallel.estimate import Estimate
from archipelago.strategies.tensor_parallel.plan import CommStep, Plan, Step
from archipelago.strategies.tensor_parallel.planning.heads import require_even

GROUPS = ("embedding", "qkv", "attention", "attn_out", "ffn", "norms", "residual", "sync",
          "lm_head")
_KIND_GROUP = {"embedding": "embedding", "attn_score": "attention", "softmax": "attention",
               "attn_context": "attention", "norm": "norms", "residual": "residual",
               "lm_head": "lm_head", "activation": "ffn"}
_LINEAR_GROUP = {"q": "qkv", "k": "qkv", "v": "qkv", "attn_out": "attn_out"}
CLASSES_NOTE = ("cycles_per_class: op groups of the plan's steps; simulated: the cycles each "
                "group's instructions add to the critical path (every core done); estimated: "
                "its steps' critical-path seconds x clock_hz. cycles_per_instruction: each "
                "instruction class's own cycles on one core (stream + pipeline latency), "
                "overlapping, so they add up to more than the latency")


def group_of_step(step: Step) -> str:
    """The op group a plan step is reported under."""
    if isinstance(step, CommStep):
        return "sync"
    if step.op.kind == "linear":
        return _LINEAR_GROUP.get(step.op.name, "ffn")
    return _KIND_GROUP[step.op.kind]


def simulate_plan(plan: Plan, n_in: int, n_out: int,
                  positions: np.ndarray | None = None) -> SimResult:
    """Compile `plan` for an n_in:n_out generation and run every core's program on the
    timing simulator: every token pass, or only those at `positions`. The simulator steps
    the cores instruction by instruction together, so an uneven split is refused first."""
    require_even(plan.spec, plan.ranks, "the timing simulator")
    programs, _ = compile_plan(plan, n_in, n_out)
    return Simulator(units_of(plan)).run(programs, positions)


def units_of(plan: Plan) -> UnitModel:
    """The units of `plan`'s cores: its engine's configuration, one HBM channel's rate, its
    ring's link, and the analytical engine's two calibrated figures."""
    hbm = plan.devices[0].device.memory("hbm")
    assert hbm is not None  # tensor-parallel plans refuse boards without HBM
    return UnitModel.calibrated(plan.engine.config,  # type: ignore[attr-defined]
                                hbm.bandwidth_Bps / hbm.channels, plan.cluster)


def estimated_groups(plan: Plan, n_in: int, n_out: int) -> dict[str, np.ndarray]:
    """The estimate's seconds per group and token pass (contexts 1 .. n_in + n_out - 1, the
    LM head from the last prompt token on), the passes the controller runs (§V-A)."""
    context = np.arange(1, n_in + n_out)
    out = {g: np.zeros(context.shape) for g in GROUPS}
    head = (context >= n_in).astype(float)
    for steps, repeat in ((plan.embed_steps, 1), (plan.block_steps, plan.spec.layers),
                          (plan.output_steps, head)):
        for step, s in zip(steps, steps_seconds(plan, steps, Phase(1, context)), strict=True):
            out[group_of_step(step)] = out[group_of_step(step)] + repeat * s
    return out


def simulated_groups(plan: Plan, result: SimResult) -> dict[str, np.ndarray]:
    """The simulator's seconds per group and token pass, from its op groups (the compiler
    notes a head's attention instructions 'head i', a collective's 'sync TENSOR')."""
    names = {s.op.name: group_of_step(s) for s in plan.embed_steps + plan.block_steps
             + plan.output_steps if not isinstance(s, CommStep)}
    out = {g: np.zeros(result.token_cycles.shape) for g in GROUPS}
    for group, cycles in result.group_cycles.items():
        name = ("attention" if group.startswith("head ") else "sync"
                if group.startswith("sync ") else names[group])
        out[name] = out[name] + cycles / result.clock_hz
    return out


def fitted_note() -> str:
    """The two calibrated figures both sides carry (the simulator takes the estimate's)."""
    return (f"both carry the two figures fitted to seeds/001's measured points, "
            f"DFX_TILE_EFFICIENCY = {dfx.DFX_TILE_EFFICIENCY} (matrix block rows) and "
            f"DFX_SYNC_OVERHEAD_S = {router.DFX_SYNC_OVERHEAD_S * 1e6:.3f} us per sync (the "
            "router's, before a sync's first hop); every other cycle the simulator schedules "
            "from the compiled instructions (docs/strategies/dfx-simulator.md)")


def _cycles(groups: dict[str, np.ndarray], hz: float) -> dict[str, float]:
    """Seconds per group and pass as cycles over the run (to a thousandth: the estimate's
    are fractional, its tile efficiency scaling whole cycles)."""
    return {g: round(float(v.sum() * hz), 3) for g, v in groups.items()}


def side_by_side(plan: Plan, work: Generation, est: Estimate) -> dict[str, Any]:
    """`archi simulate --json`: the simulated and the estimated figures of one generation,
    in the same classes; per-layer times at the last token pass."""
    n_in, n_out = work.input_tokens, work.output_tokens
    result = simulate_plan(plan, n_in, n_out)
    hz = result.clock_hz
    last = n_in + n_out - 1  # the context of the last pass
    layer = sum(float(s[0]) for s in steps_seconds(plan, plan.block_steps,
                                                   Phase(1, np.array([last]))))
    token_s = result.token_cycles / hz
    decode = token_s[n_in:]
    sim_groups = simulated_groups(plan, result)
    est_groups = estimated_groups(plan, n_in, n_out)
    return {
        "model": plan.spec.name, "cluster": plan.cluster.name, "strategy": plan.strategy,
        "cores": plan.ranks, "tokens": {"input": n_in, "output": n_out}, "clock_hz": hz,
        "layer_context": last, "classes": CLASSES_NOTE, "fitted": fitted_note(),
        "simulated": {
            "latency_s": result.latency_s,
            "prefill_s": float(token_s[:n_in].sum()),
            "decode_s_per_token": float(decode.mean()) if decode.size else 0.0,
            "tokens_per_s": n_out / result.latency_s,
            "cycles_per_class": _cycles(sim_groups, hz),
            "cycles_per_instruction": {c: float(v.sum())
                                       for c, v in result.class_cycles.items()},
            "layer_s": (result.layer_cycles[:, -1] / hz).tolist(),
        },
        "estimated": {
            "latency_s": est.latency_s,
            "prefill_s": est.prefill_s,
            "decode_s_per_token": est.decode_s_per_token,
            "tokens_per_s": est.tokens_per_s,
            "cycles_per_class": _cycles(est_groups, hz),
            "layer_s": [layer] * plan.spec.layers,
        },
        "feasible": est.feasible,
        "reasons": est.reasons,
    }
