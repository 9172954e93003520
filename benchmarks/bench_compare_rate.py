"""How much does the default `archi compare llama2-7b --rate 5 --ttft 1s --tpot 50ms` cost
(every decoder strategy x the default devices x counts 1, 2, 4, 8: about 200 combinations,
each fitting one tabulated, its capacity searched and its replicas confirmed; issue 35
target: under 30 s in process), beside the plain `archi compare` of the same combinations
(the baseline, `--tokens 512:128`), in this process (the default) and on 1 and 2 local Dask
workers (`--workers N`, starting and stopping the local cluster included), in the same run?
CPU is this process's plus its children's (the Dask workers, counted once reaped). Each run
starts from an empty store and must give the in-process rows; a rerun reads every row back.
The engines are the published ones (`--engine published`): the searched engines' cost is
the explore store's (bench_best.py), not the comparison's. Prints figures; not a pass/fail
test.

    python -m benchmarks.bench_compare_rate [--workers 1,2]
"""

import argparse
import os
import tempfile
from pathlib import Path

from archipelago.compare.combos import applicable
from archipelago.compare.request import (
    DEFAULT_COUNTS,
    Request,
    default_devices,
    parse_request,
)
from archipelago.compare.run import compare
from archipelago.compare.service import ServiceOptions, parse_service
from archipelago.models.zoo import resolve_model
from archipelago.strategies.registry import strategies
from benchmarks.bench_compare import measured, rows

MODEL = "llama2-7b"
SERVICE = ServiceOptions(rate="5", ttft="1s", tpot="50ms")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", default="1,2")
    counts = [int(w) for w in parser.parse_args().workers.split(",") if w]
    spec = resolve_model(MODEL)
    taking, every = applicable(spec)[0], list(strategies())
    tokens, service = parse_service(SERVICE, None)

    def request(served: bool) -> Request:
        return parse_request(MODEL, tokens, default_devices(), DEFAULT_COUNTS, "all", "1",
                             None, None, taking, every, engine="published",
                             service=service if served else None)

    plain, rate = request(False), request(True)
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp)
        _, cpu, _ = measured(lambda: compare(plain, spec, store / "warm.jsonl"))
        print(f"{MODEL} {tokens}, --rate 5 --ttft 1s --tpot 50ms on {os.cpu_count()} cores; "
              f"first run (imports, caches) {cpu:.2f} s CPU")
        print(f"{'':38} {'CPU s':>7} {'wall s':>7}  rows")
        base, cpu, wall = measured(lambda: compare(plain, spec, store / "plain.jsonl"))
        print(f"{'plain compare (baseline, in process)':38} {cpu:7.2f} {wall:7.2f}  "
              f"{len(base.rows)} rows of {len(base.evaluated)} combinations")
        here, cpu, wall = measured(lambda: compare(rate, spec, store / "here.jsonl"))
        meeting = sum(1 for r in here.rows if r.serving and r.serving["meets"])
        print(f"{'--rate in this process (default)':38} {cpu:7.2f} {wall:7.2f}  "
              f"{len(here.rows)} rows, {meeting} meeting the targets")
        for workers in counts:
            on_dask, cpu, wall = measured(lambda w=workers: compare(
                rate, spec, store / f"w{w}.jsonl", workers=w))
            same = "same" if rows(on_dask) == rows(here) else "DIFFERENT"
            print(f"{f'--rate --workers {workers} (Dask, start-up in)':38} {cpu:7.2f} "
                  f"{wall:7.2f}  {same}")
        again, cpu, wall = measured(lambda: compare(rate, spec, store / "here.jsonl"))
        print(f"{'--rate rerun, all read back':38} {cpu:7.2f} {wall:7.2f}  "
              f"({again.reused} reused, {len(again.evaluated)} estimated)")


if __name__ == "__main__":
    main()
