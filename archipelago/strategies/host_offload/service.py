"""The host-program kind's library calls, for benchmarks, tests, `archi explore` and
`archi proxies`: names and option values in, report dicts out. Plans and estimates come
from the pipeline (`archipelago.api`), as the CLI's do."""

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from archipelago.errors import ArchipelagoError
from archipelago.hardware.cluster import resolve_cluster
from archipelago.models.recurrent import RecurrentSpec, resize
from archipelago.models.zoo import resolve_model
from archipelago.strategies.host_offload.config import HostConfig
from archipelago.strategies.host_offload.plan import configured_plan
from archipelago.strategies.host_offload.program import Call
from archipelago.strategies.host_offload.proxies import load_profile
from archipelago.strategies.host_offload.report import summarize
from archipelago.strategies.registry import get_strategy

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

    def options(self) -> dict[str, Any]:
        """The options the user set, as the strategy's engine parameters."""
        return self.config.model_dump(exclude_unset=True)

    def with_options(self, **options: Any) -> "HostRequest":
        return host_request(self.model, self.cluster, **{**self.options(), **options})

    def program_calls(self) -> list[Call]:
        """The calls of the program the request records, whether its weights fit or not:
        `archi proxies` times the CPU calls at their sizes, which do not depend on where
        the weights live (a plan, through the pipeline, would refuse a model too big)."""
        return configured_plan(self.spec(), resolve_cluster(self.cluster),
                               self.config).program.calls


def host_request(model: str, cluster: str, **options: Any) -> HostRequest:
    """Options validated once, by the strategy's config model (one-line errors)."""
    config = get_strategy(STRATEGY).config(options)
    if not isinstance(config, HostConfig):
        raise TypeError(f"strategy '{STRATEGY}' takes a HostConfig")
    request = HostRequest(model, cluster, config)
    request.spec()  # a model the strategy cannot size fails here
    return request


def plan_report(request: HostRequest) -> dict[str, Any]:
    """The estimate of one request, planned and costed by the pipeline."""
    from archipelago.api import plan_and_estimate

    return summarize(*plan_and_estimate(request.model, request.cluster, STRATEGY,
                                        engine=request.options())).as_json()


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
    """Time the CPU calls on this machine (on the fit grid, plus a model's program sizes
    when given), merge them into the profile at `out` and store it; report each call's fit
    over the stored points: numpy's per-call cost and the per-element cost the model uses
    after the native per-call cost. The target and the profile already there are checked
    before the seconds of measuring start."""
    from archipelago.safe_read import probe
    from archipelago.strategies.host_offload.proxies import (
        NATIVE_CALL_S,
        measure_profile,
        merged,
        program_sizes,
        save_profile,
    )

    target, label = profile_target(out)
    stored = load_profile(target) if probe(target, "profile") is not None else None
    sizes = program_sizes(request.program_calls()) if request else None
    fresh = measure_profile(sizes)
    profile = merged(stored, fresh) if stored is not None else fresh
    save_profile(profile, target, label)
    return {"file": str(target), "machine": profile.machine,
            "measured_s": {name: [[n, t] for n, t in pts] for name, pts in fresh.points.items()},
            "points_stored": {name: len(pts) for name, pts in profile.points.items()},
            "native_call_s": NATIVE_CALL_S,
            "fits": {name: {"numpy_call_s": fit.overhead_s, "per_element_s": fit.per_element_s,
                            "sizes": [fit.low, fit.high]}
                     for name, fit in profile.fits.items() if name in fresh.points}}
