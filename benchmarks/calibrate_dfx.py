"""Fit DFX_TILE_EFFICIENCY to the one calibration point issue #2 names: gpt2-345m on one
U280 at 64:64 tokens runs at 93.1 tokens/s (seeds/001 §VII-B). Prints the fitted value to
paste into archipelago/strategies/tensor_parallel/dfx.py; the test suite checks the pasted
value reproduces it.

    python -m benchmarks.calibrate_dfx
"""

from archipelago.estimate.workload import Generation
from archipelago.hardware.cluster import resolve_cluster
from archipelago.models.zoo import resolve_model
from archipelago.strategies.registry import get_strategy
from archipelago.strategies.tensor_parallel import dfx
from archipelago.strategies.tensor_parallel.estimate import estimate_generation

TARGET_TOKENS_PER_S = 93.1
MODEL, CLUSTER, WORKLOAD = "gpt2-345m", "1xu280", Generation(64, 64)


def tokens_per_s(efficiency: float) -> float:
    dfx.DFX_TILE_EFFICIENCY = efficiency
    plan = get_strategy("dfx").plan(resolve_model(MODEL), resolve_cluster(CLUSTER))
    return estimate_generation(plan, WORKLOAD).tokens_per_s


def fit(low: float = 0.05, high: float = 1.0, iterations: int = 60) -> float:
    """Bisection: tokens/s rises monotonically with the efficiency."""
    original = dfx.DFX_TILE_EFFICIENCY
    try:
        for _ in range(iterations):
            mid = (low + high) / 2
            low, high = (mid, high) if tokens_per_s(mid) < TARGET_TOKENS_PER_S else (low, mid)
        return (low + high) / 2
    finally:
        dfx.DFX_TILE_EFFICIENCY = original


if __name__ == "__main__":
    value = fit()
    print(f"DFX_TILE_EFFICIENCY = {value:.4f}  ->  {tokens_per_s(value):.2f} tokens/s "
          f"(target {TARGET_TOKENS_PER_S})")
