"""How fast is one GPU plan + estimate with its traits, what `archi compare` runs for every
GPU row? Issue #22 wants the default comparison in under 5 s, and the GPU rows were most of
its compute. Prints wall-clock and CPU milliseconds per call; not a pass/fail test.

    python -m benchmarks.bench_gpu_estimate
"""

from itertools import product

from archipelago.api import plan_and_estimate
from archipelago.strategies.registry import get_strategy
from benchmarks.bench_plan import per_call_ms

MODELS = ("gpt2-1.5b", "llama2-7b")
CLUSTERS = ("1xh100", "4xa100", "8xl4")
TOKENS = ("64:64", "128:128")
BATCHES = ("1", "8")
STRATEGIES = ("gpu-eager", "gpu-graph")


def plan_estimate_traits(model: str, cluster: str, strategy: str, tokens: str,
                         batch: str) -> None:
    result = plan_and_estimate(model, cluster, strategy, {"tokens": tokens, "batch": batch})
    get_strategy(strategy).plan_kind.hook("traits")(result.plan, result.workload,
                                                    result.estimate)


def main() -> None:
    print(f"{'case':44} {'plan+estimate+traits':>20} {'(cpu)':>9}")
    walls, cpus = [], []
    for case in product(MODELS, CLUSTERS, STRATEGIES, TOKENS, BATCHES):
        wall, cpu = per_call_ms(lambda c=case: plan_estimate_traits(*c), 50)
        walls.append(wall)
        cpus.append(cpu)
        model, cluster, strategy, tokens, batch = case
        label = f"{model} {cluster} {tokens} batch {batch} {strategy}"
        print(f"{label:44} {wall:17.3f} ms {cpu:6.3f} ms")
    print(f"{'mean of ' + str(len(walls)) + ' cases':44} {sum(walls) / len(walls):17.3f} ms "
          f"{sum(cpus) / len(cpus):6.3f} ms")


if __name__ == "__main__":
    main()
