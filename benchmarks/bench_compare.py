"""How long does the default `archi compare gpt2-1.5b --tokens 64:64` take (every decoder
strategy x the default devices x counts 1, 2, 4, 8, plus the GPU rows; issue 22 target:
under 5 s), and how does it scale with 1, 2 and 4 local Dask workers? Each run starts from
an empty store and includes starting and stopping the local cluster; beside them, the same
combinations estimated in this process without Dask, and a rerun that reads every row back
from the store. Prints figures; not a pass/fail test.

    python -m benchmarks.bench_compare [--workers 1,2,4]
"""

import argparse
import os
import tempfile
import time
from pathlib import Path

from archipelago.compare.combos import Task, applicable, combinations, evaluate
from archipelago.compare.request import DEFAULT_COUNTS, default_devices, parse_request
from archipelago.compare.run import compare
from archipelago.models.zoo import resolve_model
from archipelago.strategies.registry import strategies

MODEL, TOKENS = "gpt2-1.5b", "64:64"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", default="1,2,4")
    counts = [int(w) for w in parser.parse_args().workers.split(",")]
    spec = resolve_model(MODEL)
    taking, _ = applicable(spec)
    # the published engines: the comparison's own costs (bench_best.py times the searches
    # `--engine best`, compare's default, adds before a store holds them)
    request = parse_request(MODEL, TOKENS, default_devices(), DEFAULT_COUNTS, "all", "1", None,
                            "latency", taking, list(strategies()), engine="published")
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        result = compare(request, spec, Path(tmp) / "warm.jsonl", workers=1)
        combos = len(result.evaluated)
        first = time.perf_counter() - start
        print(f"{MODEL} {TOKENS}: {combos} combinations ({len(result.rows)} fit) on "
              f"{os.cpu_count()} cores; first run (imports, caches) {first:.2f} s")
        every = combinations(taking, request.devices, request.counts, request.batches)
        start = time.perf_counter()
        evaluate(Task(spec, TOKENS, tuple(every)))
        print(f"{'in this process, no Dask':28} {time.perf_counter() - start:6.2f} s")
        for workers in counts:
            start = time.perf_counter()
            compare(request, spec, Path(tmp) / f"w{workers}.jsonl", workers=workers)
            print(f"{f'{workers} Dask worker(s)':28} {time.perf_counter() - start:6.2f} s")
        start = time.perf_counter()
        again = compare(request, spec, Path(tmp) / "warm.jsonl")
        print(f"{'rerun, all read back':28} {time.perf_counter() - start:6.2f} s "
              f"({again.reused} reused)")


if __name__ == "__main__":
    main()
