"""The analytical DFX engine (dfx.py, router.py) against the timing simulator
(dfx_program/timing.py) running the compiled programs (issue #23 point 4).

Per operation group (the time each adds to the critical path, summed over a 64:64-style
run's token passes) and per generated token, for several models, core counts and context
lengths; then the two DFX calibration points as the simulator predicts them with no fitted
constant, beside the analytical engine with and without its two fitted constants.

    python -m benchmarks.dfx_sim_vs_estimate            # the full grid
    python -m benchmarks.dfx_sim_vs_estimate --quick    # the small models only
"""

import sys
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from archipelago.hardware.cluster import resolve_cluster
from archipelago.models.graph import Phase
from archipelago.models.hf_config import spec_from_hf_config
from archipelago.models.spec import ModelSpec
from archipelago.models.zoo import resolve_model
from archipelago.strategies.registry import get_strategy
from archipelago.strategies.tensor_parallel import dfx, router
from archipelago.strategies.tensor_parallel.dfx_program.compile import compile_plan
from archipelago.strategies.tensor_parallel.dfx_program.timing import SimResult, Simulator
from archipelago.strategies.tensor_parallel.dfx_program.units import UnitModel
from archipelago.strategies.tensor_parallel.estimate import steps_seconds
from archipelago.strategies.tensor_parallel.plan import CommStep, Plan, Step

# Two small GPT-2 shapes beside the paper's three (HF config fields).
SMALL = {
    "tiny": {"model_type": "gpt2", "n_embd": 64, "n_head": 4, "n_layer": 2,
             "vocab_size": 97, "n_positions": 256, "activation_function": "gelu_new"},
    "gpt2-124m": {"model_type": "gpt2", "n_embd": 768, "n_head": 12, "n_layer": 12,
                  "vocab_size": 50257, "n_positions": 1024,
                  "activation_function": "gelu_new"},
}
ROWS = ("embedding", "qkv", "attention", "attn_out", "ffn", "norms", "residual", "sync",
        "lm_head")
_KIND_ROW = {"embedding": "embedding", "attn_score": "attention", "softmax": "attention",
             "attn_context": "attention", "norm": "norms", "residual": "residual",
             "lm_head": "lm_head", "activation": "ffn"}
CALIBRATION = (("1xu280", 93.1), ("4xu280", 207.56))  # seeds/001 §VII-B via issue #20


def model(name: str) -> ModelSpec:
    return spec_from_hf_config(SMALL[name], name, "dfx_sim_vs_estimate") if name in SMALL \
        else resolve_model(name)


def row_of(step: Step) -> str:
    if isinstance(step, CommStep):
        return "sync"
    if step.op.kind == "linear":
        return {"q": "qkv", "k": "qkv", "v": "qkv", "attn_out": "attn_out"}.get(
            step.op.name, "ffn")
    return _KIND_ROW[step.op.kind]


def estimated(plan: Plan, n_in: int, n_out: int) -> dict[str, np.ndarray]:
    """Seconds per row and token pass (the controller's passes at contexts 1..)."""
    context = np.arange(1, n_in + n_out)
    out = {r: np.zeros(context.shape) for r in ROWS}
    head = (context >= n_in).astype(float)
    for steps, repeat in ((plan.embed_steps, 1), (plan.block_steps, plan.spec.layers),
                          (plan.output_steps, head)):
        for step, s in zip(steps, steps_seconds(plan, steps, Phase(1, context)), strict=True):
            out[row_of(step)] = out[row_of(step)] + repeat * s
    return out


def simulate(plan: Plan, n_in: int, n_out: int) -> SimResult:
    programs, _ = compile_plan(plan, n_in, n_out)
    hbm = plan.devices[0].device.memory("hbm")
    assert hbm is not None
    units = UnitModel(plan.engine.config, hbm.bandwidth_Bps / hbm.channels,  # type: ignore[attr-defined]
                      plan.cluster)
    return Simulator(units).run(programs)


def simulated(plan: Plan, result: SimResult) -> dict[str, np.ndarray]:
    """Seconds per row and token pass from the simulator's op groups."""
    names = {s.op.name: row_of(s) for s in plan.embed_steps + plan.block_steps
             + plan.output_steps if not isinstance(s, CommStep)}
    out = {r: np.zeros(result.token_cycles.shape) for r in ROWS}
    for group, cycles in result.group_cycles.items():
        row = ("attention" if group.startswith("head ") else "sync"
               if group.startswith("sync ") else names[group])
        out[row] = out[row] + cycles / result.clock_hz
    return out


