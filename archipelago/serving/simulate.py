"""Requests routed to replicas of one plan, each replica running its policy (replica.py;
a plan of several stages keeps micro-batches in flight through them, pipeline.py).

Routers (`ROUTERS`): `round-robin` sends request i to replica i mod N; `least-outstanding`
to the replica with the fewest requests assigned and not yet finished when it arrives
(ties to the lowest index), the rule of vLLM's and Ray Serve's routers. Every replica has
run the iterations that start before an arrival when the router looks at it; a replica
only ever admits requests that have arrived, so round-robin can hand out all requests
first and run the replicas after."""

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from archipelago.errors import ArchipelagoError
from archipelago.estimate.iteration import IterationTable
from archipelago.serving.pipeline import check_micro_batches, replica_kind
from archipelago.serving.replica import POLICIES, Policy, Records, Replica
from archipelago.serving.requests import Requests

ROUTERS = ("round-robin", "least-outstanding")
MAX_REPLICAS = 1024  # copies of one plan behind a router: past any single deployment


@dataclass(frozen=True)
class Outcome:
    """What happened to every request, and each replica's busy seconds."""

    arrivals: np.ndarray
    output: np.ndarray
    records: Records
    busy_s: np.ndarray
    iterations: int  # every replica's, together


def check_settings(policy: Policy, replicas: int, router: str) -> None:
    """The one-line refusals of a simulation's settings, before any plan is made."""
    if policy.name not in POLICIES:
        raise ArchipelagoError(f"--policy '{policy.name[:20]}': valid choices are "
                               f"{', '.join(POLICIES)}")
    if router not in ROUTERS:
        raise ArchipelagoError(f"--router '{router[:20]}': valid choices are "
                               f"{', '.join(ROUTERS)}")
    if not 1 <= replicas <= MAX_REPLICAS:
        raise ArchipelagoError(f"--replicas {replicas}: must be in 1..{MAX_REPLICAS}")
    check_micro_batches(policy)


def check(table: IterationTable, requests: Requests, policy: Policy, replicas: int,
          router: str) -> None:
    """`check_settings`, and the batch and the requests against the plan's table."""
    check_settings(policy, replicas, router)
    if not 1 <= policy.max_batch <= table.max_batch:
        raise ArchipelagoError(f"--max-batch {policy.max_batch}: must be in "
                               f"1..{table.max_batch}")
    longest = int((requests.prompt + requests.output).max())
    if longest > table.kv_tokens:
        raise ArchipelagoError(f"a request of {longest} tokens needs more KV cache than the "
                               f"plan's free memory holds ({table.kv_tokens} tokens)")


def simulate(table: IterationTable, requests: Requests, rate: float, policy: Policy,
             replicas: int = 1, router: str = "round-robin") -> Outcome:
    """Serve `requests` arriving at `rate` per second on `replicas` copies of the plan."""
    check(table, requests, policy, replicas, router)
    return serve_pool(replica_kind(table, policy), table, requests.at(rate), requests.prompt,
                      requests.output, policy, replicas, router)[0]


def serve_pool(kind: type[Replica], table: IterationTable, arrivals: np.ndarray,
               prompt: np.ndarray, output: np.ndarray, policy: Policy, replicas: int,
               router: str) -> tuple[Outcome, np.ndarray]:
    """Requests arriving at `arrivals` (in any order) served by `replicas` replicas of
    `kind`: what happened, and which replica served each request."""
    records = Records.empty(len(arrivals))
    pool = [kind(table, arrivals, prompt, output, records, policy) for _ in range(replicas)]
    served = route(pool, arrivals, router)
    return Outcome(arrivals, output, records, np.array([r.busy for r in pool]),
                   sum(r.iterations for r in pool)), served


def route(pool: Sequence[Replica], arrivals: np.ndarray, router: str) -> np.ndarray:
    """Hand every request to a replica in order of arrival (ties by index), run every
    replica to its end, and say which replica served each request."""
    served = np.empty(len(arrivals), dtype=np.int64)
    for k, i in enumerate(np.argsort(arrivals, kind="stable")):
        t = arrivals[i]
        if router == "round-robin":
            served[i] = k % len(pool)
        else:
            for replica in pool:
                replica.advance(t)
            served[i] = min(range(len(pool)), key=lambda r: pool[r].outstanding(t))
        pool[served[i]].assign(int(i))
    for replica in pool:
        replica.advance(np.inf)
    return served
