"""The analytical DFX engine (dfx.py, router.py) against the timing simulator
(dfx_program/timing.py) running the compiled programs (issues #23 point 4, #34 point 3).

First the referee's cases (issue #34): gpt2-345m and gpt2-1.5b at 32:32 on 1, 2 and 4 U280s,
simulated and estimated latency, the gap, and the sync time both ways. Then per operation
group (the time each adds to the critical path, summed over a run's token passes) and per
generated token, for several models, core counts and context lengths, both sides with their
two calibrated figures; then the two DFX calibration points as both sides predict them with
and without those figures (the mechanisms alone).

    python -m benchmarks.dfx_sim_vs_estimate            # the referee's cases and the grid
    python -m benchmarks.dfx_sim_vs_estimate --quick    # the referee's cases, small grid
"""

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext

import numpy as np

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
REFEREE = ("gpt2-345m", "gpt2-1.5b"), (1, 2, 4), (32, 32)  # issue #34 point 3


def model(name: str) -> ModelSpec:
    return spec_from_hf_config(SMALL[name], name, "dfx_sim_vs_estimate") if name in SMALL \
        else resolve_model(name)


@contextmanager
def unfitted() -> Iterator[None]:
    """Both sides with neither calibrated figure (efficiency 1, no per-sync cost): the
    simulator reads them from the same two names (UnitModel.calibrated)."""
    saved = dfx.DFX_TILE_EFFICIENCY, router.DFX_SYNC_OVERHEAD_S
    dfx.DFX_TILE_EFFICIENCY, router.DFX_SYNC_OVERHEAD_S = 1.0, 0.0
    try:
        yield
    finally:
        dfx.DFX_TILE_EFFICIENCY, router.DFX_SYNC_OVERHEAD_S = saved


def plan_for(name: str, cluster: str) -> Plan:
    return get_strategy("dfx").plan(model(name), resolve_cluster(cluster), None,
                                    Generation(1, 2)).program  # a ring: no split to choose


def totals(name: str, cluster: str, n_in: int, n_out: int
           ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """(estimated, simulated) seconds per group and token pass."""
    plan = plan_for(name, cluster)
    return (estimated_groups(plan, n_in, n_out),
            simulated_groups(plan, simulate_plan(plan, n_in, n_out)))


def referee() -> None:
    """Issue #34's cases: end-to-end latency and sync time, simulated against estimated;
    the simulated sync share (seeds/002 §II-C quotes about 17% for a DFX case); the seconds
    each case takes (planning, compiling, simulating, estimating)."""
    models, boards, (n_in, n_out) = REFEREE
    print(f"Referee (issue #34 point 3): {n_in}:{n_out} tokens on U280 rings, ms over the run")
    print(f"  {'model':10s} {'boards':>6s} {'simulated':>10s} {'estimated':>10s} {'gap':>7s} "
          f"{'sync sim':>9s} {'sync est':>9s} {'share':>6s} {'seconds':>8s}")
    for name in models:
        for n in boards:
            t0 = time.perf_counter()
            est, sim = totals(name, f"{n}xu280", n_in, n_out)
            e, s = (sum(float(v.sum()) for v in d.values()) for d in (est, sim))
            print(f"  {name:10s} {n:6d} {s * 1e3:10.2f} {e * 1e3:10.2f} {s / e - 1:+7.2%} "
                  f"{sim['sync'].sum() * 1e3:9.3f} {est['sync'].sum() * 1e3:9.3f} "
                  f"{sim['sync'].sum() / s:6.1%} {time.perf_counter() - t0:8.2f}")


def compare(name: str, cluster: str, n_in: int, n_out: int, detail: bool = True
            ) -> dict[str, tuple[float, float]]:
    """(estimate, simulated) seconds per row, 'token' one generated token's; printed as a
    table when `detail`."""
    est, sim = totals(name, cluster, n_in, n_out)
    out = {row: (est[row].sum(), sim[row].sum()) for row in GROUPS}
    # one generated token: the mean of the passes after the prompt's
    out["token"] = tuple(  # type: ignore[assignment]
        float(sum(v[n_in:] for v in d.values()).mean()) for d in (est, sim))
    if detail:
        print(f"\n{name} on {cluster}, {n_in}:{n_out} (seconds over the run's token passes)")
        print(f"  {'op':10s} {'estimate':>10s} {'simulated':>10s} {'sim/est':>8s}")
        for row, (e, s) in out.items():
            if e or s:
                print(f"  {row:10s} {e:10.4g} {s:10.4g} {_ratio(s, e):>8s}")
    return out


def summary(rows: list[tuple[str, dict[str, tuple[float, float]]]]) -> None:
    """One line per configuration: simulated / estimated per group and per token, and the
    per-token time of each."""
    print("\nAgreement: simulated / estimated (1.000 = equal); per-token ms")
    print(f"  {'configuration':28s} " + " ".join(f"{r[:8]:>8s}" for r in GROUPS)
          + f" {'token':>8s} {'est ms':>7s} {'sim ms':>7s}")
    for label, out in rows:
        ratios = " ".join(f"{_ratio(out[r][1], out[r][0]):>8s}" for r in GROUPS)
        e, s = out["token"]
        print(f"  {label:28s} {ratios} {_ratio(s, e):>8s} {e * 1e3:7.3f} {s * 1e3:7.3f}")


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.3f}" if b else "-"


def calibration_points() -> None:
    """The two points with and without the calibrated figures: tokens/s = output tokens /
    end-to-end latency."""
    print("\nCalibration points, gpt2-345m 64:64 (tokens/s)")
    print(f"  {'cluster':8s} {'paper':>8s} {'estimate':>9s} {'simulated':>9s} "
          f"{'est unfit':>9s} {'sim unfit':>9s}")
    for cluster, paper in CALIBRATION:
        rates = []
        for fitted in (True, False):
            with unfitted() if not fitted else nullcontext():
                plan = plan_for("gpt2-345m", cluster)
                rates += [64 / sum(v.sum() for v in estimated_groups(plan, 64, 64).values()),
                          64 / simulate_plan(plan, 64, 64).latency_s]
        print(f"  {cluster:8s} {paper:8.2f} " + " ".join(f"{r:9.2f}" for r in rates))


def main(quick: bool) -> None:
    referee()
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
