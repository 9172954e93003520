"""The host-program kind's sizing answers (`archi explore`), `archi proxies`, and the
library calls benchmarks and tests use: names and option values in, report dicts out."""

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from archipelago.errors import ArchipelagoError, PartitionError
from archipelago.hardware.cluster import resolve_cluster
from archipelago.models.recurrent import RecurrentSpec, resize
from archipelago.models.zoo import resolve_model
from archipelago.strategies.host_offload.config import HostConfig
from archipelago.strategies.host_offload.estimate import estimate_host
from archipelago.strategies.host_offload.plan import HostPlan, configured_plan
from archipelago.strategies.host_offload.proxies import load_profile
from archipelago.strategies.host_offload.report import estimate_to_dict
from archipelago.strategies.host_offload.sizing import (
    MAX_CARDS,
    fewest_cards,
    largest_persistent,
)
from archipelago.strategies.registry import get_strategy

# The card types of seeds/003 Table II, searched when sizing a server.
CARD_TYPES = ("a10-1150", "s10-2800", "s10-2100-tr")
STRATEGY = "persistent"


@dataclass(frozen=True)
class HostRequest:
    """A recurrent built-in, a cluster, and the strategy's validated options."""

    model: str
    cluster: str
    config: HostConfig

    def spec(self, hidden: int | None = None) -> RecurrentSpec:
        base = resolve_model(self.model)
        if not isinstance(base, RecurrentSpec):
            raise ArchipelagoError(f"model '{self.model}' is not a recurrent built-in "
                                   "(nmt-luong, nmt-li, lstm, matvec)")
        c = self.config
        return resize(base, hidden or c.hidden, c.layers, c.vocab, c.beam)

    def with_options(self, **options: Any) -> "HostRequest":
        return host_request(self.model, self.cluster,
                            **{**self.config.model_dump(exclude_unset=True), **options})

    def plan(self) -> HostPlan:
        return configured_plan(self.spec(), resolve_cluster(self.cluster), self.config)


def host_request(model: str, cluster: str, **options: Any) -> HostRequest:
    """Options validated once, by the strategy's config model (one-line errors)."""
    config = get_strategy(STRATEGY).config(options)
    assert isinstance(config, HostConfig)
    request = HostRequest(model, cluster, config)
    request.spec()  # a model the strategy cannot size fails here
    return request


def plan_report(request: HostRequest, strict: bool = True) -> dict[str, Any]:
    """The estimate of one request. `strict`: weights that do not fit as asked are a user
    error (one line, the bytes needed and held), as the CLI has it; else `reasons`."""
    plan = request.plan()
    est = estimate_host(plan, load_profile(plan.cpu_profile))
    if strict and not est.feasible:
        raise PartitionError(f"{plan.spec.name} does not fit {request.cluster}: "
                             f"{est.reasons[0]}")
    return estimate_to_dict(plan, None, est)


def largest_report(request: HostRequest, granularity: int = 16) -> dict[str, Any]:
    """The largest hidden size that stays persistent on the cluster, and its latency."""
    cluster = resolve_cluster(request.cluster)
    hidden = largest_persistent(lambda h: request.spec(h), cluster, granularity,
                                request.config)
    if hidden is None:
        raise ArchipelagoError(f"no {request.model} of hidden >= {granularity} stays "
                               f"persistent on {request.cluster}")
    return {"hidden": hidden, **plan_report(request.with_options(hidden=hidden))}


_DURATION = re.compile(r"^\s*([0-9]{0,9}\.?[0-9]{1,9})\s*(s|ms|us)?\s*$")
_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, None: 1.0}


def parse_latency(text: str) -> float:
    match = _DURATION.match(text)
    if not match or float(match.group(1)) <= 0:
        raise ArchipelagoError(f"--latency-target '{text}': expected a positive time such "
                               "as 10ms, 500us or 0.01 (seconds)")
    return float(match.group(1)) * _UNITS[match.group(2)]


def sizing_report(request: HostRequest, target: str) -> dict[str, Any]:
    """For each card type, the fewest cards whose plan meets the latency target."""
    target_s = parse_latency(target)
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
    persistent on the cluster) or `--latency-target T` (per card type, the fewest cards)."""
    rest = dict(options)
    largest, target = rest.pop("largest", None), rest.pop("latency_target", None)
    if (largest is None) == (target is None):
        raise ArchipelagoError(f"archi explore --strategy {strategy} takes --largest or "
                               "--latency-target TIME (e.g. 10ms)")
    if largest not in (None, "true"):
        raise ArchipelagoError(f"--largest takes no value (got '{largest}')")
    request = host_request(model, cluster, **rest)
    if target is not None:
        return {"mode": "latency_target", **sizing_report(request, target)}
    return {"mode": "largest", **largest_report(request)}


def profile_target(out: Path | None) -> tuple[Path, str]:
    """The profile file `archi proxies` will update, checked before anything is measured,
    and how errors name it: `--out`, or the environment variable the default comes from
    (whose directory is Archipelago's to create)."""
    from archipelago.output_file import check_output_file
    from archipelago.strategies.host_offload.proxies import default_profile_path

    if out is not None:
        check_output_file(out, "--out", force=True)
        return out, "--out"
    home = os.environ.get("ARCHIPELAGO_HOME")
    source = (f"ARCHIPELAGO_HOME={home!r}" if home
              else f"HOME={os.environ.get('HOME', '')!r} (~/.cache/archipelago)")
    target = default_profile_path()
    label = f"environment: {source}: profile"
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ArchipelagoError(f"{label} {target}: cannot create directory {target.parent} "
                               f"({err.strerror or err}); set ARCHIPELAGO_HOME to a "
                               "writable directory or pass --out") from None
    check_output_file(target, label, force=True)
    return target, label


def proxies_report(out: Path | None, request: HostRequest | None = None) -> dict[str, Any]:
    """Time the CPU calls on this machine (at a model's program sizes when given, else on
    the standard grid), merge them into the profile at `out` and store it. The target and
    the profile already there are checked before the seconds of measuring start."""
    from archipelago.safe_read import probe
    from archipelago.strategies.host_offload.proxies import (
        measure_profile,
        merged,
        program_sizes,
        save_profile,
    )

    target, label = profile_target(out)
    stored = load_profile(target) if probe(target, "profile") is not None else None
    sizes = program_sizes(request.plan().program.calls) if request else None
    fresh = measure_profile(sizes)
    profile = merged(stored, fresh) if stored is not None else fresh
    save_profile(profile, target, label)
    return {"file": str(target), "machine": profile.machine,
            "measured_s": {name: [[n, t] for n, t in pts] for name, pts in fresh.points.items()},
            "points_stored": {name: len(pts) for name, pts in profile.points.items()}}