@contextmanager
def unfitted() -> Iterator[None]:
    """The analytical engine with neither fitted constant (efficiency 1, no overhead)."""
    saved = dfx.DFX_TILE_EFFICIENCY, router.DFX_SYNC_OVERHEAD_S
    dfx.DFX_TILE_EFFICIENCY, router.DFX_SYNC_OVERHEAD_S = 1.0, 0.0
    try:
        yield
    finally:
        dfx.DFX_TILE_EFFICIENCY, router.DFX_SYNC_OVERHEAD_S = saved


def plan_for(name: str, cluster: str) -> Plan:
    return get_strategy("dfx").plan(model(name), resolve_cluster(cluster))


def compare(name: str, cluster: str, n_in: int, n_out: int, detail: bool = True
            ) -> dict[str, tuple[float, float, float]]:
    """(estimate, unfitted estimate, simulated) seconds per row, 'token' one generated
    token's; printed as a table when `detail`."""
    plan = plan_for(name, cluster)
    est = estimated(plan, n_in, n_out)
    with unfitted():
        bare = estimated(plan, n_in, n_out)
    sim = simulated(plan, simulate(plan, n_in, n_out))
    out = {row: (est[row].sum(), bare[row].sum(), sim[row].sum()) for row in ROWS}
    # one generated token: the mean of the passes after the prompt's
    out["token"] = tuple(  # type: ignore[assignment]
        float(sum(v[n_in:] for v in d.values()).mean()) for d in (est, bare, sim))
    if detail:
        print(f"\n{name} on {cluster}, {n_in}:{n_out} (seconds over the run's token passes)")
        print(f"  {'op':10s} {'estimate':>10s} {'unfitted':>10s} {'simulated':>10s} "
              f"{'sim/est':>8s} {'sim/unfit':>9s}")
        for row, (e, b, s) in out.items():
            if e or s:
                print(f"  {row:10s} {e:10.4g} {b:10.4g} {s:10.4g} {_ratio(s, e):>8s} "
                      f"{_ratio(s, b):>9s}")
    return out


def summary(rows: list[tuple[str, dict[str, tuple[float, float, float]]]]) -> None:
    """One line per configuration: simulated / unfitted estimate per group and per token,
    and the per-token time of the fitted estimate and of the simulator."""
    print("\nAgreement: simulated / unfitted analytical (1.000 = equal); per-token ms")
    print(f"  {'configuration':28s} " + " ".join(f"{r[:8]:>8s}" for r in ROWS)
          + f" {'token':>8s} {'est ms':>7s} {'sim ms':>7s}")
    for label, out in rows:
        ratios = " ".join(f"{_ratio(out[r][2], out[r][1]):>8s}" for r in ROWS)
        e, b, s = out["token"]
        print(f"  {label:28s} {ratios} {_ratio(s, b):>8s} {e * 1e3:7.3f} {s * 1e3:7.3f}")


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.3f}" if b else "-"


def calibration_points() -> None:
    """The two points before any fitting: tokens/s = output tokens / end-to-end latency."""
    print("\nCalibration points, gpt2-345m 64:64 (tokens/s)")
    print(f"  {'cluster':8s} {'paper':>8s} {'estimate':>9s} {'unfitted':>9s} {'simulated':>9s}")
    for cluster, paper in CALIBRATION:
        plan = plan_for("gpt2-345m", cluster)
        est = sum(v.sum() for v in estimated(plan, 64, 64).values())
        with unfitted():
            bare = sum(v.sum() for v in estimated(plan, 64, 64).values())
        sim = simulate(plan, 64, 64).latency_s
        print(f"  {cluster:8s} {paper:8.2f} {64 / est:9.2f} {64 / bare:9.2f} {64 / sim:9.2f}")


def main(quick: bool) -> None:
    models = ("tiny", "gpt2-124m") if quick else (
        "tiny", "gpt2-124m", "gpt2-345m", "gpt2-774m", "gpt2-1.5b")
    rows = []
    for name in models:
        for cores in (1, 2, 4):
            for n_in, n_out in ((8, 8), (64, 64), (32, 192)):
                if name == "tiny" and n_in + n_out > 256:
                    continue
                label = f"{name} {cores}xu280 {n_in}:{n_out}"
                rows.append((label, compare(name, f"{cores}xu280", n_in, n_out, not quick)))
    summary(rows)
    if not quick:
        calibration_points()


if __name__ == "__main__":
    main("--quick" in sys.argv)
