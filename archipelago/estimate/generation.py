"""The figures every text-generation estimate has, whatever ran it (a ring of FPGAs, a
pipeline of rings, GPUs): what the shared tables and `--json` read."""

from dataclasses import dataclass


@dataclass
class GenerationTiming:
    latency_s: float
    tokens_per_s: float  # every sequence's output tokens over the latency
    prefill_s: float
    decode_s_per_token: float  # mean over the decode steps
    decode_s_first: float
    decode_s_last: float
    breakdown_s: dict[str, float]  # by part, summing to the latency
    feasible: bool


@dataclass(frozen=True)
class Traits:
    """What a comparison of plans shows of one beyond its timing (`archi compare`): how it
    is split (`tp=4`, `tp=4,pp=2`) and which resource bounds its decode steps. `shares` is
    each resource's time at its limit (bytes at the memory bandwidth, FLOPs at the peak,
    collectives, kernel issue) as a fraction of the mean decode step; the largest binds."""

    split: str
    shares: dict[str, float]

    @property
    def binding(self) -> str:
        """The resource with the largest share; "-" without a decode step to rate."""
        if not self.shares:
            return "-"
        return max(self.shares, key=lambda name: self.shares[name])
