"""Every predicted figure the issue notes ask for, from one command (no held-out data is
read; these are predictions to be checked against the papers' measurements).

    python -m benchmarks.predictions [--trials 300]

Issue #2: DFX tokens/s for gpt2-345m on 1, 2, 4 U280 and gpt2-1.5b on 4 at 64:64, and
gpt2-345m latency at 32:256 on one U280. Issue #4: dfx, lora-f and lora-q for gpt2-345m at
32:256 on one U280 (default engines and the best found by the NSGA-II search), their
DSP/BRAM/URAM, and the 1 -> 2 -> 4 U280 speedups at 64:64 with the engine re-searched
for each deployment, as LORA does (seeds/002 §V-D). Issue #9: each figure beside the one
printed before issue #9 (`predictions_before_issue9.json`), the share of time per part for
gpt2-1.5b on 4 U280, and prefill vs decode time (and GFLOPS) per token.
"""

import argparse
import json
from pathlib import Path

from archipelago.api import make_plan
from archipelago.estimate.workload import Generation
from archipelago.explore.search import SearchRequest, run_search
from archipelago.models.graph import decode, prefill
from archipelago.strategies.tensor_parallel.estimate import Estimate, estimate_generation

BEFORE = json.loads((Path(__file__).with_name("predictions_before_issue9.json")).read_text())


def estimate(model: str, cluster: str, strategy: str, work: Generation,
             engine: dict | None = None) -> Estimate:
    return estimate_generation(make_plan(model, cluster, strategy, engine), work)


def searched(model: str, cluster: str, strategy: str, work: Generation, trials: int) -> dict:
    request = SearchRequest(model, cluster, strategy, work, trials, "", "predictions")
    return run_search(request).engine


def row(label: str, est: Estimate) -> str:
    dev = est.devices[0].total
    before = BEFORE["rows"].get(label)
    was = f"(before {before:7.2f}, {est.tokens_per_s / before - 1:+5.0%})" if before else ""
    return (f"{label:40} {est.latency_s * 1e3:8.2f} ms {est.tokens_per_s:7.2f} tok/s {was:23}"
            f" DSP {dev.dsp:5d} BRAM {dev.bram:5d} URAM {dev.uram:4d}")


def shares(label: str, est: Estimate) -> str:
    total = sum(est.breakdown_s.values())
    parts = "  ".join(f"{k} {v / total:5.1%}" for k, v in est.breakdown_s.items())
    return f"{label:26} {parts}"


def per_token(model: str, cluster: str, strategy: str, work: Generation) -> str:
    """Prefill and decode time per token, and the GFLOPS each stage sustains."""
    plan = make_plan(model, cluster, strategy)
    est = estimate_generation(plan, work)
    n_in, n_out = work.input_tokens, work.output_tokens
    decode_s = est.latency_s - est.prefill_s
    decode_flops = sum(plan.graph.flops(decode(n_in + i)) for i in range(1, n_out))
    prefill_gflops = plan.graph.flops(prefill(n_in)) / est.prefill_s / 1e9
    return (f"{strategy:7} {model} {cluster} {n_in}:{n_out}"
            f"  prefill {est.prefill_s / n_in * 1e3:6.3f} ms/token ({prefill_gflops:6.1f} GFLOPS)"
            f"  decode {est.decode_s_per_token * 1e3:6.3f} ms/token"
            f" ({decode_flops / decode_s / 1e9:6.1f} GFLOPS)"
            f"  ratio {est.prefill_s / n_in / est.decode_s_per_token:4.2f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=300)
    trials = parser.parse_args().trials
    w64, w32 = Generation(64, 64), Generation(32, 256)

    print("== issue #2: DFX (calibrated on gpt2-345m 1xU280 64:64 = 93.1 tok/s)")
    for model, n in (("gpt2-345m", 1), ("gpt2-345m", 2), ("gpt2-345m", 4), ("gpt2-1.5b", 4)):
        print(row(f"dfx {model} {n}xu280 64:64", estimate(model, f"{n}xu280", "dfx", w64)))
    print(row("dfx gpt2-345m 1xu280 32:256", estimate("gpt2-345m", "1xu280", "dfx", w32)))

    print(f"\n== issue #4: gpt2-345m 1xU280 32:256 (search: {trials} NSGA-II trials)")
    for strategy in ("dfx", "lora-f", "lora-q"):
        print(row(f"{strategy} default gpt2-345m 1xu280 32:256",
                  estimate("gpt2-345m", "1xu280", strategy, w32)))
        best = searched("gpt2-345m", "1xu280", strategy, w32, trials)
        print(row(f"{strategy} searched gpt2-345m 1xu280 32:256",
                  estimate("gpt2-345m", "1xu280", strategy, w32, best)))
        print(f"{'':40} {best}")

    print("\n== issue #4: gpt2-345m 64:64 scaling, engine searched per deployment")
    for strategy in ("lora-f", "lora-q", "dfx"):
        rates = []
        for n in (1, 2, 4):
            best = searched("gpt2-345m", f"{n}xu280", strategy, w64, trials)
            rates.append(estimate("gpt2-345m", f"{n}xu280", strategy, w64, best).tokens_per_s)
        was = BEFORE["scaling"][strategy]
        print(f"{strategy:8} tokens/s 1/2/4: " + " / ".join(f"{r:.1f}" for r in rates)
              + f"   speedup 2x: {rates[1] / rates[0]:.2f}  4x: {rates[2] / rates[0]:.2f}"
              + f"   (before: {' / '.join(f'{r:.1f}' for r in was)};"
              + f" {was[1] / was[0]:.2f}, {was[2] / was[0]:.2f})")
    dfx_default = [estimate("gpt2-345m", f"{n}xu280", "dfx", w64).tokens_per_s for n in (1, 2, 4)]
    print("dfx, published engine (d = 64, l = 16): speedup"
          f" 2x: {dfx_default[1] / dfx_default[0]:.2f}  4x: {dfx_default[2] / dfx_default[0]:.2f}")

    print("\n== issue #9: share of time per part, gpt2-1.5b on 4 U280, 64:64, default engines")
    for strategy in ("dfx", "lora-f", "lora-q"):
        print(shares(f"{strategy} gpt2-1.5b 4xu280", estimate("gpt2-1.5b", "4xu280", strategy,
                                                               w64)))

    print("\n== issue #9: prefill vs decode per token, default engines")
    for strategy, model, cluster, work in (("dfx", "gpt2-345m", "1xu280", w64),
                                           ("dfx", "gpt2-1.5b", "4xu280", w64),
                                           ("lora-f", "gpt2-345m", "1xu280", w64),
                                           ("lora-q", "gpt2-345m", "1xu280", w64)):
        print(per_token(model, cluster, strategy, work))


if __name__ == "__main__":
    main()
