"""Names in, reports out: what `archi plan / explore / emulate / proxies` call for the
host-offload row. User input is validated once here (pydantic), then plain objects flow."""

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from archipelago.engines.npu_overlay import NPUConfig
from archipelago.errors import ArchipelagoError, ConfigError, PartitionError
from archipelago.hardware.cluster import Cluster, resolve_cluster
from archipelago.models.recurrent import build_recurrent
from archipelago.strategies.host_offload.estimate import HostEstimate, estimate_host
from archipelago.strategies.host_offload.partition import parse_grid
from archipelago.strategies.host_offload.plan import HostPlan, make_host_plan
from archipelago.strategies.host_offload.proxies import CPUProfile, load_profile
from archipelago.strategies.host_offload.sizing import (
    MAX_CARDS,
    fewest_cards,
    largest_persistent,
)

# The card types of seeds/003 Table II, searched when sizing a server.
CARD_TYPES = ("a10-1150", "s10-2800", "s10-2100-tr")
TOP_CALLS = 8


class HostRequest(BaseModel):
    """One run of the row: model and size, cluster, workload and options."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str
    cluster: str
    steps: int = Field(default=50, ge=1)
    hidden: int | None = Field(default=None, ge=2)
    layers: int | None = Field(default=None, ge=1)
    vocab: int | None = Field(default=None, ge=2)
    beam: int | None = Field(default=None, ge=1)
    weights: Literal["persistent", "pcie", "ddr4"] = "persistent"
    partition: str | None = None
    cpu_profile: Path | None = None
    engine: dict[str, Any] = Field(default_factory=dict)

    def spec(self, hidden: int | None = None) -> Any:
        return build_recurrent(self.model, hidden or self.hidden, self.layers, self.vocab,
                               self.beam)

    def npu_config(self) -> NPUConfig:
        try:
            return NPUConfig(**self.engine)
        except ValidationError as err:
            first = err.errors()[0]
            raise ConfigError("--engine-config", ".".join(str(p) for p in first["loc"]),
                              f"{first['msg']}; valid keys: "
                              f"{', '.join(NPUConfig.model_fields)}") from None


def host_request(**fields: Any) -> HostRequest:
    """Validate CLI/library input once; the first problem as one line."""
    if fields.get("beam") == 0:
        raise ArchipelagoError("beam width 0: a beam search keeps at least one hypothesis")
    try:
        return HostRequest(**fields)
    except ValidationError as err:
        first = err.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        raise ArchipelagoError(f"--{field.replace('_', '-')}: {first['msg']}") from None


def make_plan(request: HostRequest, cluster: str | None = None,
              hidden: int | None = None) -> HostPlan:
    grid = parse_grid(request.partition) if request.partition else None
    return make_host_plan(request.spec(hidden), resolve_cluster(cluster or request.cluster),
                          request.steps, request.weights, grid, request.npu_config())


def estimate_to_dict(plan: HostPlan, est: HostEstimate) -> dict[str, Any]:
    return {
        "model": plan.spec.name, "params": plan.spec.params,
        "matrix_params": plan.spec.matrix_params, "cards": plan.cards,
        "devices": sorted({d.device.key for d in plan.designs}), "steps": plan.steps,
        "weights": plan.layout.weights, "latency_s": est.latency_s, "setup_s": est.setup_s,
        "breakdown_s": est.breakdown_s,
        "per_call": {name: {"count": int(v["count"]), "time_s": v["time_s"]}
                     for name, v in est.top_calls(TOP_CALLS)},
        "onchip_bytes": est.onchip_bytes, "onchip_capacity_bytes": est.onchip_capacity_bytes,
        "npu": {"tiles": plan.designs[0].tiles, "native_dim": plan.designs[0].native_dim,
                "lanes": plan.designs[0].lanes, "clock_hz": plan.designs[0].clock_hz},
        "feasible": est.feasible, "reasons": est.reasons,
    }


def host_profile(request: HostRequest, cluster: Cluster) -> CPUProfile:
    """CPU proxies: `--cpu-profile`, else the cluster file's host, else this machine's."""
    return load_profile(request.cpu_profile or cluster.host_profile)


def plan_report(request: HostRequest, strict: bool = True) -> dict[str, Any]:
    """The estimate of one request. `strict`: weights that do not fit as asked are a user
    error (one line, the bytes needed and held), as the CLI wants; else `reasons`."""
    plan = make_plan(request)
    profile = host_profile(request, plan.cluster)
    est = estimate_host(plan, profile)
    if strict and not est.feasible:
        raise PartitionError(f"{plan.spec.name} does not fit {request.cluster}: "
                             f"{est.reasons[0]}")
    return {**estimate_to_dict(plan, est), "cpu_profile": profile.machine}


def largest_report(request: HostRequest, granularity: int = 16) -> dict[str, Any]:
    """The largest hidden size that stays persistent on the cluster, and its latency."""
    cluster = resolve_cluster(request.cluster)
    hidden = largest_persistent(lambda h: request.spec(h), cluster, granularity,
                                request.npu_config())
    if hidden is None:
        raise ArchipelagoError(f"no {request.model} of hidden >= {granularity} stays "
                               f"persistent on {request.cluster}")
    report = plan_report(request.model_copy(update={"hidden": hidden}))
    return {"hidden": hidden, **report}


_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(s|ms|us)?\s*$")
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
    profile = host_profile(request, resolve_cluster(request.cluster))
    spec = request.spec()
    rows = {}
    for device in CARD_TYPES:
        found = fewest_cards(spec, device, target_s, request.steps, profile, request.weights,
                             request.npu_config())
        rows[device] = ({"cards": found.cards, "latency_s": found.estimate.latency_s}
                        if found.estimate else
                        {"cards": None, "reason": f"not met with up to {MAX_CARDS} cards"})
    return {"model": spec.name, "params": spec.params, "latency_target_s": target_s,
            "steps": request.steps, "devices": rows}



def proxies_report(out: Path | None, request: HostRequest | None = None) -> dict[str, Any]:
    """Time the CPU calls on this machine (at a model's program sizes when given, else on
    the standard grid), merge them into the profile at `out` and store it."""
    from archipelago.strategies.host_offload.proxies import (
        default_profile_path,
        measure_profile,
        merged,
        program_sizes,
        save_profile,
    )

    target = out or default_profile_path()
    sizes = program_sizes(make_plan(request).program.calls) if request else None
    fresh = measure_profile(sizes)
    profile = merged(load_profile(target), fresh) if target.exists() else fresh
    save_profile(profile, target)
    return {"file": str(target), "machine": profile.machine,
            "measured_s": {name: [[n, t] for n, t in pts] for name, pts in fresh.points.items()},
            "points_stored": {name: len(pts) for name, pts in profile.points.items()}}
