"""How fast is the DFX timing simulator? Issue #23's target: gpt2-1.5b on four U280s for
64:64 tokens (127 token passes x 48 layers x 4 cores) in under a minute. Prints the time to
compile the programs and to simulate them, and what the simulation found; not a test.

    python -m benchmarks.bench_dfx_sim
"""

import time

from archipelago.estimate.workload import Generation
from archipelago.hardware.cluster import resolve_cluster
from archipelago.models.zoo import resolve_model
from archipelago.strategies.registry import get_strategy
from archipelago.strategies.tensor_parallel.dfx_program.compile import compile_plan
from archipelago.strategies.tensor_parallel.dfx_program.timing import Simulator
from archipelago.strategies.tensor_parallel.dfx_program.versus import units_of

MODEL, CLUSTER, N_IN, N_OUT = "gpt2-1.5b", "4xu280", 64, 64


def main() -> None:
    cluster = resolve_cluster(CLUSTER)
    plan = get_strategy("dfx").plan(resolve_model(MODEL), cluster, None,
                                    Generation(N_IN, N_OUT)).program
    units = units_of(plan)
    t0 = time.perf_counter()
    programs, _ = compile_plan(plan, N_IN, N_OUT)
    t1 = time.perf_counter()
    result = Simulator(units).run(programs)
    t2 = time.perf_counter()
    per_core = sum(len(s.instrs) for s in programs[0].sections)
    print(f"{MODEL} on {CLUSTER}, {N_IN}:{N_OUT}: {len(programs)} programs of {per_core} "
          f"instructions ({len(programs[0].layer.instrs)} per layer)")
    print(f"  compile  {t1 - t0:.2f} s")
    print(f"  simulate {t2 - t1:.2f} s  (target: under 60 s)")
    print(f"  simulated latency {result.latency_s:.4f} s, {N_OUT / result.latency_s:.2f} "
          f"tokens/s, one decoder layer {result.layer_cycles[:, -1].mean():.0f} cycles at "
          f"the last token")


if __name__ == "__main__":
    main()
