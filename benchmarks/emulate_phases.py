"""An emulate() call's wall time by phase, from the `timeline` its report carries
(archipelago/emulate/timeline.py: the launcher's marks and each rank's stamps, seconds since
the launch began) and the call's own wall time; bench_emulate prints the medians."""

from typing import Any

# (phase, what it covers) in the order a run goes through them
PHASES = [
    ("start-up", "reaper and fork server started, weights provided (a checkpoint: none)"),
    ("first rank running", "the fork server's imports (torch; first call only), a fork"),
    ("other ranks running", "their forks after the first's"),
    ("group joined", "the launcher's store, the last rank in"),
    ("shards loaded", "safetensors slices, the last rank's"),
    ("first token", "the prompt's pass, the last rank's"),
    ("other tokens", "the remaining decode steps, the slowest rank"),
    ("gathered", "each rank's result saved for the launcher"),
    ("ranks exited", "every rank saves and exits, the launcher sees it and loads"),
    ("check", "what is left of the check against transformers after the ranks"),
    ("teardown", "run directory removed, reaper told"),
    ("around the launch", "planning and checks before it, the report's own check after"),
]


def phases(wall: float, timeline: dict[str, Any]) -> dict[str, float]:
    """Seconds per PHASES entry of one call that took `wall` seconds."""
    at, ranks = timeline["launcher"], timeline["ranks"]

    def last(phase: str) -> float:
        return max(r[phase] for r in ranks)

    first = min(r["started"] for r in ranks)
    points = [0.0, at["weights"], first, last("started"), last("joined"), last("loaded"),
              last("first_token"), last("last_token"), last("gathered"), at["results"],
              at["checked"], at["removed"], wall]
    return {name: after - before for (name, _), before, after
            in zip(PHASES, points[:-1], points[1:], strict=True)}


def reference_ready(timeline: dict[str, Any]) -> float | None:
    """When the launcher's thread had the reference ready (seconds since the launch)."""
    return timeline["launcher"].get("reference")
