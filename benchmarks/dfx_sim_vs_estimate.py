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

from archipelago.estimate.workload import Generation
from archipelago.hardware.cluster import resolve_cluster
from archipelago.models.hf_config import spec_from_hf_config
from archipelago.models.spec import ModelSpec
from archipelago.models.zoo import resolve_model
from archipelago.strategies.registry import get_strategy
from archipelago.strategies.tensor_parallel.dfx_program.versus import (
    GROUPS,
    estimated_groups,
    simulate_plan,
    simulated_groups,
)
from archipelago.strategies.tensor_parallel.engines import dfx, router
from archipelago.strategies.tensor_parallel.plan import Plan

# Two small GPT-2 shapes beside the paper's three (HF config fields).
SMALL = {
    "tiny": {"model_type": "gpt2", "n_embd": 64, "n_head": 4, "n_layer": 2,
             "vocab_size": 97, "n_positions": 256, "activation_function": "gelu_new"},
    "gpt2-124m": {"model_type": "gpt2", "n_embd": 768, "n_head": 12, "n_layer": 12,
                  "vocab_size": 50257, "n_positions": 1024,
                  "activation_function": "gelu_new"},
}
CALIBRATION = (("1xu280", 93.1), ("4xu280", 207.56))  # seeds/001 §VII-B via issue #20


def model(name: str) -> ModelSpec:
    return spec_from_hf_config(SMALL[name], name, "dfx_sim_vs_estimate") if name in SMALL \
        else resolve_model(name)


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
    return get_strategy("dfx").plan(model(name), resolve_cluster(cluster), None,
                                    Generation(1, 2)).program  # a ring: no split to choose


def compare(name: str, cluster: str, n_in: int, n_out: int, detail: bool = True
            ) -> dict[str, tuple[float, float, float]]:
    """(estimate, unfitted estimate, simulated) seconds per row, 'token' one generated
    token's; printed as a table when `detail`."""
    plan = plan_for(name, cluster)
    est = estimated_groups(plan, n_in, n_out)
    with unfitted():
        bare = estimated_groups(plan, n_in, n_out)
    sim = simulated_groups(plan, simulate_plan(plan, n_in, n_out))
    out = {row: (est[row].sum(), bare[row].sum(), sim[row].sum()) for row in GROUPS}
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
    print(f"  {'configuration':28s} " + " ".join(f"{r[:8]:>8s}" for r in GROUPS)
          + f" {'token':>8s} {'est ms':>7s} {'sim ms':>7s}")
    for label, out in rows:
        ratios = " ".join(f"{_ratio(out[r][2], out[r][1]):>8s}" for r in GROUPS)
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
        est = sum(v.sum() for v in estimated_groups(plan, 64, 64).values())
        with unfitted():
            bare = sum(v.sum() for v in estimated_groups(plan, 64, 64).values())
        sim = simulate_plan(plan, 64, 64).latency_s
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
