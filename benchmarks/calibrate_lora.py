"""Fit HBM_EFFICIENCY to the one LORA calibration point issue 20 names: LORA-F runs
gpt2-345m at 32:256 tokens on one U280 in 678.4 ms end to end (seeds/002 Table IV's
workload), at the design point the project's own search picks for it, as the paper's
prototype was picked by its own (§V-D). The efficiency moves the searched point, so search
and fit alternate until the searched design no longer changes. Prints the value to paste
into archipelago/strategies/tensor_parallel/engines/systolic.py; tests/test_lora.py checks the
pasted value reproduces the point.

    python -m benchmarks.calibrate_lora [--trials 10000]
"""

import argparse
from typing import Any

import numpy as np

from archipelago.api import make_plan
from archipelago.estimate.workload import Generation
from archipelago.explore.search import SearchRequest, run_search
from archipelago.models.graph_ops import Phase
from archipelago.strategies.tensor_parallel.costs import decode_seconds
from archipelago.strategies.tensor_parallel.engines import systolic
from archipelago.strategies.tensor_parallel.estimate import estimate
from archipelago.strategies.tensor_parallel.plan import ComputeStep

TARGET_S = 678.4e-3
MODEL, CLUSTER, STRATEGY, WORKLOAD = "gpt2-345m", "1xu280", "lora-f", Generation(32, 256)
# Trials per search: 10,000 take seconds since issue 22, and reach the optimum of an
# enumeration of the whole LORA-F space (tests/test_explore_genetic.py).
SEARCH_TRIALS = 10_000
# The design the fixed point settles on. With optuna's NSGA-II at 300 trials (before issue
# 22): round 0 searched at 1.0 picked 48 x 48 and fitted 0.6990; the search at 0.6990 picked
# 40 x 40 (whose decode demand, 40^2 x 2 B / 2 cycles at 200 MHz = 320 GB/s, just meets
# 0.69 x 460 GB/s), which fits 0.6885. The search of SEARCH_TRIALS at 0.6885 picks the same
# 40 x 40 design (the space's optimum; windows of 32 and 64 tie with it on latency and
# worst fabric fraction and use more BRAM), so 0.6885 stays the fixed point.
CALIBRATED_DESIGN: dict[str, Any] = {
    "d_sa": 40, "t_m": 40, "t_v": 40, "n_acc": 256, "hbm_axi_bits": 512, "kv_uram": 864,
    "token_window": 16, "clock_hz": 200e6}


def latency_s(efficiency: float, design: dict[str, Any]) -> float:
    systolic.HBM_EFFICIENCY = efficiency
    plan = make_plan(MODEL, CLUSTER, STRATEGY, design)
    return estimate(plan, WORKLOAD).latency_s


def searched(efficiency: float, trials: int) -> dict[str, Any]:
    systolic.HBM_EFFICIENCY = efficiency
    request = SearchRequest(MODEL, CLUSTER, STRATEGY, WORKLOAD, trials, "", "predictions")
    return run_search(request).engine


def fit(design: dict[str, Any], low: float = 0.05, high: float = 1.0,
        iterations: int = 50) -> float:
    """Bisection: latency falls monotonically as the efficiency rises."""
    for _ in range(iterations):
        mid = (low + high) / 2
        low, high = (mid, high) if latency_s(mid, design) > TARGET_S else (low, mid)
    return (low + high) / 2


def fixed_point(trials: int, start: float, rounds: int = 8) -> tuple[float, dict[str, Any]]:
    """Search at the current efficiency, fit the efficiency at the searched design, repeat
    until the search returns the design the efficiency was fitted at."""
    original = systolic.HBM_EFFICIENCY
    try:
        efficiency, design = start, searched(start, trials)
        for round_ in range(rounds):
            efficiency = fit(design)
            again = searched(efficiency, trials)
            print(f"round {round_}: efficiency {efficiency:.4f} at {design}")
            if again == design:
                return efficiency, design
            design = again
        raise RuntimeError(f"no fixed point in {rounds} rounds")
    finally:
        systolic.HBM_EFFICIENCY = original


def decode_stream(strategy: str, design: dict[str, Any] | None) -> tuple[float, float]:
    """Bytes one decode token streams (weights and KV cache, whole tiles) at the workload's
    mean context, and their rate over that token's predicted time."""
    plan = make_plan(MODEL, CLUSTER, strategy, design).program
    context = np.array([WORKLOAD.input_tokens + WORKLOAD.output_tokens // 2])
    phase = Phase(1, context)
    parts = ((plan.block_steps, plan.spec.layers), (plan.output_steps, 1))
    nbytes = sum(repeat * float(plan.engine.streamed_bytes(step, phase)[0])
                 for steps, repeat in parts for step in steps if isinstance(step, ComputeStep))
    return nbytes, nbytes / float(decode_seconds(plan, context)[0])


def report(efficiency: float, design: dict[str, Any]) -> None:
    systolic.HBM_EFFICIENCY = efficiency
    peak = make_plan(MODEL, CLUSTER, STRATEGY).program.devices[0].device.memory("hbm")
    for strategy, engine in ((STRATEGY, design), ("lora-q", None)):
        nbytes, rate = decode_stream(strategy, engine)
        print(f"{strategy} decode: {nbytes / 1e6:.1f} MB per token at {rate / 1e9:.1f} GB/s = "
              f"{rate / peak.bandwidth_Bps:.0%} of the HBM's {peak.bandwidth_Bps / 1e9:.0f} GB/s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=SEARCH_TRIALS)
    value, design = fixed_point(parser.parse_args().trials, systolic.HBM_EFFICIENCY)
    print(f"HBM_EFFICIENCY = {value:.4f}  ->  {latency_s(value, design) * 1e3:.2f} ms "
          f"(target {TARGET_S * 1e3}) at {design}")
    report(value, design)
