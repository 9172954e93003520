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
