"""The streaming estimate: Eq. 1 on Table 1, the cycle model against Table 1 (its one
calibration source), throughput from the slowest kernel, padding, and the Versal estimate
of seeds/000 §9.3 by hand."""

import json

import pytest

from archipelago.api import make_plan
from archipelago.strategies.galapagos import hls_stream
from archipelago.strategies.galapagos.estimate import EncoderTiming, encoder_timing, estimate_stream
from benchmarks.bench_galapagos import TABLE_1, fit_kernel_latency
from tests.cli_here import archi_here

# seeds/000 Table 2: whole-model latency in ms, Eq. 1 with L = 12 (it leaves d out).
TABLE_2_MS = {1: 0.416, 2: 0.630, 4: 0.837, 8: 1.053, 16: 1.461, 32: 2.269, 64: 3.910,
              128: 7.193}


@pytest.fixture(scope="module")
def plan():
    return make_plan("ibert-base", "72xsidewinder", "galapagos")


def test_equation_1_on_table_1(plan) -> None:
    """T + (L - 1)(X + d) with Table 1's cycles at 200 MHz gives Table 2, plus 11 d."""
    for m, (x, t, _) in TABLE_1.items():
        est = estimate_stream(plan, m)
        whole = est.whole_model_s(EncoderTiming(m, x, t, 1.0, ""))
        assert whole - 11 * 1.1e-6 == pytest.approx(TABLE_2_MS[m] * 1e-3, abs=0.6e-6)


def test_cycle_model_against_table_1(plan) -> None:
    """Within 8% (X) and 5% (T) from 16 tokens, within 11% from 2 tokens; I within 5%
    from 32 tokens; the calibrated constant is the least-squares optimum."""
    for m, (x, t, i) in TABLE_1.items():
        if m == 1:
            continue  # the one row the constant misses (+43%, see KERNEL_LATENCY_CYCLES)
        e = encoder_timing(plan, m)
        x_tol, t_tol = (0.08, 0.05) if m >= 16 else (0.12, 0.12)
        assert e.first_output == pytest.approx(x, rel=x_tol)
        assert e.last_output == pytest.approx(t, rel=t_tol)
        if m >= 32:
            assert e.interval == pytest.approx(i, rel=0.05)
    assert fit_kernel_latency(plan) == hls_stream.KERNEL_LATENCY_CYCLES


def test_throughput_is_set_by_the_slowest_kernel(plan) -> None:
    est = estimate_stream(plan, 128)
    engine = plan.engine
    slowest = max(engine.row_cycles(plan.designs[n], 128) for n in plan.layer_kernels(0)
                  if n in plan.designs)
    assert est.throughput_per_s == pytest.approx(engine.config.clock_hz / (128 * slowest))
    slower = make_plan("ibert-base", "144xsidewinder", "galapagos", {"row_interval": 1536})
    assert estimate_stream(slower, 128).throughput_per_s == pytest.approx(
        est.throughput_per_s / 2, rel=0.05)


def test_no_padding_pays_off_for_short_sequences(plan) -> None:
    short, full = estimate_stream(plan, 38), estimate_stream(plan, 128)
    assert short.latency_s < short.whole_model_s(short.padded) == pytest.approx(full.latency_s)
    assert short.throughput_per_s > full.throughput_per_s
    latencies = [estimate_stream(plan, m).latency_s for m in (1, 8, 38, 64, 128)]
    assert latencies == sorted(latencies)


def test_sequences_longer_than_the_build_are_infeasible(plan) -> None:
    est = estimate_stream(plan, 200)
    assert not est.feasible and "max_seq_len" in est.reasons[0]


def test_versal_estimate_by_hand() -> None:
    """§9.3: 24 AIEs for each 768 x 768 Linear (768 x 32 int8 slices in 32 KB), 12 per
    attention kernel, 96 per FFN Linear: 312; at 64 MACs per cycle and 1 GHz the Linears
    take 128 x 768 x 32 / 64 = 49,152 cycles = 49 us, the attention products 16 us."""
    versal = make_plan("ibert-base", "12xvck190", "galapagos")
    assert versal.fpgas_needed == 12 and len(versal.clusters) == 12
    aies = {versal.compute[n].role: versal.designs[n].resources.aie
            for n in versal.layer_kernels(0) if n in versal.compute}
    assert aies == {"q": 24, "k": 24, "v": 24, "score": 12, "context": 12, "attn_out": 24,
                    "ln1": 0, "ffn_up": 96, "ffn_down": 96, "ln2": 0}
    assert sum(aies.values()) == 312
    seconds = {versal.compute[n].role: versal.engine.aie_seconds(versal.designs[n], 128)
               for n in versal.layer_kernels(0) if versal.designs.get(n) is not None
               and versal.designs[n].resources.aie}
    assert seconds["q"] == seconds["ffn_up"] == seconds["ffn_down"] == 49_152e-9
    assert seconds["score"] == seconds["context"] == 16_384e-9
    est = estimate_stream(versal, 128)
    assert est.feasible and est.latency_s < estimate_stream(make_plan(
        "ibert-base", "72xsidewinder", "galapagos"), 128).latency_s / 4


def test_cli_plan_json_and_seq_len_errors() -> None:
    args = ["plan", "ibert-base", "--cluster", "72xsidewinder", "--strategy", "galapagos",
            "--seq-len", "128", "--json"]
    out = archi_here(*args)  # in this process: no interpreter start-up per run
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    for key in ("latency_s", "encoder_latency_s", "first_output_s", "packet_interval_s",
                "throughput_per_s", "kernels", "clusters", "devices", "padded", "feasible"):
        assert key in data
    assert (data["kernels"], data["clusters"], len(data["devices"])) == (468, 12, 72)
    assert {"dsp", "bram", "uram"} <= set(data["devices"][0])
    bad = archi_here(*args[:2], "--strategy", "dfx", "--seq-len", "38")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    assert "--seq-len applies to encoder strategies" in bad.stderr
