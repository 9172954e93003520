"""Fit HBM_EFFICIENCY to the one LORA calibration point issue 20 names: LORA-F runs
gpt2-345m at 32:256 tokens on one U280 in 678.4 ms end to end (seeds/002 Table IV's
workload), with the published LORA-F engine (the strategy's default: the prototype
seeds/002 §VI-A-d describes, its parameters derived in the strategies' registration,
strategies/tensor_parallel/__init__.py). No search: the project's searched engine is a
separate result (benchmarks/predictions.py, `archi explore`). Prints the value to paste
into archipelago/strategies/tensor_parallel/engines/systolic.py; tests/test_lora_engine.py
checks the pasted value reproduces the point.

    python -m benchmarks.calibrate_lora
"""

import argparse

import numpy as np

from archipelago.api import make_plan
from archipelago.estimate.workload import Generation
from archipelago.models.graph_ops import Phase
from archipelago.strategies.tensor_parallel.costs import decode_seconds
from archipelago.strategies.tensor_parallel.engines import systolic
from archipelago.strategies.tensor_parallel.estimate import estimate
from archipelago.strategies.tensor_parallel.plan import ComputeStep

TARGET_S = 678.4e-3
MODEL, CLUSTER, STRATEGY, WORKLOAD = "gpt2-345m", "1xu280", "lora-f", Generation(32, 256)


def latency_s(efficiency: float) -> float:
    """The published LORA-F engine's (the strategy's default) latency at `efficiency`."""
    systolic.HBM_EFFICIENCY = efficiency
    return estimate(make_plan(MODEL, CLUSTER, STRATEGY), WORKLOAD).latency_s


def fit(low: float = 0.05, high: float = 1.0, iterations: int = 50) -> float:
    """Bisection: latency falls monotonically as the efficiency rises. Refuses a target
    the design cannot reach at any efficiency (its array, not HBM, bounds it)."""
    original = systolic.HBM_EFFICIENCY
    try:
        if latency_s(high) > TARGET_S:
            raise SystemExit(f"{MODEL} {WORKLOAD} on {CLUSTER}: {latency_s(high) * 1e3:.1f} ms "
                             f"even at efficiency {high}; no efficiency reaches {TARGET_S}")
        for _ in range(iterations):
            mid = (low + high) / 2
            low, high = (mid, high) if latency_s(mid) > TARGET_S else (low, mid)
        return (low + high) / 2
    finally:
        systolic.HBM_EFFICIENCY = original


def decode_stream(strategy: str) -> tuple[float, float]:
    """Bytes one decode token streams (weights and KV cache, whole tiles) at the workload's
    mean context, and their rate over that token's predicted time."""
    plan = make_plan(MODEL, CLUSTER, strategy).program
    context = np.array([WORKLOAD.input_tokens + WORKLOAD.output_tokens // 2])
    phase = Phase(1, context)
    parts = ((plan.block_steps, plan.spec.layers), (plan.output_steps, 1))
    nbytes = sum(repeat * float(plan.engine.streamed_bytes(step, phase)[0])
                 for steps, repeat in parts for step in steps if isinstance(step, ComputeStep))
    return nbytes, nbytes / float(decode_seconds(plan, context)[0])


def report(efficiency: float) -> None:
    systolic.HBM_EFFICIENCY = efficiency
    peak = make_plan(MODEL, CLUSTER, STRATEGY).program.devices[0].device.memory("hbm")
    for strategy in (STRATEGY, "lora-q"):
        nbytes, rate = decode_stream(strategy)
        print(f"{strategy} decode: {nbytes / 1e6:.1f} MB per token at {rate / 1e9:.1f} GB/s = "
              f"{rate / peak.bandwidth_Bps:.0%} of the HBM's {peak.bandwidth_Bps / 1e9:.0f} GB/s")


if __name__ == "__main__":
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    value = fit()
    print(f"HBM_EFFICIENCY = {value:.4f}  ->  {latency_s(value) * 1e3:.2f} ms "
          f"(target {TARGET_S * 1e3}) with the published LORA-F engine")
    report(value)
