"""What a simulation reports (per request time to first token, time per output token,
end-to-end latency and queueing delay; their percentiles; throughput; goodput; busy share)
and the capacity search: the highest arrival rate whose outcome meets the targets.

TPOT is a request's decode time over its output tokens after the first (vLLM's and
Sarathi-Serve's definition); a one-token answer has none and meets any TPOT target.
Percentiles are numpy's linear interpolation between order statistics."""

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from archipelago.serving.simulate import Outcome

PERCENTILES = (50, 90, 99)


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


@dataclass(frozen=True)
class Capacity:
    rate: float  # requests/s; 0: the targets are missed even at the lowest rate tried
    simulations: int
    bounded: bool  # False: met at the highest rate tried, so at least `rate`


def capacity(run: Callable[[float], list[Outcome]], targets: Targets, start: float = 1.0,
             steps: int = 10, doublings: int = 40) -> Capacity:
    """The highest rate at which `run(rate)` (one outcome per seed) meets the targets:
    doubling (or halving) from `start` to bracket it, then `steps` bisections; the answer
    is the bracket's met end, within a factor 2**-steps of the bracket."""
    count = 0

    def ok(rate: float) -> bool:
        nonlocal count
        count += 1
        return meets(run(rate), targets)

    lo, hi = 0.0, start
    if ok(start):
        lo, hi = start, 2 * start
        for _ in range(doublings):
            if not ok(hi):
                break
            lo, hi = hi, 2 * hi
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
