"""Every predicted figure the issue notes ask for, from one command (no held-out data is
read; these are predictions to be checked against the papers' measurements).

    python -m benchmarks.predictions [--trials 300]

Issue #2: DFX tokens/s for gpt2-345m on 1, 2, 4 U280 and gpt2-1.5b on 4 at 64:64, and
gpt2-345m latency at 32:256 on one U280. Issue #4: dfx, lora-f and lora-q for gpt2-345m at
32:256 on one U280 (default engines and the best found by the NSGA-II search), their
DSP/BRAM/URAM, and the 1 -> 2 -> 4 U280 speedups at 64:64 with the engine re-searched
for each deployment, as LORA does (seeds/002 §V-D).
"""

import argparse

from archipelago.api import make_plan
from archipelago.estimate.generation import Estimate, estimate_generation
from archipelago.estimate.workload import Generation
from archipelago.explore.search import SearchRequest, run_search


def estimate(model: str, cluster: str, strategy: str, work: Generation,
             engine: dict | None = None) -> Estimate:
    return estimate_generation(make_plan(model, cluster, strategy, engine), work)


def searched(model: str, cluster: str, strategy: str, work: Generation, trials: int) -> dict:
    request = SearchRequest(model, cluster, strategy, work, trials, "", "predictions")
    return run_search(request).engine


def row(label: str, est: Estimate) -> str:
    dev = est.devices[0].total
    return (f"{label:44} {est.latency_s * 1e3:9.2f} ms {est.tokens_per_s:9.2f} tok/s   "
            f"DSP {dev.dsp:5d}  BRAM {dev.bram:5d}  URAM {dev.uram:4d}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=300)
    trials = parser.parse_args().trials
    w64, w32 = Generation(64, 64), Generation(32, 256)

    print("== issue #2: DFX (calibrated on gpt2-345m 1xU280 64:64 = 93.1 tok/s)")
    for model, n in (("gpt2-345m", 1), ("gpt2-345m", 2), ("gpt2-345m", 4), ("gpt2-1.5b", 4)):
        print(row(f"{model} {n}xu280 64:64", estimate(model, f"{n}xu280", "dfx", w64)))
    print(row("gpt2-345m 1xu280 32:256", estimate("gpt2-345m", "1xu280", "dfx", w32)))

    print(f"\n== issue #4: gpt2-345m 1xU280 32:256 (search: {trials} NSGA-II trials)")
    for strategy in ("dfx", "lora-f", "lora-q"):
        print(row(f"{strategy} default engine", estimate("gpt2-345m", "1xu280", strategy, w32)))
        best = searched("gpt2-345m", "1xu280", strategy, w32, trials)
        print(row(f"{strategy} searched engine", estimate("gpt2-345m", "1xu280", strategy,
                                                          w32, best)))
        print(f"{'':44} {best}")

    print("\n== issue #4: gpt2-345m 64:64 scaling, engine searched per deployment")
    for strategy in ("lora-f", "lora-q", "dfx"):
        rates = []
        for n in (1, 2, 4):
            best = searched("gpt2-345m", f"{n}xu280", strategy, w64, trials)
            rates.append(estimate("gpt2-345m", f"{n}xu280", strategy, w64, best).tokens_per_s)
        print(f"{strategy:8} tokens/s 1/2/4: " + " / ".join(f"{r:.1f}" for r in rates)
              + f"   speedup 2x: {rates[1] / rates[0]:.2f}  4x: {rates[2] / rates[0]:.2f}")


if __name__ == "__main__":
    main()
