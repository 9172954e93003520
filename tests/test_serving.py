"""The serving simulator against queueing theory and hand-traced event times (issue 35
point 5): a batch-1 server of fixed service time under Poisson arrivals against the M/D/1
mean wait, continuous batching and chunked prefill on small cases traced by hand, the
routers on a hand case, capacity monotone in the replicas."""

import numpy as np
import pytest

from archipelago.errors import ArchipelagoError
from archipelago.serving.metrics import Targets, capacity, latencies, meets, summary
from archipelago.serving.replica import Policy
from archipelago.serving.requests import Lengths, Requests, generate, parse_lengths
from archipelago.serving.simulate import simulate
from tests.serving_tables import linear_table


def _requests(arrivals: list[float], prompt: list[int], output: list[int]) -> Requests:
    return Requests(np.array(arrivals, dtype=float), np.array(prompt), np.array(output))


def test_batch_one_server_waits_as_md1_predicts() -> None:
    """M/D/1, service S = 1 s, rho = 0.5: Pollaczek-Khinchine's mean wait
    Wq = rho S / (2 (1 - rho)) = 0.5 s. The simulated mean's standard error comes from batch
    means (50 batches of 1,000 consecutive requests, far longer than the queue's memory at
    rho = 0.5), and the mean must fall within four of them."""
    table = linear_table(1.0, 0.0, 0.0, 0.0, 0.0, max_batch=1)
    n, rho, service = 50_000, 0.5, 1.0
    reqs = generate("poisson", n, Lengths("fixed", 16), Lengths("fixed", 1), 7, 4096)
    out = simulate(table, reqs, rho / service, Policy("static", 1))
    wait = latencies(out)["queue_s"]
    assert np.allclose(out.records.finish - out.records.start, service)
    theory = rho * service / (2 * (1 - rho))
    error = wait.reshape(50, -1).mean(axis=1).std(ddof=1) / np.sqrt(50)
    assert error < 0.05 * theory  # the tolerance is tight enough to catch a wrong model
    assert abs(wait.mean() - theory) < 4 * error


# prefill(1, L) = 0.1 + 0.001 L; decode(B, c) = 0.010 + 0.005 (B - 1) + 1e-5 c
HAND = dict(prefill_base=0.1, prefill_per_token=0.001, decode_base=0.010,
            decode_per_sequence=0.005, decode_per_context=1e-5)


def test_continuous_batching_matches_a_hand_trace() -> None:
    """Five requests, at most two in the batch. By hand (t in seconds):
    0      R0 admitted; its prompt (100) alone: 0.2                     -> t1 = 0.2
    t1     R1 admitted (room for one: R2 waits); R0 decodes at context 101 beside R1's
           prompt: 0.010 + 0.00101 + 0.2                                -> t2
    t2     both decode (contexts 102, 101: mean 101.5): 0.015 + 0.001015 -> t3, both done
    t3     R2 admitted (R3 arrives at 0.5 > t3); its prompt (200): 0.3  -> t4, one token
    t4     R3, R4 admitted; their prompts: 0.2 + 0.2                    -> t5
    t5     both decode at 101: 0.015 + 0.00101                          -> t6, R3 done
    t6     R4 alone at 102, then 103: 0.01102 + 0.01103                 -> t7, done"""
    reqs = _requests([0.0, 0.05, 0.1, 0.5, 0.52], [100, 100, 200, 100, 100], [3, 2, 1, 2, 4])
    out = simulate(linear_table(**HAND), reqs, 1.0, Policy("continuous", 2))
    t1 = 0.2
    t2 = t1 + 0.010 + 0.00101 + 0.2
    t3 = t2 + 0.015 + 0.001015
    t4 = t3 + 0.3
    t5 = t4 + 0.4
    t6 = t5 + 0.015 + 0.00101
    t7 = t6 + 0.01102 + 0.01103
    r = out.records
    assert np.allclose(r.start, [0, t1, t3, t4, t4], rtol=0, atol=1e-12)
    assert np.allclose(r.first, [t1, t2, t4, t5, t5], rtol=0, atol=1e-12)
    assert np.allclose(r.finish, [t3, t3, t4, t6, t7], rtol=0, atol=1e-12)
    assert out.busy_s[0] == pytest.approx(t7)


def test_continuous_batching_keeps_the_kv_cache_within_memory() -> None:
    """The same five requests with room for 8 in the batch but 210 tokens of KV cache:
    R0 and R1 (103 + 102) fit together, R2 (201) beside neither, R3 and R4 (102 + 104)
    together: the trace of a batch of two above."""
    reqs = _requests([0.0, 0.05, 0.1, 0.5, 0.52], [100, 100, 200, 100, 100], [3, 2, 1, 2, 4])
    by_batch = simulate(linear_table(**HAND), reqs, 1.0, Policy("continuous", 2))
    by_memory = simulate(linear_table(**HAND, kv_tokens=210), reqs, 1.0,
                         Policy("continuous", 8))
    assert np.array_equal(by_batch.records.finish, by_memory.records.finish)
    roomy = simulate(linear_table(**HAND), reqs, 1.0, Policy("continuous", 8))
    assert roomy.records.first[2] < by_memory.records.first[2]


def test_chunked_prefill_matches_a_hand_trace() -> None:
    """One prompt of 300 tokens in chunks of 128: 0..128 costs prefill(128) = 0.228;
    128..256 the difference, 0.128, plus a pass's fixed cost (no decode, no prompt started:
    prefill(1) = 0.101); 256..300 0.044 + 0.101; then one decode step at 301:
    0.010 + 0.00301."""
    reqs = _requests([0.0], [300], [2])
    out = simulate(linear_table(**HAND), reqs, 1.0, Policy("chunked", 4, chunk=128))
    first = 0.228 + 0.229 + 0.145
    assert out.records.first[0] == pytest.approx(first, abs=1e-12)
    assert out.records.finish[0] == pytest.approx(first + 0.01301, abs=1e-12)


