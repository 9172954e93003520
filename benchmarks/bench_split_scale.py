"""How does `--split auto` grow with the rack? Issue 36's targets: Llama-2-70B with lora-q
on 256 U280s (rings of 8) planned and estimated under 50 ms of CPU, and the growth exponent
from 8 to 256 boards at most 1. Prints each board count's CPU time today beside the search
before it pruned (commit BASE), both measured in this run: each in its own subprocess, the
old one importing `archipelago` from a `git worktree` of BASE made for the run and removed
after. Needs the repository's history (a clone, not an export). Not a test.

    python -m benchmarks.bench_split_scale
"""

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

BASE = "c25f4080785becd5f794745ede78eff3686d6376"  # the search before it pruned
ROOT = Path(__file__).resolve().parent.parent
LLAMA_70B = str(ROOT / "tests" / "data" / "llama-2-70b" / "config.json")
BOARDS = (8, 16, 32, 64, 128, 256)
STRATEGIES = ("lora-q", "dfx")
REPEATS = 7  # the least of these calls: a busy machine only ever adds time


def measure() -> dict[str, list[float]]:
    """CPU ms of one plan and estimate with `--split auto` at each board count (the least
    of REPEATS calls, after one that warms the catalog, model file and engines), by
    strategy."""
    from archipelago.api import plan_and_estimate

    out: dict[str, list[float]] = {}
    for strategy in STRATEGIES:
        out[strategy] = []
        for boards in BOARDS:
            def call(b: int = boards, s: str = strategy) -> None:
                plan_and_estimate(LLAMA_70B, f"{b // 8}x8xu280", s,
                                  {"tokens": "128:128", "split": "auto"})
            call()
            took = []
            for _ in range(REPEATS):
                start = time.process_time()
                call()
                took.append(time.process_time() - start)
            out[strategy].append(min(took) * 1e3)
    return out


def in_subprocess(source: Path) -> dict[str, list[float]]:
    """`measure()` in a fresh interpreter importing `archipelago` from `source`."""
    env = {**os.environ, "PYTHONPATH": str(source)}
    run = subprocess.run([sys.executable, __file__, "--measure"], env=env, check=True,
                         capture_output=True, text=True)
    return json.loads(run.stdout)


def exponent(ms: list[float]) -> tuple[float, float]:
    """The least-squares slope of log time over log boards, and the steepest step's."""
    xs, ys = [math.log(b) for b in BOARDS], [math.log(t) for t in ms]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = (sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
             / sum((x - mx) ** 2 for x in xs))
    steps = [(ys[i + 1] - ys[i]) / (xs[i + 1] - xs[i]) for i in range(len(xs) - 1)]
    return slope, max(steps)


def main() -> None:
    from benchmarks.base_commit import checked_out  # not in the base commit's --measure

    with checked_out(BASE) as base:
        before = in_subprocess(base)
    now = in_subprocess(ROOT)
    print(f"llama-2-70b --split auto, 128:128, rings of 8 U280s: CPU ms of one plan and "
          f"estimate, before ({BASE[:9]}) -> now")
    print(f"{'boards':>8} " + "".join(f"{s:>22}" for s in STRATEGIES))
    for i, boards in enumerate(BOARDS):
        print(f"{boards:8d} " + "".join(f"{before[s][i]:10.1f} -> {now[s][i]:7.1f} ms"
                                        for s in STRATEGIES))
    for s in STRATEGIES:
        (fit0, step0), (fit1, step1) = exponent(before[s]), exponent(now[s])
        print(f"{s:7} growth exponent 8-256 boards (fit, steepest step): before "
              f"{fit0:.2f}, {step0:.2f}; now {fit1:.2f}, {step1:.2f} (target <= 1)")
    print(f"lora-q on 256 boards: {now['lora-q'][-1]:.1f} ms (target < 50; before "
          f"{before['lora-q'][-1]:.1f})")


if __name__ == "__main__":
    if sys.argv[1:] == ["--measure"]:
        print(json.dumps(measure()))
    else:
        main()
