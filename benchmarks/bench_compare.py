"""How much does the default `archi compare gpt2-1.5b --tokens 64:64` cost (every decoder
strategy x the default devices x counts 1, 2, 4, 8, plus the GPU rows; issue 22 target:
under 5 s wall; issue 36: under 1.0 s of CPU in process), in this process (the default) and
on 1, 2 and 4 local Dask workers (`--workers N`, starting and stopping the local cluster
included), measured in the same run? CPU is this process's plus its children's (the Dask
workers, counted once reaped). Each run starts from an empty store and must give the
in-process rows; a rerun reads every row back from the store. Prints figures; not a
pass/fail test.

    python -m benchmarks.bench_compare [--workers 1,2,4]
"""

import argparse
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from archipelago.compare.combos import applicable
from archipelago.compare.request import DEFAULT_COUNTS, default_devices, parse_request
from archipelago.compare.run import Comparison, compare
from archipelago.compare.summary import comparison_dict
from archipelago.models.zoo import resolve_model
from archipelago.strategies.registry import strategies

MODEL, TOKENS = "gpt2-1.5b", "64:64"


def measured(run: Callable[[], Any]) -> tuple[Any, float, float]:
    """(result, CPU seconds of this process and its reaped children, wall seconds)."""
    before, start = os.times(), time.perf_counter()
    result = run()
    after = os.times()
    cpu = sum(after[:4]) - sum(before[:4])  # user, system, children's user and system
    return result, cpu, time.perf_counter() - start


def rows(result: Comparison) -> list[Any]:
    return comparison_dict(result)["rows"]


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
        warm, cpu, wall = measured(lambda: compare(request, spec, Path(tmp) / "warm.jsonl"))
        print(f"{MODEL} {TOKENS}: {len(warm.evaluated)} combinations ({len(warm.rows)} fit) on "
              f"{os.cpu_count()} cores; first run (imports, caches) {cpu:.2f} s CPU")
        print(f"{'':30} {'CPU s':>7} {'wall s':>7}  rows")
        here, cpu, wall = measured(lambda: compare(request, spec, Path(tmp) / "here.jsonl"))
        print(f"{'in this process (default)':30} {cpu:7.2f} {wall:7.2f}  "
              f"{'same' if rows(here) == rows(warm) else 'DIFFERENT'}")
        for workers in counts:
            on_dask, cpu, wall = measured(lambda w=workers: compare(
                request, spec, Path(tmp) / f"w{w}.jsonl", workers=w))
            print(f"{f'--workers {workers} (Dask, start-up in)':30} {cpu:7.2f} {wall:7.2f}  "
                  f"{'same' if rows(on_dask) == rows(here) else 'DIFFERENT'}")
        again, cpu, wall = measured(lambda: compare(request, spec, Path(tmp) / "warm.jsonl"))
        print(f"{'rerun, all read back':30} {cpu:7.2f} {wall:7.2f}  ({again.reused} reused)")


if __name__ == "__main__":
    main()
