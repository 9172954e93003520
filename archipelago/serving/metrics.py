"""What a simulation reports (per request time to first token, time per output token,
end-to-end latency and queueing delay; their percentiles; throughput; goodput; busy share)
and the capacity search: the highest arrival rate whose outcome meets the targets.

TPOT is a request's decode time over its output tokens after the first (vLLM's and
Sarathi-Serve's definition); a one-token answer has none and meets any TPOT target.
Percentiles are numpy's linear interpolation between order statistics."""

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from archipelago.serving.requests import Requests
from archipelago.serving.simulate import Outcome

PERCENTILES = (50, 90, 99)
# A saturated run's requests: per batch slot of the deployment (a steady state of 16
# batches beside the first, whose completions are unsteady), and at most this many.
SATURATION_PER_SLOT, SATURATION_MAX = 16, 65_536


@dataclass(frozen=True)
class Targets:
    ttft_s: float
    tpot_s: float
    percentile: float = 90.0  # of requests that must meet both


def latencies(out: Outcome) -> dict[str, np.ndarray]:
    r = out.records
    decoded = out.output > 1
    tpot = np.full(len(out.output), np.nan)
    tpot[decoded] = (r.finish - r.first)[decoded] / (out.output[decoded] - 1)
    return {"ttft_s": r.first - out.arrivals, "tpot_s": tpot,
            "e2e_s": r.finish - out.arrivals, "queue_s": r.start - out.arrivals}


def percentile_of(values: np.ndarray, q: float) -> float:
    kept = values[~np.isnan(values)]
    return float(np.percentile(kept, q)) if kept.size else 0.0


def meets(outcomes: list[Outcome], targets: Targets) -> bool:
    """Whether `targets.percentile` of the requests (pooled over the outcomes) meet each
    target."""
    ttft = np.concatenate([latencies(o)["ttft_s"] for o in outcomes])
    tpot = np.concatenate([latencies(o)["tpot_s"] for o in outcomes])
    return (percentile_of(ttft, targets.percentile) <= targets.ttft_s
            and percentile_of(tpot, targets.percentile) <= targets.tpot_s)


def summary(out: Outcome, targets: Targets) -> dict:
    """Percentiles of every latency, throughput, goodput and busy share of one outcome."""
    lat = latencies(out)
    span = float(out.records.finish.max() - out.arrivals.min())
    span = span if span > 0 else float("inf")
    good = (lat["ttft_s"] <= targets.ttft_s) & ~(lat["tpot_s"] > targets.tpot_s)
    return {
        "requests": len(out.output),
        **{name: {f"p{q}": percentile_of(v, q) for q in PERCENTILES} | {
            "mean": float(np.nanmean(v)) if np.any(~np.isnan(v)) else 0.0}
           for name, v in lat.items()},
        "throughput_requests_per_s": len(out.output) / span,
        "throughput_tokens_per_s": float(out.output.sum()) / span,
        "goodput_requests_per_s": int(good.sum()) / span,
        "met_share": float(good.mean()),
        "busy_share": [float(b) / span for b in out.busy_s],
        "span_s": span,
        "iterations": out.iterations,
    }


def steady_rate(out: Outcome) -> float:
    """Requests completed per second between the 20th and 80th percentile completion
    times (order statistics, not interpolated: a window from one completion to another
    counts whole waves where a batch finishes together): the run's steady completion
    rate, its start-up and drain left out."""
    finish = np.sort(out.records.finish)
    early, late = np.quantile(finish, [0.2, 0.8], method="lower")
    if late <= early:  # everything finished at once: the whole span (none: no bound)
        span = float(finish[-1] - out.arrivals.min())
        return len(finish) / span if span > 0 else math.inf
    return np.count_nonzero((finish > early) & (finish <= late)) / float(late - early)


def saturated(requests: Requests, slots: int) -> Requests:
    """The requests (their lengths, in order) repeated to at least SATURATION_PER_SLOT
    per batch slot of the deployment (`slots`: replicas x max batch; at most
    SATURATION_MAX): a steady state long beside the first batch, whose completions are
    the short requests of an unsteady start. Arrival times are moot (all at once)."""
    n = len(requests)
    want = min(max(n, SATURATION_PER_SLOT * slots), max(n, SATURATION_MAX))
    keep = np.resize(np.arange(n), want)
    return Requests(np.zeros(want), requests.prompt[keep], requests.output[keep])


def saturation(outcomes: list[Outcome]) -> float:
    """The service rate: the mean over `outcomes` (runs at an infinite arrival rate, every
    request queued at the start, so the queue never empties) of the steady completion
    rate."""
    return float(np.mean([steady_rate(o) for o in outcomes]))


def judged_limit(service_rate: float, requests: int) -> float:
    """The highest arrival rate at which a run of `requests` Poisson arrivals reaches
    steady state, so that its percentiles are the service's. Below the service rate mu
    the queue is stable (Loynes 1962), but near it a queue forgets its empty start only
    after its relaxation time, about sigma^2 / (mu - rate)^2 for a queue with net input
    variance sigma^2 = rate per second (Poisson arrivals, service nearly fixed) in the
    heavy-traffic (reflected Brownian motion) limit (Abate and Whitt 1987, Whitt 1989,
    "Planning queueing simulations"). The run lasts requests / rate; asking it to last
    a relaxation time gives rate <= mu / (1 + 1 / sqrt(requests)). Past it, a run's
    backlog is still growing when it ends and its delays read low."""
    return service_rate / (1 + 1 / math.sqrt(requests))


@dataclass(frozen=True)
class Capacity:
    rate: float  # requests/s; 0: the targets are missed even at the lowest rate tried
    simulations: int
    bounded: bool  # False: met at the highest rate tried, so at least `rate`


def capacity(run: Callable[[float], list[Outcome]], targets: Targets, start: float = 1.0,
             steps: int = 10, doublings: int = 40, limit: float = np.inf) -> Capacity:
    """The highest rate below `limit` (`judged_limit` of the service rate) at which
    `run(rate)` (one outcome per seed) meets the targets: doubling (or halving) from
    `start` to bracket it, then `steps` bisections; the answer is the bracket's met end,
    within a factor 2**-steps of the bracket. A rate at or past `limit` is missed
    without a simulation: a finite run there hides a backlog that grows without bound,
    or has not yet grown to its steady size, wherever its delay stays under the TTFT
    target."""
    count = 0

    def ok(rate: float) -> bool:
        nonlocal count
        if rate >= limit:
            return False
        count += 1
        return meets(run(rate), targets)

    lo, hi = 0.0, min(start, limit)
    if ok(hi):
        lo, hi = hi, min(2 * hi, limit)
        for _ in range(doublings):
            if not ok(hi):
                break
            lo, hi = hi, min(2 * hi, limit)
        else:
            return Capacity(lo, count, False)
    else:
        for _ in range(doublings):
            hi_next = hi / 2
            if ok(hi_next):
                lo = hi_next
                break
            hi = hi_next
        else:
            return Capacity(0.0, count, True)
    for _ in range(steps):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return Capacity(lo, count, True)
