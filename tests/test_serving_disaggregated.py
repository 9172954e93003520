"""Prefill and decode on separate pools (issue 35 point 1, serving/disaggregated.py):
a hand-traced case with a known link, the KV cache's bytes by hand, the pair against one
colocated pool, and `archi serve --prefill-cluster` end to end."""

import json

import numpy as np
import pytest

from archipelago.hardware.link import Link
from archipelago.models.zoo import resolve_model
from archipelago.serving.disaggregated import kv_bytes, simulate_disaggregated
from archipelago.serving.metrics import latencies
from archipelago.serving.replica import Policy
from archipelago.serving.requests import Lengths, Requests, generate
from archipelago.serving.simulate import simulate
from tests.cli_here import archi_here as archi
from tests.serving_tables import linear_table

# prefill(1, L) = 0.1 + 0.001 L (an iteration of prompts sums theirs); a decode step
# 0.2 + 0.05 (B - 1), whatever the context.
PREFILL = dict(prefill_base=0.1, prefill_per_token=0.001, decode_base=0.0,
               decode_per_sequence=0.0, decode_per_context=0.0)
DECODE = dict(prefill_base=0.1, prefill_per_token=0.0, decode_base=0.2,
              decode_per_sequence=0.05, decode_per_context=0.0)
# 1 GB/s and 10 ms: a cache of L x 1 MB crosses in 0.01 + L / 1000 s.
LINK = Link(latency_s=0.01, bandwidth_Bps=1e9)


def _three() -> Requests:
    return Requests(np.array([0.0, 0.0, 0.3]), np.array([100, 200, 100]), np.array([3, 2, 4]))


def test_three_requests_by_hand() -> None:
    """By hand (t in seconds):
    prefill  0     R0 and R1 together: 0.2 + 0.3              -> both first tokens 0.5
             0.5   R2 (arrived 0.3): 0.2                        -> first token 0.7
    link     R0 0.5 -> 0.5 + 0.01 + 0.1 = 0.61; R1 waits for it: 0.61 + 0.21 = 0.82;
             R2 (ready 0.7) waits for R1: 0.82 + 0.11 = 0.93
    decode   0.61  R0 alone, 2 steps of 0.2: 0.81, 1.01; R1 (0.82) and R2 (0.93) arrive
                   during the second step                      -> R0 done 1.01
             1.01  R1, R2 together: 0.25                        -> R1 done 1.26
             1.26  R2 alone, 2 more steps: 1.46, 1.66           -> R2 done 1.66"""
    out = simulate_disaggregated(linear_table(**PREFILL), linear_table(**DECODE), _three(),
                                 1.0, Policy("continuous", 4), LINK,
                                 _three().prompt * 1e6)
    r = out.records
    assert np.allclose(r.start, [0.0, 0.0, 0.5], rtol=0, atol=1e-12)
    assert np.allclose(r.first, [0.5, 0.5, 0.7], rtol=0, atol=1e-12)
    assert np.allclose(r.finish, [1.01, 1.26, 1.66], rtol=0, atol=1e-12)
    assert np.allclose(out.transfer_s, [0.11, 0.21, 0.11], rtol=0, atol=1e-12)
    assert np.allclose(out.busy_s, [0.7, 0.4 + 0.25 + 0.4], rtol=0, atol=1e-12)
    assert out.link_busy_s == pytest.approx([0.43])
    lat = latencies(out)
    assert np.allclose(lat["ttft_s"], [0.5, 0.5, 0.4])
    assert np.allclose(lat["tpot_s"], [0.51 / 2, 0.76, 0.96 / 3])  # the transfer counted


def test_decode_pool_memory_bounds_admission() -> None:
    """The same trace with 305 tokens of KV cache on the decode pool: R1 (202) and R2 (104)
    no longer fit together, so R2 waits for R1 (done 1.21), then 3 steps alone: 1.81."""
    out = simulate_disaggregated(linear_table(**PREFILL), linear_table(**DECODE,
                                                                       kv_tokens=305),
                                 _three(), 1.0, Policy("continuous", 4), LINK,
                                 _three().prompt * 1e6)
    assert np.allclose(out.records.finish, [1.01, 1.21, 1.81], rtol=0, atol=1e-12)


