"""How fast are tensor x pipeline plans? Issue #21's targets: Llama-2-70B on 64 devices
planned and estimated with the split chosen automatically under 1 s, with a given split
under 5 ms; and a sweep of 1,000 given splits, batch sizes and lengths. Then Mixtral-8x7B
(its published config, written by hand in tests/data) on 8, 16 and 32 U280s with LORA-Q:
the split the planner chooses (expert placement included) and, beside it, the same split
with the other placement. Prints figures; not a test.

    python -m benchmarks.bench_pipeline
"""

import time
from pathlib import Path

from archipelago.api import plan_and_estimate
from archipelago.models.zoo import resolve_model
from archipelago.strategies.tensor_parallel.efficiency import decode_efficiency
from archipelago.strategies.tensor_parallel.planning.experts import ep_degrees

DATA = Path(__file__).parent.parent / "tests" / "data"
LLAMA_70B = str(DATA / "llama-2-70b" / "config.json")
MIXTRAL = str(DATA / "mixtral-8x7b" / "config.json")
# 8, 16 and 32 boards: rings of 4 or of 8 on a 100G switch, or one ring.
MIXTRAL_CLUSTERS = ("2x4xu280", "8xu280", "4x4xu280", "2x8xu280", "16xu280", "8x4xu280",
                    "4x8xu280", "32xu280")
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
                                   {"tokens": TOKENS, "split": "auto"}).plan.split
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
    mixtral()


def mixtral_row(cluster: str, split: str) -> str:
    result = plan_and_estimate(MIXTRAL, cluster, "lora-q", {"tokens": TOKENS, "split": split})
    est = result.estimate
    eff = decode_efficiency(result.plan, result.workload, est)
    chosen = result.plan.split
    fits = "" if est.feasible else f"  DOES NOT FIT: {est.reasons[0]}"
    return (f"tp={chosen.tp} pp={chosen.pp} ep={chosen.ep} layers="
            f"{'+'.join(map(str, chosen.layers or ()))}: {est.latency_s * 1e3:9.1f} ms "
            f"{est.tokens_per_s:7.1f} tok/s  bandwidth {eff.bandwidth if eff else 0:5.1%}{fits}")


def mixtral() -> None:
    print(f"mixtral-8x7b lora-q {TOKENS}: the planner's choice, then the same tp and pp with "
          "the other expert placement (where the ring can run one)")
    spec = resolve_model(MIXTRAL)
    for cluster in MIXTRAL_CLUSTERS:
        auto = plan_and_estimate(MIXTRAL, cluster, "lora-q", {"tokens": TOKENS,
                                                             "split": "auto"}).plan.split
        print(f"  {cluster:9} auto  {mixtral_row(cluster, 'auto')}")
        for ep in ep_degrees(spec, auto.tp):
            if ep != auto.ep:
                split = f"tp={auto.tp},pp={auto.pp},ep={ep}"
                print(f"  {'':9} other {mixtral_row(cluster, split)}")


if __name__ == "__main__":
    main()
