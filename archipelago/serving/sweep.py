"""The sweeps behind `archi serve --report`'s curves: latency against throughput as the
arrival rate climbs from low to just past the capacity, and the cost per million tokens
against the rate, each rate on the fewest replicas that meet the targets.

Every point is one seeded simulation of the run's own first requests (SWEEP_REQUESTS per
replica, at most the run's count) on the run's iteration table: a sweep re-uses the plan's
table and never estimates the plan again, and every point serves the same requests, only
closer together (requests.py's common random numbers)."""

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from archipelago.estimate.iteration import IterationTable
from archipelago.serving.metrics import (
    Targets,
    judged_limit,
    latencies,
    meets,
    percentile_of,
    summary,
)
from archipelago.serving.replica import Policy
from archipelago.serving.requests import Requests
from archipelago.serving.simulate import Outcome, simulate

# Requests per replica and point, at most the run's own. A few hundred would be quicker,
# but then a point near the capacity is another simulation than the capacity search's
# (`archi serve`'s default 1,000 requests), so a point past the capacity line could meet
# the targets that the search found missed there; at the run's count (one seed), a point
# at a rate the search tried is the search's own simulation.
SWEEP_REQUESTS = 1000
# The latency curve's arrival rates, as shares of the capacity: low to just past it.
CURVE_SHARES = tuple(round(0.1 * k, 1) for k in range(1, 16))
FRONT_POINTS = 12  # rates on the cost front, geometric
FRONT_SPAN = (0.25, 4.0)  # the front's rates, as multiples of one replica's capacity
MAX_FRONT_REPLICAS = 64  # the front stops where a rate would need more

# (replicas, a simulation's summary, its prompt tokens per second) -> the cost object of
# `archi serve --json` for that many replicas.
CostOf = Callable[[int, dict[str, Any], float], dict[str, Any]]


@dataclass(frozen=True)
class Service:
    """What a sweep serves again: the plan's table, the run's requests (one seed's) and its
    scheduler, router and targets."""

    table: IterationTable
    requests: Requests
    policy: Policy
    router: str
    targets: Targets
    replica_rate: float = np.inf  # one replica's service rate (metrics.saturation)

    def count(self, replicas: int) -> int:
        """Requests a point on `replicas` simulates."""
        return min(len(self.requests), SWEEP_REQUESTS * replicas)

    def serve(self, rate: float, replicas: int) -> tuple[Outcome, Requests]:
        n = self.count(replicas)
        r = self.requests
        part = Requests(r.unit_arrivals[:n], r.prompt[:n], r.output[:n])
        return simulate(self.table, part, rate, self.policy, replicas, self.router), part


def served_rate(outcome: Outcome) -> float:
    """Requests served per second while requests kept arriving (from the tenth
    percentile's arrival to the last): the output tokens made in that window, each
    request's first token at its time and the rest evenly to its finish, over the window
    and the mean output: the arrival rate below saturation, the service rate past it.
    Counting whole requests over the run's span (metrics.summary) counts the drain after
    the last arrival, and counting those finished in the window misses the long ones still
    decoding: on a thousand requests either reads 10-30% low at any load."""
    start, end = float(np.quantile(outcome.arrivals, 0.1)), float(outcome.arrivals.max())
    first, finish = outcome.records.first, outcome.records.finish
    if end <= start:  # one arrival (or all at once): no window, the whole span
        return len(finish) / float(finish.max() - outcome.arrivals.min())
    rest = (outcome.output - 1).astype(float)
    inside = np.clip(np.minimum(finish, end) - np.maximum(first, start), 0, None)
    length = finish - first
    decoded = np.divide(rest * inside, length, out=np.zeros_like(rest), where=length > 0)
    made = np.count_nonzero((first > start) & (first <= end)) + decoded.sum()
    return float(made) / (end - start) / float(outcome.output.mean())


def latency_curve(service: Service, reference: float, replicas: int) -> list[dict[str, Any]]:
    """Per arrival rate (CURVE_SHARES of `reference`, the capacity): the throughput served
    and the targets' percentile of TTFT and TPOT."""
    q = service.targets.percentile
    points = []
    for share in CURVE_SHARES:
        rate = share * reference
        outcome, _ = service.serve(rate, replicas)
        lat = latencies(outcome)
        points.append({
            "rate": rate, "requests": service.count(replicas),
            "served_requests_per_s": served_rate(outcome),
            "ttft_s": percentile_of(lat["ttft_s"], q), "tpot_s": percentile_of(lat["tpot_s"], q),
            "meets": meets([outcome], service.targets)})
    return points


def replicas_needed(service: Service, rate: float, guess: int
                    ) -> tuple[int, Outcome, Requests] | None:
    """The fewest replicas (up to MAX_FRONT_REPLICAS) whose simulation at `rate` meets the
    targets below the rate it can judge (the capacity search's criterion), searched from
    `guess` down while fewer meet and up while they do not; None: none within the bound."""
    tried: dict[int, tuple[Outcome, Requests]] = {}

    def ok(n: int) -> bool:
        if rate >= judged_limit(n * service.replica_rate, service.count(n)):
            return False
        tried[n] = service.serve(rate, n)
        return meets([tried[n][0]], service.targets)

    n = min(max(1, guess), MAX_FRONT_REPLICAS)
    if ok(n):
        while n > 1 and ok(n - 1):
            n -= 1
        return n, *tried[n]
    for more in range(n + 1, MAX_FRONT_REPLICAS + 1):
        if ok(more):
            return more, *tried[more]
    return None


def front_rates(per_replica: float, rate: float) -> np.ndarray:
    """FRONT_POINTS rates from FRONT_SPAN[0] of one replica's capacity to FRONT_SPAN[1] of it
    (or 1.5 x the run's rate, where higher), within what MAX_FRONT_REPLICAS serve."""
    low, high = FRONT_SPAN[0] * per_replica, max(FRONT_SPAN[1] * per_replica, 1.5 * rate)
    high = min(high, 0.9 * MAX_FRONT_REPLICAS * per_replica)
    return np.geomspace(low, high, FRONT_POINTS)


def cost_front(service: Service, per_replica: float, rate: float, cost_of: CostOf
               ) -> list[dict[str, Any]]:
    """Per rate: the replicas needed and the cost per million tokens on them at the rate's
    own throughput (a rate that no MAX_FRONT_REPLICAS meet is left off)."""
    points = []
    for at in front_rates(per_replica, rate):
        found = replicas_needed(service, float(at), math.ceil(at / per_replica))
        if found is None:
            continue
        n, outcome, part = found
        # The targets met, nothing saturates: every request is served, at the arrival rate.
        served = {**summary(outcome, service.targets),
                  "throughput_tokens_per_s": float(at * part.output.mean())}
        c = cost_of(n, served, float(at * part.prompt.mean()))
        points.append({"rate": float(at), "replicas": n, "requests": len(part),
                       "usd_per_million_output_tokens": c.get("usd_per_million_output_tokens"),
                       "usd_per_million_tokens": c.get("usd_per_million_tokens")})
    return points
