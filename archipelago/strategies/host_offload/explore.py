"""The host-program kind's `archi explore`: not an engine-parameter search but server
sizing, the largest model that stays persistent on a cluster (`--largest`) or, per card
type of seeds/003 Table II, the fewest cards meeting a latency target (`--latency-target`)."""

from typing import Any

from archipelago.durations import parse_seconds
from archipelago.errors import ArchipelagoError
from archipelago.hardware.cluster import resolve_cluster
from archipelago.strategies.host_offload.proxies import load_profile
from archipelago.strategies.host_offload.service import HostRequest, host_request, plan_report
from archipelago.strategies.host_offload.sizing import (
    MAX_CARDS,
    fewest_cards,
    largest_persistent,
)

# The card types of seeds/003 Table II, searched when sizing a server.
CARD_TYPES = ("a10-1150", "s10-2800", "s10-2100-tr")


def largest_report(request: HostRequest, granularity: int = 16) -> dict[str, Any]:
    """The largest hidden size that stays persistent on the cluster, and its latency."""
    cluster = resolve_cluster(request.cluster)
    hidden = largest_persistent(lambda h: request.spec(h), cluster, granularity,
                                request.config)
    if hidden is None:
        raise ArchipelagoError(f"no {request.model} of hidden >= {granularity} stays "
                               f"persistent on {request.cluster}")
    return {"hidden": hidden, **plan_report(request.with_options(hidden=hidden))}


def sizing_report(request: HostRequest, target_s: float) -> dict[str, Any]:
    """For each card type, the fewest cards whose plan meets the latency target (s)."""
    c = request.config
    profile = load_profile(c.cpu_profile or resolve_cluster(request.cluster).host_profile)
    spec = request.spec()
    rows = {}
    for device in CARD_TYPES:
        found = fewest_cards(spec, device, target_s, c.steps, profile, c.weights, c)
        rows[device] = ({"cards": found.cards, "latency_s": found.estimate.latency_s}
                        if found.estimate else
                        {"cards": None, "reason": f"not met with up to {MAX_CARDS} cards"})
    return {"model": spec.name, "params": spec.params, "latency_target_s": target_s,
            "steps": c.steps, "devices": rows}


def explore(model: str, cluster: str, strategy: str, options: dict[str, str]
            ) -> dict[str, Any]:
    """`archi explore` for host programs: `--largest` (the largest model that stays
    persistent on the cluster) or `--latency-target T` (per card type, the fewest cards).
    The options were checked against the kind's by the pipeline."""
    rest = dict(options)
    largest, target = rest.pop("largest", None), rest.pop("latency_target", None)
    if (largest is None) == (target is None):
        raise ArchipelagoError(f"archi explore --strategy {strategy} takes --largest or "
                               "--latency-target TIME (e.g. 10ms)")
    if largest not in (None, "true"):
        raise ArchipelagoError(f"--largest takes no value (got '{largest}')")
    # A time as every command types one (durations.py: a unit, no bare number), checked
    # before the model is read.
    target_s = None if target is None else parse_seconds("--latency-target", target)
    request = host_request(model, cluster, **rest)
    if target_s is not None:
        return {"mode": "latency_target", **sizing_report(request, target_s)}
    return {"mode": "largest", **largest_report(request)}
