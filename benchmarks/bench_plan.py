"""How fast is one plan + estimate? Searches need thousands per second (issue #2 target:
under 5 ms for gpt2-1.5b 64:64 on 4xu280; issue #22: 0.6 ms for llama2-7b 64:64 on 4xu280).
Prints figures; not a pass/fail test.

    python -m benchmarks.bench_plan
"""

import time

from archipelago.api import make_plan, parse_workload, plan_and_estimate
from archipelago.strategies.registry import get_strategy

# (model, cluster, tokens, strategy)
CASES = [("gpt2-1.5b", "4xu280", "64:64", "dfx"), ("gpt2-345m", "1xu280", "32:256", "dfx"),
         ("llama2-7b", "4xu280", "128:512", "dfx"), ("llama2-7b", "4xu280", "64:64", "dfx"),
         ("llama2-7b", "4xu280", "64:64", "lora-q"), ("llama2-7b", "4xu280", "64:64", "lora-f")]


def per_call_ms(fn, repeats: int) -> tuple[float, float]:
    """Wall-clock and CPU (this process's) milliseconds per call: on a machine shared with
    other jobs the wall clock also counts their time, the CPU time does not."""
    fn()  # warm caches (catalog, zoo) the way a search loop would
    start, cpu = time.perf_counter(), time.process_time()
    for _ in range(repeats):
        fn()
    return ((time.perf_counter() - start) / repeats * 1e3,
            (time.process_time() - cpu) / repeats * 1e3)


def main() -> None:
    print(f"{'case':42} {'plan+estimate':>14} {'(cpu)':>9} {'estimate only':>14} {'(cpu)':>9}")
    for model, cluster, tokens, strategy in CASES:
        full = per_call_ms(lambda m=model, c=cluster, t=tokens, s=strategy:
                           plan_and_estimate(m, c, s, {"tokens": t}), 200)
        plan = make_plan(model, cluster, strategy)
        workload = parse_workload(strategy, {"tokens": tokens})
        estimator = get_strategy(strategy).plan_kind.hook("estimator")
        only = per_call_ms(lambda p=plan, w=workload, e=estimator: e(p, w), 200)
        case = f"{model} {cluster} {tokens} {strategy}"
        print(f"{case:42} {full[0]:11.3f} ms {full[1]:6.3f} ms {only[0]:11.3f} ms "
              f"{only[1]:6.3f} ms")


if __name__ == "__main__":
    main()
