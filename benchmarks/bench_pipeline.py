"""How fast are tensor x pipeline plans? Issue #21's targets: Llama-2-70B on 64 devices
planned and estimated with the split chosen automatically under 1 s, with a given split
under 5 ms; and a sweep of 1,000 given splits, batch sizes and lengths. Prints figures; not a test.

    python -m benchmarks.bench_pipeline
"""

import time
from pathlib import Path

from archipelago.api import plan_and_estimate

LLAMA_70B = str(Path(__file__).parent.parent / "tests" / "data" / "llama-2-70b" /
                "config.json")
CLUSTER = "64xu280"  # one ring of 64, re-cut into stages by the split
TOKENS = "128:128"


def per_call_ms(fn, repeats: int) -> float:
    fn()  # warm caches (catalog, model file, engines) the way a search loop would
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - start) / repeats * 1e3


def sweep_points() -> list[tuple[str, dict[str, str]]]:
    """(split, workload) pairs: every tensor-parallel degree 1 .. 64 (KV heads replicated
    beyond Llama-2-70B's 8) with every stage count the 64 devices allow, at four batch sizes
    and two prompt/output lengths: 1,016 points."""
    splits = [f"tp={tp},pp={pp}" for tp in (1, 2, 4, 8, 16, 32, 64)
              for pp in range(1, 64 // tp + 1)]
    works = [{"tokens": t, "batch": str(b)} for t in ("128:128", "1024:256")
             for b in (1, 4, 16, 64)]
    return [(s, w) for s in splits for w in works]


def main() -> None:
    for strategy in ("lora-q", "dfx"):
        auto = per_call_ms(lambda s=strategy: plan_and_estimate(
            LLAMA_70B, CLUSTER, s, {"tokens": TOKENS, "split": "auto"}), 5)
        given = per_call_ms(lambda s=strategy: plan_and_estimate(
            LLAMA_70B, CLUSTER, s, {"tokens": TOKENS, "split": "tp=8,pp=8"}), 50)
        chosen = plan_and_estimate(LLAMA_70B, CLUSTER, strategy,
                                   {"tokens": TOKENS, "split": "auto"}).estimate.split
        print(f"llama-2-70b {CLUSTER} {strategy:7} auto (chose tp={chosen.tp} pp={chosen.pp})"
              f" {auto:8.1f} ms (target < 1000)   given tp=8,pp=8 {given:6.2f} ms "
              f"(target < 5)")
    points = sweep_points()
    start = time.perf_counter()
    for split, work in points:
        plan_and_estimate(LLAMA_70B, CLUSTER, "lora-q", {**work, "split": split})
    took = time.perf_counter() - start
    print(f"sweep of {len(points)} given splits x batch sizes x lengths (lora-q): {took:.2f} s, "
          f"{took / len(points) * 1e3:.2f} ms a point")


if __name__ == "__main__":
    main()
