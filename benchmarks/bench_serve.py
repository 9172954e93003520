"""How fast is a serving simulation (issue 35: 10,000 requests through continuous batching
in under 1 s; a capacity search, its saturated run included, in under 5 s)? Printed
beside the baseline it replaces in the same run: one estimator call per iteration, the
cost of each measured here over 200 calls and multiplied by the simulation's iteration
count. Figures, not a pass/fail test.

    python -m benchmarks.bench_serve
"""

import time
from dataclasses import replace

from archipelago.api import make_plan, parse_workload
from archipelago.serving.metrics import Targets, capacity, judged_limit, saturated, saturation
from archipelago.serving.replica import Policy
from archipelago.serving.requests import Lengths, generate
from archipelago.serving.simulate import simulate
from archipelago.strategies.registry import get_strategy

# (model, cluster, strategy, rate, split): the done-when cases, and a rack of four
# rings of 8 V80 as one pipeline of 4 stages (4 micro-batches in flight) and as one stage
CASES = [("llama2-7b", "1xh100", "gpu-graph", 8.0, None),
         ("llama2-7b", "8xu280", "lora-q", 2.0, None),
         ("llama2-7b", "4x8xv80", "lora-q", 2.0, "tp=8,pp=4"),
         ("llama2-7b", "4x8xv80", "lora-q", 2.0, "tp=8,pp=1")]
TOKENS = "512:128"


def main() -> None:
    print(f"{'case':44} {'tabulate':>9} {'10k continuous':>15} {'iterations':>11} "
          f"{'baseline (est./iter.)':>22} {'capacity search':>16}")
    for model, cluster, strategy, rate, split in CASES:
        kind = get_strategy(strategy).plan_kind
        options = {"tokens": TOKENS, **({"split": split} if split else {})}
        work = parse_workload(strategy, options)
        plan = make_plan(model, cluster, strategy, None, options)
        start = time.perf_counter()
        table = kind.hook("serving")(plan, work, 64)
        tabulate_s = time.perf_counter() - start
        reqs = generate("poisson", 10_000, Lengths("fixed", 512),
                        Lengths("lognormal", 128, 0.5), 0, table.max_context)
        start = time.perf_counter()
        out = simulate(table, reqs, rate, Policy("continuous", 64))
        sim_s = time.perf_counter() - start
        estimator, step = kind.hook("estimator"), replace(work, output_tokens=2, batch=16)
        start = time.perf_counter()
        for _ in range(200):
            estimator(plan, step)
        baseline_s = (time.perf_counter() - start) / 200 * out.iterations
        small = generate("poisson", 1000, Lengths("fixed", 512), Lengths("fixed", 128), 0,
                         table.max_context)
        start = time.perf_counter()
        limit = judged_limit(saturation([simulate(table, saturated(small, 64), float("inf"),
                                                  Policy("continuous", 64))]), len(small))
        found = capacity(lambda r, t=table, s=small: [simulate(t, s, r, Policy("continuous", 64))],
                         Targets(1.0, 0.05), start=rate, limit=limit)
        search_s = time.perf_counter() - start
        case = f"{model} {cluster} {strategy} {split or ''} {rate:g}/s"
        print(f"{case:44} {tabulate_s:7.2f} s {sim_s:13.2f} s {out.iterations:11,} "
              f"{baseline_s:20.1f} s {search_s:8.2f} s ({found.rate:.2f} req/s, "
              f"{found.simulations} sims)")


if __name__ == "__main__":
    main()
