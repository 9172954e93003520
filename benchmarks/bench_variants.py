"""How much faster is a batch of engine designs than one call chain per design? Issue 22's
target: a batched estimate of 1,000 engine variants of one plan at least 20x faster per
variant. Both paths run here, in one process, on the same 1,000 designs sampled at random
from each LORA space: the scalar one as `archi explore` costs a trial (make_plan, the
estimator through the pipeline, the utilization hook), the batch one through the kind's
`batch_evaluator` hook. Prints figures; not a pass/fail test.

    python -m benchmarks.bench_variants
"""

import random
import time
from typing import Any

from archipelago.api import estimate, make_plan, parse_workload
from archipelago.explore.spaces import design_space
from archipelago.strategies.registry import get_strategy

MODEL, CLUSTER, TOKENS, DESIGNS = "gpt2-1.5b", "4xu280", "64:64", 1000


def sampled(strategy: str, count: int, seed: int) -> list[dict[str, Any]]:
    """Designs with each gene drawn uniformly from its choices, seeded (a search's first
    generation)."""
    rng, space = random.Random(seed), design_space(strategy, MODEL, CLUSTER)
    return [space.decode({name: rng.choice(choices) for name, choices in space.genes.items()})
            for _ in range(count)]


def main() -> None:
    print(f"{MODEL} on {CLUSTER} at {TOKENS}, {DESIGNS} designs per space")
    print(f"{'space':8} {'scalar / design':>16} {'batch / design':>16} {'speed-up':>9}")
    for strategy in ("lora-q", "lora-f"):
        kind = get_strategy(strategy).plan_kind
        utilization, batch = kind.hook("utilization"), kind.hook("batch_evaluator")
        workload = parse_workload(strategy, {"tokens": TOKENS}, "explore")
        engines = sampled(strategy, DESIGNS, 0)
        batch(MODEL, CLUSTER, strategy, workload, engines[:10])  # warm caches (zoo, catalog)
        start = time.perf_counter()
        for engine in engines:
            plan = make_plan(MODEL, CLUSTER, strategy, engine)
            utilization(plan, estimate(strategy, plan, workload, strategy))
        scalar = (time.perf_counter() - start) / DESIGNS
        start = time.perf_counter()
        batch(MODEL, CLUSTER, strategy, workload, engines)
        batched = (time.perf_counter() - start) / DESIGNS
        print(f"{strategy:8} {scalar * 1e6:13.0f} us {batched * 1e6:13.1f} us "
              f"{scalar / batched:8.1f}x")


if __name__ == "__main__":
    main()