def test_each_prefill_replica_sends_over_its_own_link() -> None:
    """Two 100-token prompts at 0, one decode step each. On two prefill replicas: each
    prefilled in 0.2 s, each cache over its replica's link by 0.31, one decode step of
    both (0.25): done 0.56. On one: one iteration (0.4), one link (0.51, then 0.62), R0's
    step 0.51..0.71, R1's after it: 0.91."""
    reqs = Requests(np.array([0.0, 0.0]), np.array([100, 100]), np.array([2, 2]))
    for replicas, finish in ((2, [0.56, 0.56]), (1, [0.71, 0.91])):
        out = simulate_disaggregated(linear_table(**PREFILL), linear_table(**DECODE), reqs,
                                     1.0, Policy("continuous", 4), LINK, reqs.prompt * 1e6,
                                     prefill_replicas=replicas)
        assert np.allclose(out.records.finish, finish, rtol=0, atol=1e-12)
        assert np.allclose(out.link_busy_s, [0.22 / replicas] * replicas)
        assert len(out.busy_s) == replicas + 1


def test_a_one_token_answer_moves_nothing() -> None:
    reqs = Requests(np.array([0.0]), np.array([100]), np.array([1]))
    out = simulate_disaggregated(linear_table(**PREFILL), linear_table(**DECODE), reqs, 1.0,
                                 Policy("continuous", 4), LINK, np.array([1e8]))
    assert out.records.finish[0] == pytest.approx(0.2)
    assert np.isnan(out.transfer_s[0]) and out.link_busy_s[0] == 0
    assert out.busy_s[1] == 0


def test_kv_bytes_of_llama2_7b_by_hand() -> None:
    """32 layers x 2 (K, V) x 32 KV heads x 128 head dim x 2 bytes x 512 tokens."""
    spec = resolve_model("llama2-7b")
    assert kv_bytes(spec, np.array([512, 1]), 2.0).tolist() == [
        32 * 2 * 32 * 128 * 2 * 512, 32 * 2 * 32 * 128 * 2]


def test_pair_serves_at_least_what_one_colocated_pool_does() -> None:
    """Overloaded (20 requests a second on a pool that serves a few), with a link that
    costs nothing and both pools the colocated plan: the colocated replica runs every
    prompt and every decode step on one clock, a decode step's time paid again inside each
    iteration that carries prompts; the pair runs the same prompts on one replica and the
    decode steps on another, so its span is shorter and its throughput at least as high,
    and each of its pools is busy for no longer than the colocated replica."""
    table = linear_table(prefill_base=0.05, prefill_per_token=0.0005, decode_base=0.02,
                         decode_per_sequence=0.002, decode_per_context=1e-5, max_batch=16)
    reqs = generate("poisson", 300, Lengths("fixed", 300), Lengths("fixed", 30), 5, 4096)
    instant = Link(latency_s=0.0, bandwidth_Bps=1e300)
    alone = simulate(table, reqs, 20.0, Policy("continuous", 16))
    pair = simulate_disaggregated(table, table, reqs, 20.0, Policy("continuous", 16),
                                  instant, np.ones(len(reqs)))
    span = [o.records.finish.max() - o.arrivals.min() for o in (alone, pair)]
    assert span[1] < span[0]
    assert max(pair.busy_s) <= alone.busy_s[0]
    # TTFT is the prefill pool's alone: the same requests served with one-token answers
    prompts = simulate(table, Requests(reqs.unit_arrivals, reqs.prompt,
                                       np.ones_like(reqs.output)), 20.0,
                       Policy("continuous", 16))
    assert np.array_equal(pair.records.first, prompts.records.first)


ARGS = ("serve", "llama2-7b", "--cluster", "8xu280", "--strategy", "lora-q", "--rate", "2",
        "--requests", "100", "--json")


