"""How fast is one plan + estimate? Searches need thousands per second (issue #2 target:
under 5 ms for gpt2-1.5b 64:64 on 4xu280). Prints figures; not a pass/fail test.

    python -m benchmarks.bench_plan
"""

import time

from archipelago.api import make_plan, plan_and_estimate
from archipelago.estimate.workload import Generation
from archipelago.strategies.tensor_parallel.estimate import estimate_generation

CASES = [("gpt2-1.5b", "4xu280", "64:64"), ("gpt2-345m", "1xu280", "32:256"),
         ("llama2-7b", "4xu280", "128:512")]


def per_call_ms(fn, repeats: int) -> float:
    fn()  # warm caches (catalog, zoo) the way a search loop would
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - start) / repeats * 1e3


def main() -> None:
    print(f"{'case':34} {'plan+estimate':>14} {'estimate only':>14}")
    for model, cluster, tokens in CASES:
        full = per_call_ms(lambda m=model, c=cluster, t=tokens:
                           plan_and_estimate(m, c, "dfx", {"tokens": t}), 200)
        plan = make_plan(model, cluster, "dfx")
        workload = Generation(*map(int, tokens.split(":")))
        only = per_call_ms(lambda p=plan, w=workload: estimate_generation(p, w), 200)
        print(f"{model + ' ' + cluster + ' ' + tokens:34} {full:11.3f} ms {only:11.3f} ms")


if __name__ == "__main__":
    main()
