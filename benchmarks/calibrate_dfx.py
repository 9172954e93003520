"""Fit DFX's two constants to the two calibration points issue #20 names (seeds/001 §VII-B):
DFX_TILE_EFFICIENCY (dfx.py) so that gpt2-345m on one U280 at 64:64 tokens runs at 93.1
tokens/s (no sync on one board), then DFX_SYNC_OVERHEAD_S (router.py) so that the same model
on four U280s runs at 207.56 tokens/s (tokens/s = output tokens / end-to-end latency).
Prints the values to paste; the test suite checks the pasted values reproduce both points.
The DFX timing simulator reads the same two figures (dfx_program/units.py,
`UnitModel.calibrated`), so a refit reaches both models.

    python -m benchmarks.calibrate_dfx
"""

from collections.abc import Callable

from archipelago.estimate.workload import Generation
from archipelago.hardware.cluster import resolve_cluster
from archipelago.models.zoo import resolve_model
from archipelago.strategies.registry import get_strategy
from archipelago.strategies.tensor_parallel.engines import dfx, router
from archipelago.strategies.tensor_parallel.estimate import estimate

MODEL, WORKLOAD = "gpt2-345m", Generation(64, 64)
ONE_BOARD = ("1xu280", 93.1)
FOUR_BOARDS = ("4xu280", 207.56)


def tokens_per_s(cluster: str) -> float:
    plan = get_strategy("dfx").plan(resolve_model(MODEL), resolve_cluster(cluster), None,
                                    WORKLOAD)
    return estimate(plan, WORKLOAD).tokens_per_s


def bisect(rate: Callable[[float], float], target: float, low: float, high: float,
           rising: bool, iterations: int = 60) -> float:
    """The value in [low, high] at which `rate` (monotonic, rising or falling) hits target."""
    for _ in range(iterations):
        mid = (low + high) / 2
        if (rate(mid) < target) == rising:
            low = mid
        else:
            high = mid
    return (low + high) / 2


def _with(module: object, name: str, cluster: str) -> Callable[[float], float]:
    def rate(value: float) -> float:
        setattr(module, name, value)
        return tokens_per_s(cluster)
    return rate


def fit() -> tuple[float, float]:
    """Efficiency first (one board has no sync), then the per-sync overhead with it."""
    saved = dfx.DFX_TILE_EFFICIENCY, router.DFX_SYNC_OVERHEAD_S
    try:
        router.DFX_SYNC_OVERHEAD_S = 0.0
        efficiency = bisect(_with(dfx, "DFX_TILE_EFFICIENCY", ONE_BOARD[0]), ONE_BOARD[1],
                            0.05, 1.0, rising=True)
        dfx.DFX_TILE_EFFICIENCY = round(efficiency, 4)
        overhead = bisect(_with(router, "DFX_SYNC_OVERHEAD_S", FOUR_BOARDS[0]), FOUR_BOARDS[1],
                          0.0, 100e-6, rising=False)
        return efficiency, overhead
    finally:
        dfx.DFX_TILE_EFFICIENCY, router.DFX_SYNC_OVERHEAD_S = saved


if __name__ == "__main__":
    efficiency, overhead = fit()
    print(f"DFX_TILE_EFFICIENCY = {efficiency:.4f}  (target {ONE_BOARD[1]} tokens/s on "
          f"{ONE_BOARD[0]})")
    print(f"DFX_SYNC_OVERHEAD_S = {overhead * 1e6:.3f}e-6  (target {FOUR_BOARDS[1]} tokens/s "
          f"on {FOUR_BOARDS[0]})")
