"""10,000 `archi explore` trials of the LORA-Q and LORA-F spaces, gpt2-1.5b on 4 U280 at
64:64 (issue 22's target: under 10 s on the project's 2-core machine, every trial persisted),
on a local Dask cluster (default workers, its start included), in this process (--workers
0), and as the `archi explore` command end to end (process start to exit); each best design
beside the optimum of an enumeration of the whole space. Before issue 22 the optuna search
took 28 ms per trial (issue 22's figure: 1,000 LORA-Q trials in 28 s).

    python -m benchmarks.bench_explore [--trials 10000]
"""

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from archipelago.estimate.workload import Generation
from archipelago.explore.evaluate import FABRIC, Problem, evaluate_chunk, fabric, violation
from archipelago.explore.search import SearchRequest, run_search
from archipelago.explore.spaces import design_space, engine_key

MODEL, CLUSTER, WORK = "gpt2-1.5b", "4xu280", Generation(64, 64)
OPTUNA_S_PER_TRIAL = 28e-3  # issue 22: the search before it, 1,000 LORA-Q trials in 28 s


def optimum(strategy: str) -> tuple[str, float, float]:
    """The enumerated optimum (key, latency) in explore's order, and the enumeration's time."""
    start = time.perf_counter()
    space = design_space(strategy, MODEL, CLUSTER)
    engines = {engine_key(e): e for e in map(space.engine,
                                              space.rows(np.arange(space.combinations)))}
    scores = dict(zip(engines, evaluate_chunk((Problem(MODEL, CLUSTER, strategy, WORK),
                                               list(engines.values()))), strict=True))
    fits = [k for k, s in scores.items() if violation(s["utilization"], s["feasible"]) <= 0]
    best = min(fits, key=lambda k: (scores[k]["latency_s"], fabric(scores[k]["utilization"]),
                                    sum(scores[k]["utilization"][r] for r in FABRIC), k))
    return best, scores[best]["latency_s"], time.perf_counter() - start


def searched(strategy: str, trials: int, workers: int | None) -> tuple[str, float, float]:
    """(best key, latency, wall seconds) of one search into a fresh study journal."""
    with tempfile.TemporaryDirectory() as storage:
        start = time.perf_counter()
        best = run_search(SearchRequest(MODEL, CLUSTER, strategy, WORK, trials, storage,
                                        "bench", workers=workers))
        wall = time.perf_counter() - start
        (journal,) = Path(storage).glob("*.journal")
        lines = journal.read_text().splitlines()[1:]
        assert len({json.loads(line)["key"] for line in lines}) == best.trials_done == trials
    return engine_key(best.engine), best.latency_s, wall


def command(strategy: str, trials: int) -> tuple[str, float, float]:
    """The same search as `archi explore` in a new process, default options."""
    with tempfile.TemporaryDirectory() as where:
        start = time.perf_counter()
        out = subprocess.run([sys.executable, "-m", "archipelago", "explore", MODEL,
                              "--cluster", CLUSTER, "--strategy", strategy, "--tokens", "64:64",
                              "--trials", str(trials), "--storage", f"{where}/s", "--out",
                              f"{where}/best.yaml", "--json"],
                             capture_output=True, text=True, check=True)
        wall = time.perf_counter() - start
    result = json.loads(out.stdout)
    return engine_key(result["engine"]), result["latency_s"], wall


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=10_000)
    trials = parser.parse_args().trials
    print(f"{trials:,} explore trials, {MODEL} on {CLUSTER} at 64:64, every trial persisted"
          f" (before: optuna, {OPTUNA_S_PER_TRIAL * 1e3:.0f} ms per trial ="
          f" {trials * OPTUNA_S_PER_TRIAL:,.0f} s)")
    for strategy in ("lora-q", "lora-f"):
        key, latency, enumeration_s = optimum(strategy)
        print(f"\n{strategy}: enumerated optimum {latency * 1e3:.3f} ms  {key}"
              f"  ({design_space(strategy, MODEL, CLUSTER).combinations:,} gene combinations in"
              f" {enumeration_s:.1f} s)")
        runs = {"Dask, default workers": lambda s=strategy: searched(s, trials, None),
                "in process (--workers 0)": lambda s=strategy: searched(s, trials, 0),
                "archi explore command": lambda s=strategy: command(s, trials)}
        for label, run in runs.items():
            found, found_latency, wall = run()
            verdict = "= optimum" if found == key else f"differs: {found}"
            print(f"  {label:26} {wall:6.2f} s  {trials / wall:7,.0f} trials/s"
                  f"  best {found_latency * 1e3:.3f} ms {verdict}")


if __name__ == "__main__":
    main()