def _json(*args: str) -> dict:
    run = archi(*args)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def test_archi_serve_gpu_prefill_fpga_decode() -> None:
    """H100 prefill, 8 x U280 (lora-q) decode: the cache crosses in the narrower format
    (lora-q's W8A8 keeps int8 keys and values: 1 byte), 32 x 2 x 32 x 128 x 512 bytes over
    100 GbE (12.5 GB/s, 300 ns); the capital is the two pools' (each run alone) added."""
    pair = _json(*ARGS, "--prefill-cluster", "1xh100", "--prefill-strategy", "gpu-graph")
    link = pair["kv_link"]
    nbytes = 32 * 2 * 32 * 128 * 1 * 512
    assert link["name"] == "eth-100g" and link["bytes_mean"] == nbytes
    assert link["transfer_s"]["max"] == pytest.approx(300e-9 + nbytes / 12.5e9)
    assert pair["pools"]["prefill"]["strategy"] == "gpu-graph"
    assert len(pair["busy_share"]) == 2
    fpga = _json(*ARGS)
    gpu = _json(*ARGS[:3], "1xh100", "--strategy", "gpu-graph", *ARGS[6:])
    assert pair["cost"]["capital_usd"] == pytest.approx(
        fpga["cost"]["capital_usd"] + gpu["cost"]["capital_usd"])
    pcie = _json(*ARGS, "--prefill-cluster", "1xh100", "--prefill-strategy", "gpu-graph",
                 "--kv-link", "pcie4-x16")
    assert pcie["kv_link"]["transfer_s"]["max"] == pytest.approx(
        1e-6 + nbytes / (256e9 * 128 / 130 / 8))


@pytest.mark.parametrize("extra, says", [
    (("--prefill-cluster", "1xh100", "--kv-link", "warp"), "--kv-link: unknown link 'warp'"),
    (("--kv-link", "eth-100g"), "--kv-link: needs --prefill-cluster"),
    (("--prefill-replicas", "2"), "--prefill-replicas: needs --prefill-cluster"),
    (("--prefill-cluster", "1xu50", "--prefill-strategy", "lora-f"),
     "--prefill-cluster 1xu50: lora-f plan: cannot serve"),
    (("--prefill-cluster", "1xh100", "--prefill-replicas", "0"), "--prefill-replicas"),
    (("--prefill-cluster", "1xh100"), "--prefill-cluster 1xh100: "),
    (("--prefill-cluster", "1xh100", "--report", "p.html"), "--report: the page draws one")])
def test_archi_serve_prefill_pool_refusals(extra: tuple[str, ...], says: str) -> None:
    run = archi(*ARGS, *extra)
    assert run.returncode == 2, run.stdout + run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], run.stderr


def test_a_staged_decode_pool_keeps_micro_batches_in_flight() -> None:
    """A decode pool of two stages of 10 ms a step (any batch), at most one sequence a
    micro-batch. Two requests (3 tokens out: 2 decode steps each) are prefilled in 0.1 s on
    a prefill replica each, and their 1 MB caches cross each replica's own link in 0.011 s:
    both reach the decode pool at 0.111 s. By hand, from 0.111:
    pipelined (two micro-batches)  R0 in mb 0, R1 in mb 1; steps of 10 ms: mb 0 leaves
        the stages at +20 and +40 ms (R0 done 0.151), mb 1 at +30 and +50 (R1 done 0.161).
    one stage of 20 ms (the stages' sum, as before)  R0 steps at +20, +40 (0.151); R1,
        waiting for room, at +60, +80 (0.191)."""
    from dataclasses import replace

    from tests.test_serving_pipeline import _const, _pipeline

    staged = _pipeline([_const(0.01, 0.01)] * 2)
    reqs = Requests(np.array([0.0, 0.0]), np.array([100, 100]), np.array([3, 3]))
    prefill = _const(0.1, 0.0)
    pipelined, serial = (
        simulate_disaggregated(prefill, decode, reqs, 1.0, Policy("continuous", 1), LINK,
                               np.full(2, 1e6), prefill_replicas=2)
        for decode in (staged, replace(staged, stages=(), _rows={})))
    assert np.allclose(pipelined.records.first, [0.1, 0.1], rtol=0, atol=1e-12)
    assert np.allclose(pipelined.records.finish, [0.151, 0.161], rtol=0, atol=1e-12)
    assert np.allclose(serial.records.finish, [0.151, 0.191], rtol=0, atol=1e-12)


def test_a_staged_decode_pool_reports_the_micro_batches_it_runs() -> None:
    """The decode pool batches continuously whatever the prefill pool's policy, so under
    `--policy static` a decode plan of four stages still keeps four micro-batches in
    flight, and the JSON says so (it said 1, the static policy's)."""
    out = _json("serve", "llama2-7b", "--cluster", "4x8xv80", "--strategy", "lora-q",
                "--split", "tp=8,pp=4", "--rate", "2", "--requests", "100",
                "--prefill-cluster", "1xh100", "--prefill-strategy", "gpu-graph",
                "--policy", "static", "--json")
    assert (out["policy"], out["stages"], out["micro_batches"]) == ("static", 4, 4)