def test_chunked_prefill_keeps_decodes_going_beside_a_long_prompt() -> None:
    """A 2,000-token prompt arriving while another request decodes: continuous stalls the
    decode for the whole prompt, chunked for a chunk at a time, so its worst gap between
    tokens is shorter."""
    reqs = _requests([0.0, 0.15], [10, 2000], [40, 2])
    table = linear_table(**HAND)
    whole = simulate(table, reqs, 1.0, Policy("continuous", 4))
    chunked = simulate(table, reqs, 1.0, Policy("chunked", 4, chunk=256))
    stall = 0.1 + 0.001 * 2000  # the whole prompt in one iteration
    assert latencies(whole)["tpot_s"][0] > latencies(chunked)["tpot_s"][0]
    assert whole.records.finish[0] > stall


def test_least_outstanding_routes_around_a_busy_replica() -> None:
    """Two batch-1 replicas of 1 s service. R0 (t 0) and R1 (0.1) take one each; R2 (1.05)
    finds replica 0 empty; R3 (1.06) finds both holding one and goes to replica 0 (ties to
    the lowest), starting when R2 ends at 2.05. Round-robin sends R3 to replica 1, free at
    1.1."""
    table = linear_table(1.0, 0.0, 0.0, 0.0, 0.0, max_batch=1)
    reqs = _requests([0.0, 0.1, 1.05, 1.06], [8] * 4, [1] * 4)
    least = simulate(table, reqs, 1.0, Policy("static", 1), 2, "least-outstanding")
    robin = simulate(table, reqs, 1.0, Policy("static", 1), 2, "round-robin")
    assert np.allclose(least.records.start, [0.0, 0.1, 1.05, 2.05])
    assert np.allclose(robin.records.start, [0.0, 0.1, 1.05, 1.1])


def test_static_batches_run_to_completion() -> None:
    """Three requests together in one batch of at most 4: the prompts padded to the longest
    (200), every token of the batch in lockstep (B = 3) until the longest output (3)."""
    reqs = _requests([0.0, 0.0, 0.0], [100, 200, 50], [1, 3, 2])
    out = simulate(linear_table(**HAND), reqs, 1.0, Policy("static", 4))
    first = 3 * (0.1 + 0.2)
    step1 = 0.010 + 0.010 + 0.00201
    step2 = 0.010 + 0.010 + 0.00202
    assert np.allclose(out.records.first, first)
    assert np.allclose(out.records.finish, [first, first + step1 + step2, first + step1])


def test_capacity_grows_with_replicas() -> None:
    """More copies of the plan never lower the capacity, and two serve more than one."""
    table = linear_table(**HAND)
    reqs = generate("poisson", 400, Lengths("fixed", 200), Lengths("fixed", 20), 3, 4096)
    targets = Targets(ttft_s=1.0, tpot_s=0.05)
    found = [capacity(lambda rate, k=k: [simulate(table, reqs, rate, Policy("continuous", 8),
                                                  k, "least-outstanding")],
                      targets, steps=6).rate for k in (1, 2, 4)]
    assert 0 < found[0] < found[1] <= found[2]
    assert meets([simulate(table, reqs, found[0], Policy("continuous", 8))], targets)


def test_summary_counts_goodput_against_the_targets() -> None:
    reqs = _requests([0.0, 0.05, 0.1, 0.5, 0.52], [100, 100, 200, 100, 100], [3, 2, 1, 2, 4])
    out = simulate(linear_table(**HAND), reqs, 1.0, Policy("continuous", 2))
    ttft = latencies(out)["ttft_s"]
    result = summary(out, Targets(ttft_s=0.4, tpot_s=1.0))
    met = int((ttft <= 0.4).sum())
    span = out.records.finish.max()
    assert result["goodput_requests_per_s"] == pytest.approx(met / span)
    assert result["busy_share"][0] == pytest.approx(1.0)


@pytest.mark.parametrize("text, expected", [
    ("512", Lengths("fixed", 512)), ("fixed:64", Lengths("fixed", 64)),
    ("lognormal:128,0.5", Lengths("lognormal", 128, 0.5)),
    ("uniform:10,20", Lengths("uniform", 10, 20))])
def test_lengths_parse(text: str, expected: Lengths) -> None:
    assert parse_lengths("--prompt", text, 4096) == expected


@pytest.mark.parametrize("text", ["0", "lognormal:128", "uniform:20,10", "normal:5,1",
                                  "lognormal:128,9", "1.5", "99999"])
def test_lengths_refused_in_one_line(text: str) -> None:
    with pytest.raises(ArchipelagoError, match="--prompt") as err:
        parse_lengths("--prompt", text, 4096)
    assert "\n" not in str(err.value)


def test_drawn_lengths_follow_their_distribution_and_fit_the_model() -> None:
    reqs = generate("poisson", 20_000, Lengths("lognormal", 300, 0.5),
                    Lengths("uniform", 10, 30), 1, 1024)
    assert np.median(reqs.prompt) == pytest.approx(300, rel=0.03)
    roomy = reqs.prompt <= 1024 - 30  # the rest are clipped to the model's positions
    assert reqs.output[roomy].min() == 10 and reqs.output[roomy].max() == 30
    assert (reqs.prompt + reqs.output).max() <= 1024
    assert 0 < reqs.clipped <= np.count_nonzero(~roomy)
    assert np.mean(np.diff(reqs.unit_arrivals)) == pytest.approx(1.0, rel=0.03)
