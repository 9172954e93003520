"""Tokens/s of emulating gpt2-345m with its DFX plan on 1, 2 and 4 rank processes, against
single-process transformers generate() with the same weights, same machine, same run.
Figures, not a pass/fail test: this measures the emulator on CPUs, not an FPGA cluster.

    python -m benchmarks.bench_emulate [--tokens 16:16] [--ranks 1,2,4] [--model gpt2-345m]

Both sides are timed from the first prompt token to the last generated token with the
weights already loaded. transformers' figure is the better of two generate() calls; a rank
generates once, so its figure also carries first-call costs. The machine's other load shows
up in both: compare the ratios of one run, not figures across runs.
"""

import argparse
import tempfile
import time
from pathlib import Path

from archipelago.api import emulate
from archipelago.estimate.workload import parse_tokens
from archipelago.models.zoo import resolve_model
from archipelago.strategies.tensor_parallel.emulate.rank import prompt_ids
from archipelago.strategies.tensor_parallel.emulate.reference import (
    greedy_generate,
    load_model,
    save_seeded_checkpoint,
)

SEED = 0


def transformers_tokens_per_s(weights: Path, model: str, tokens: str) -> float:
    """Tokens/s of the better of two generate() calls on freshly loaded weights."""
    work = parse_tokens(tokens)
    prompt = prompt_ids(resolve_model(model), work.input_tokens, SEED)
    hf = load_model(weights)
    rates = []
    for _ in range(2):
        start = time.perf_counter()
        greedy_generate(hf, prompt, work.output_tokens)
        rates.append(work.output_tokens / (time.perf_counter() - start))
    return max(rates)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="gpt2-345m")
    parser.add_argument("--tokens", default="16:16", help="IN:OUT prompt and generated tokens")
    parser.add_argument("--ranks", default="1,2,4", help="comma-separated rank counts")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-emulate-") as tmp:
        weights = save_seeded_checkpoint(resolve_model(args.model), SEED, Path(tmp) / "weights")
        base = transformers_tokens_per_s(weights, args.model, args.tokens)
        print(f"{args.model} {args.tokens}, random weights (seed {SEED}), fp32 on this CPU\n")
        print(f"{'run':28} {'tokens/s':>9} {'vs transformers':>16} {'tokens match':>13} "
              f"{'max |dlogit|':>13} {'MiB per rank':>13}")
        print(f"{'transformers generate()':28} {base:9.2f} {1.0:15.2f}x")
        for ranks in map(int, args.ranks.split(",")):
            report = emulate(args.model, f"{ranks}xu280", "dfx",
                             {"tokens": args.tokens, "checkpoint": str(weights)}, seed=SEED)
            rate = report["tokens_per_s"]
            print(f"{f'emulated, {ranks} rank processes':28} {rate:9.2f} {rate / base:15.2f}x "
                  f"{report['tokens_match']!s:>13} {report['max_abs_logit_diff']:13.2e} "
                  f"{report['bytes_per_rank'][0] / 2**20:13.1f}")


if __name__ == "__main__":
    main()
