"""Galapagos figures for issue #5: the cycle model against seeds/000 Table 1, the predicted
latency and throughput of the 72-Sidewinder deployment, the Versal VCK190 estimate, and
how fast a GPT-3-sized encoder stack builds into clusters of clusters. Prints figures;
nothing here is a pass/fail test.

    python -m benchmarks.bench_galapagos               # everything below but the fit
    python -m benchmarks.bench_galapagos --calibrate   # refit KERNEL_LATENCY_CYCLES
"""

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from archipelago.api import make_plan
from archipelago.errors import ArchipelagoError
from archipelago.strategies.galapagos import hls_stream
from archipelago.strategies.galapagos.emit import write_build
from archipelago.strategies.galapagos.estimate import encoder_timing, estimate_stream
from archipelago.strategies.galapagos.plan import DataflowPlan

# seeds/000 Table 1: one I-BERT encoder on six Sidewinders, cycles per sequence length:
# first output X, last output T, packet interval I. The only data the model is fitted to.
TABLE_1: dict[int, tuple[int, int, int]] = {
    1: (6936, 6936, 0), 2: (10455, 11004, 275), 4: (13769, 15869, 525),
    8: (17122, 22318, 650), 16: (23393, 34781, 712), 32: (35828, 59600, 743),
    64: (61121, 109660, 759), 128: (111708, 209789, 767),
}
GLUE_AVERAGE_SEQ_LEN = 38  # seeds/000 §8.2.2
# GPT-3 175B's shape (Brown et al., 2020, Table 2.1: 96 layers, d_model 12288, 96 heads,
# feed-forward 4 x d_model) as an integer-only encoder stack.
GPT3_ENCODER = {"model_type": "ibert", "num_hidden_layers": 96, "hidden_size": 12288,
                "num_attention_heads": 96, "intermediate_size": 4 * 12288, "vocab_size": 50257,
                "max_position_embeddings": 2050, "type_vocab_size": 1, "hidden_act": "gelu",
                "quant_mode": True, "pad_token_id": 1}


def paper_plan() -> DataflowPlan:
    return make_plan("ibert-base", "72xsidewinder", "galapagos")


def model_cycles(plan: DataflowPlan) -> np.ndarray:
    """(X, T) per Table 1 sequence length, as rows."""
    return np.array([[t.first_output, t.last_output]
                     for t in (encoder_timing(plan, m) for m in TABLE_1)])


def fit_kernel_latency(plan: DataflowPlan) -> int:
    """Least squares over Table 1's 16 X and T cycle counts: each kernel on a row's path
    adds the constant once, so X and T are (near) linear in it; fit, then check the
    integers around the optimum."""
    measured = np.array([[x, t] for x, t, _ in TABLE_1.values()], dtype=float)
    original = hls_stream.KERNEL_LATENCY_CYCLES

    def error(value: int) -> float:
        hls_stream.KERNEL_LATENCY_CYCLES = value
        return float(np.sum((model_cycles(plan) - measured) ** 2))

    try:
        hls_stream.KERNEL_LATENCY_CYCLES = 0
        base = model_cycles(plan)
        hls_stream.KERNEL_LATENCY_CYCLES = 1000
        slope = (model_cycles(plan) - base) / 1000
        guess = round(float(np.sum(slope * (measured - base)) / np.sum(slope * slope)))
        return min(range(guess - 5, guess + 6), key=error)
    finally:
        hls_stream.KERNEL_LATENCY_CYCLES = original


def print_table_1(plan: DataflowPlan) -> None:
    print(f"Table 1 vs model (KERNEL_LATENCY_CYCLES = {hls_stream.KERNEL_LATENCY_CYCLES})")
    print(f"{'M':>4} {'X':>8} {'model':>8} {'err':>7} {'T':>8} {'model':>8} {'err':>7} "
          f"{'I':>5} {'model':>6}")
    for m, (x, t, i) in TABLE_1.items():
        e = encoder_timing(plan, m)
        print(f"{m:4d} {x:8d} {e.first_output:8.0f} {e.first_output / x - 1:+7.1%} "
              f"{t:8d} {e.last_output:8.0f} {e.last_output / t - 1:+7.1%} {i:5d} "
              f"{e.interval:6.0f}")


