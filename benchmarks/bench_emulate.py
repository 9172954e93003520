"""Wall time and tokens/s of emulating gpt2-345m with its DFX plan on 1, 2 and 4 rank
processes, against single-process transformers with the same weights, same machine, same run.
Figures, not a pass/fail test: this measures the emulator on CPUs, not an FPGA cluster.

    python -m benchmarks.bench_emulate [--tokens 16:16] [--ranks 1,2,4] [--repeats 3]

Wall time (issue 36 point 4): one `emulate()` call, from the request to the checked report
(rank processes started, shards loaded, tokens generated, the transformers reference run and
compared), against one-process transformers loading the same checkpoint and generating the
same tokens at its fastest torch thread count. The cases are interleaved, each repeat timing
the baseline and then every rank count, and each ratio is taken within its repeat; the
medians are printed, since the machine's other load moves both sides. Targets: at most
1.5x on 2 ranks and 2x on 4 (issue 36 measured 2.2x on 4 ranks before).

Tokens/s: both sides timed from the first prompt token to the last generated token with the
weights already loaded. transformers' figure is the better of two generate() calls; a rank
generates once, so its figure also carries first-call costs.
"""

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import torch

from archipelago.api import emulate
from archipelago.estimate.workload import parse_tokens
from archipelago.models.zoo import resolve_model
from archipelago.strategies.tensor_parallel.emulate.rank import prompt_ids
from archipelago.strategies.tensor_parallel.emulate.reference import (
    greedy_generate,
    load_model,
    save_seeded_checkpoint,
)
from benchmarks import gloo_floor

SEED = 0
TARGETS = {2: 1.5, 4: 2.0}  # issue 36, "Speed targets": wall time vs one-process transformers
# The same ratios at commit e398450, before issue 36 point 4's second round, `--tokens 8:8
# --ranks 2,4 --repeats 2` on this project's 2-core machine while quiet (3.7 s on 2 ranks,
# 5.3 s on 4, transformers 0.9 s; issue 36's "2.2x on 4 ranks" was against a baseline at a
# slower thread count, see bench_emulate's history).
BEFORE = {2: 4.1, 4: 5.8}


def best_transformers_run(weights: Path, model: str, tokens: str) -> tuple[float, float]:
    """transformers_run at its fastest torch thread count, 1 to all cores: on a loaded
    machine one thread can beat all (measured 1.7 s against 6.5 s on 2 busy cores, its
    threads spinning at barriers), and the baseline is the best transformers can do."""
    previous = torch.get_num_threads()
    try:
        runs = []
        for threads in range(1, (os.cpu_count() or 1) + 1):
            torch.set_num_threads(threads)
            runs.append(transformers_run(weights, model, tokens))
    finally:
        torch.set_num_threads(previous)
    return min(runs)


def transformers_run(weights: Path, model: str, tokens: str) -> tuple[float, float]:
    """One-process transformers: the wall seconds of loading `weights` and generating, and
    the tokens/s of the better of two generate() calls on them."""
    work = parse_tokens(tokens)
    prompt = prompt_ids(resolve_model(model), work.input_tokens, SEED)
    start = time.perf_counter()
    hf = load_model(weights)
    loaded = time.perf_counter()
    seconds = []
    for _ in range(2):
        begin = time.perf_counter()
        greedy_generate(hf, prompt, work.output_tokens)
        seconds.append(time.perf_counter() - begin)
    wall = loaded - start + seconds[0]  # what a one-process run waits for: load, generate
    rates = [work.output_tokens / s for s in seconds]
    return wall, max(rates)


def emulation_run(weights: Path, model: str, tokens: str, ranks: int
                  ) -> tuple[float, dict]:
    """The wall seconds of one emulate() call on `ranks` rank processes, and its report."""
    start = time.perf_counter()
    report = emulate(model, f"{ranks}xu280", "dfx",
                     {"tokens": tokens, "checkpoint": str(weights)}, seed=SEED)
    return time.perf_counter() - start, report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="gpt2-345m")
    parser.add_argument("--tokens", default="16:16", help="IN:OUT prompt and generated tokens")
    parser.add_argument("--ranks", default="1,2,4", help="comma-separated rank counts")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved repeats (median)")
    args = parser.parse_args()
    counts = [int(r) for r in args.ranks.split(",")]
    walls: dict[str, list[float]] = {}
    ratios: dict[int, list[float]] = {r: [] for r in counts}
    rates: dict[str, list[float]] = {}
    reports: dict[int, dict] = {}
    generating: dict[int, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-emulate-") as tmp:
        weights = save_seeded_checkpoint(resolve_model(args.model), SEED, Path(tmp) / "weights")
        for _ in range(args.repeats):
            base, rate = best_transformers_run(weights, args.model, args.tokens)
            walls.setdefault("base", []).append(base)
            rates.setdefault("base", []).append(rate)
            for ranks in counts:
                wall, reports[ranks] = emulation_run(weights, args.model, args.tokens, ranks)
                walls.setdefault(f"{ranks}", []).append(wall)
                ratios[ranks].append(wall / base)
                rates.setdefault(f"{ranks}", []).append(reports[ranks]["tokens_per_s"])
                generating.setdefault(ranks, []).append(reports[ranks]["seconds"])
    hidden = resolve_model(args.model).hidden
    floors = {r: [gloo_floor.in_subprocess(r, sum(reports[r]["collectives"].values()),
                                           hidden // r, way) for way in gloo_floor.TRANSPORTS]
              for r in counts if r > 1}
    med = statistics.median
    print(f"{args.model} {args.tokens}, random weights (seed {SEED}), fp32 on this CPU; "
          f"medians of {args.repeats} interleaved repeats\n")
    print(f"{'run':28} {'wall s':>7} {'wall vs tf':>10} {'before':>7} {'target':>7} "
          f"{'tokens/s':>9} "
          f"{'tokens match':>13} {'max |dlogit|':>13} {'MiB per rank':>13}")
    print(f"{'transformers, one process':28} {med(walls['base']):7.1f} {1.0:9.2f}x {'':>7} "
          f"{'':>7} {med(rates['base']):9.2f}")
    for ranks in counts:
        report = reports[ranks]
        target = f"{TARGETS[ranks]:.1f}x" if ranks in TARGETS else ""
        before = f"{BEFORE[ranks]:.1f}x" if ranks in BEFORE else ""
        print(f"{f'emulated, {ranks} rank processes':28} {med(walls[str(ranks)]):7.1f} "
              f"{med(ratios[ranks]):9.2f}x {before:>7} {target:>7} {med(rates[str(ranks)]):9.2f} "
              f"{report['tokens_match']!s:>13} {report['max_abs_logit_diff']:13.2e} "
              f"{report['bytes_per_rank'][0] / 2**20:13.1f}")
    print("\nwhere an emulation's wall time goes: its ranks generating (prompt to last token, "
          "the slowest rank), and the same collectives run alone (gloo_floor: as many "
          "all-gathers of one token's slice, no compute, over gloo on loopback as torchrun's "
          "ranks run them and over shared memory as the launcher's do; the rest is start-up, "
          "shards and the check against transformers)")
    for ranks in counts:
        floor = ("gloo {:.2f} s, shared memory {:.2f} s".format(*floors[ranks])
                 if ranks in floors else "")
        print(f"{f'{ranks} rank processes':28} generating {med(generating[ranks]):6.1f} s, "
              f"collectives alone: {floor}; transformers' whole run {med(walls['base']):.1f} s")


if __name__ == "__main__":
    main()
