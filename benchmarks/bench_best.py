"""How long does the best engine of one combination take (`plan --engine best`, a compare
row): the search into an empty explore store, and again read back from it? Each strategy
with a design space on each device, count and batch of issue 34's comparison (llama2-7b,
128:128), in this process; combinations the strategy refuses (no ring on the VHK158) or
whose search finds nothing that fits (llama2-7b on one U280) are counted apart. Prints
figures; not a pass/fail test.

    python -m benchmarks.bench_best [--model M] [--tokens IN:OUT] [--devices a,b]
                                    [--counts 1,2] [--batch 1,8]
"""

import argparse
import os
import statistics
import tempfile

from archipelago.api import parse_workload
from archipelago.cache_dir import DIR_ENV
from archipelago.errors import ArchipelagoError
from archipelago.explore.best import best_engine
from archipelago.strategies.registry import strategies


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="llama2-7b")
    parser.add_argument("--tokens", default="128:128")
    parser.add_argument("--devices", default="u55c,v80,vhk158,u280")
    parser.add_argument("--counts", default="1,2,4,8")
    parser.add_argument("--batch", default="1,8")
    args = parser.parse_args()
    names = [n for n, s in strategies().items() if s.design_space]
    with tempfile.TemporaryDirectory() as cache:
        os.environ[DIR_ENV] = cache
        first: dict[str, list[float]] = {}
        again: dict[str, list[float]] = {}
        skipped = 0
        for strategy in names:
            for device in args.devices.split(","):
                for count in args.counts.split(","):
                    for batch in args.batch.split(","):
                        work = parse_workload(strategy, {"tokens": args.tokens,
                                                         "batch": batch})
                        cluster = f"{count}x{device}"
                        try:
                            found = best_engine(args.model, cluster, strategy, work)
                        except ArchipelagoError:
                            skipped += 1
                            continue
                        back = best_engine(args.model, cluster, strategy, work)
                        assert back.cached and back.engine == found.engine
                        first.setdefault(strategy, []).append(found.seconds)
                        again.setdefault(strategy, []).append(back.seconds)
                        print(f"{strategy:7} {cluster:9} batch {batch}: searched "
                              f"{found.seconds:6.2f} s ({found.trials:,} trials), read back "
                              f"{back.seconds:5.2f} s", flush=True)
    print(f"\n{args.model} {args.tokens}; {skipped} combinations refused or with nothing "
          "that fits (not timed)")
    for strategy in first:
        print(f"{strategy:7} {len(first[strategy]):3} combinations: search median "
              f"{statistics.median(first[strategy]):5.2f} s (total "
              f"{sum(first[strategy]):6.1f} s), read back median "
              f"{statistics.median(again[strategy]):4.2f} s (total "
              f"{sum(again[strategy]):5.1f} s)")


if __name__ == "__main__":
    main()