def print_predictions(plan: DataflowPlan) -> None:
    print("\nibert-base on 72 Sidewinders (12 encoders x 6 FPGAs, d = 1.1 us)")
    for m in (GLUE_AVERAGE_SEQ_LEN, 128):
        est = estimate_stream(plan, m)
        print(f"  {m:3d} tokens: latency {est.latency_s * 1e3:6.3f} ms (padded to "
              f"{est.padded.seq_len}: {est.whole_model_s(est.padded) * 1e3:6.3f} ms), "
              f"throughput {est.throughput_per_s:8.1f}/s (padded "
              f"{est.clock_hz / est.padded.bottleneck:7.1f}/s), encoder T "
              f"{est.timing.last_output / est.clock_hz * 1e6:6.1f} us, X "
              f"{est.timing.first_output / est.clock_hz * 1e6:6.1f} us")
    versal = make_plan("ibert-base", "12xvck190", "galapagos")
    est = estimate_stream(versal, 128)
    aies = {n: versal.designs[n].resources.aie for n in versal.layer_kernels(0)
            if n in versal.designs and versal.designs[n].resources.aie}
    print("\nVersal: ibert-base on 12 VCK190 (one encoder each), 128 tokens")
    print(f"  AIEs per encoder {sum(aies.values())}: "
          + ", ".join(f"{n.split('.', 1)[1]} {a}" for n, a in aies.items()))
    for name in aies:
        seconds = versal.engine.aie_seconds(versal.designs[name], 128)
        print(f"  {name:22} AIE time {seconds * 1e6:6.1f} us")
    print(f"  encoder T {est.timing.last_output / est.clock_hz * 1e6:6.1f} us, X "
          f"{est.timing.first_output / est.clock_hz * 1e6:6.1f} us, whole model "
          f"{est.latency_s * 1e6:7.1f} us, throughput {est.throughput_per_s:8.1f}/s")


def _timed(work):
    start = time.perf_counter()
    result = work()
    return result, time.perf_counter() - start


def print_scale() -> None:
    print("\nScale: GPT-3-sized encoder stack (96 x 12288, 96 heads)")
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "gpt3-encoder" / "config.json"
        config.parent.mkdir()
        config.write_text(json.dumps(GPT3_ENCODER))
        for cluster in ("1xsidewinder", "1xu55c"):
            try:
                plan, seconds = _timed(lambda c=cluster: make_plan(str(config), c, "galapagos"))
            except ArchipelagoError as err:
                print(f"  {cluster}: {err}")
                continue
            print(f"  {cluster}: plan {seconds:5.2f} s: {plan.kernel_count:,} kernels in "
                  f"{len(plan.clusters)} clusters (largest "
                  f"{max(c.kernels for c in plan.clusters)}) on {plan.fpgas_needed:,} FPGAs")
            summary, seconds = _timed(lambda p=plan: write_build(p, Path(tmp) / "build"))
            print(f"  {cluster}: build files {seconds:5.2f} s ({len(summary['files'])} files)")
        config.write_text(json.dumps(dict(GPT3_ENCODER, num_hidden_layers=192)))
        try:
            _timed(lambda: make_plan(str(config), "1xu55c", "galapagos"))
        except ArchipelagoError as err:
            print(f"  192 layers on u55c: {err}")
    _, seconds = _timed(lambda: [estimate_stream(paper_plan(), 128) for _ in range(10)])
    print(f"  ibert-base 72xsidewinder plan + estimate: {seconds / 10 * 1e3:.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calibrate", action="store_true")
    args = parser.parse_args()
    plan = paper_plan()
    if args.calibrate:
        value = fit_kernel_latency(plan)
        print(f"KERNEL_LATENCY_CYCLES = {value}  "
              "(paste into archipelago/strategies/galapagos/hls_stream.py)")
        hls_stream.KERNEL_LATENCY_CYCLES = value
        print_table_1(plan)
        return
    print_table_1(plan)
    print_predictions(plan)
    print_scale()


if __name__ == "__main__":
    main()
