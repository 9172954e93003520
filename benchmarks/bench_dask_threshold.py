"""When does Dask pay for its start-up in `archi compare` (issue 36 point 1)? The default
gpt2-1.5b 64:64 comparison (published engines) grown by its batches (`--batch 1`, then
1..5, then 1..15: 200, 1000, 3000 combinations), each from an empty store, in this process
(the default) against `--workers 2` (a local Dask cluster, its start and stop included),
interleaved in the same run. Prints the wall and CPU seconds of both and the wall gain; the
crossover is the first size where `--workers 2` takes less wall time. Not a test.

    python -m benchmarks.bench_dask_threshold [--batches 1,5,15] [--workers 2]
"""

import argparse
import os
import tempfile
from pathlib import Path

from archipelago.compare.combos import applicable
from archipelago.compare.request import DEFAULT_COUNTS, default_devices, parse_request
from archipelago.compare.run import compare
from archipelago.models.zoo import resolve_model
from archipelago.strategies.registry import strategies
from benchmarks.bench_compare import MODEL, TOKENS, measured, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", default="1,5,15",
                        help="comma-separated: compare batches 1..B for each B")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    spec = resolve_model(MODEL)
    taking, _ = applicable(spec)
    print(f"{MODEL} {TOKENS}, published engines, default devices and counts, on "
          f"{os.cpu_count()} cores: in this process vs --workers {args.workers} (Dask)")
    print(f"{'combinations':>12} {'in-process wall':>16} {'CPU':>6} {'Dask wall':>10} "
          f"{'CPU':>6} {'Dask wall gain':>15}  rows")
    crossover = None
    with tempfile.TemporaryDirectory() as tmp:
        compare(parse_request(MODEL, TOKENS, default_devices(), DEFAULT_COUNTS, "all", "1",
                              None, "latency", taking, list(strategies()), engine="published"),
                spec, Path(tmp) / "warm.jsonl")  # imports and caches, paid by neither side
        for top in (int(b) for b in args.batches.split(",")):
            request = parse_request(MODEL, TOKENS, default_devices(), DEFAULT_COUNTS, "all",
                                    ",".join(map(str, range(1, top + 1))), None, "latency",
                                    taking, list(strategies()), engine="published")
            here, cpu, wall = measured(
                lambda r=request, t=top: compare(r, spec, Path(tmp) / f"here{t}.jsonl"))
            dask, dcpu, dwall = measured(lambda r=request, t=top: compare(
                r, spec, Path(tmp) / f"dask{t}.jsonl", workers=args.workers))
            same = "same" if rows(dask) == rows(here) else "DIFFERENT"
            print(f"{len(here.evaluated):12d} {wall:15.2f}s {cpu:5.2f}s {dwall:9.2f}s "
                  f"{dcpu:5.2f}s {wall - dwall:+14.2f}s  {same}")
            if crossover is None and dwall < wall:
                crossover = len(here.evaluated)
    print("crossover: " + (f"--workers {args.workers} first saves wall time at "
                           f"{crossover} combinations" if crossover else
                           f"--workers {args.workers} saved no wall time at any size measured"))


if __name__ == "__main__":
    main()
