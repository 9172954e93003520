"""Workloads: what a user asks the cluster to do."""

import re
from dataclasses import dataclass

from archipelago.errors import ArchipelagoError


@dataclass(frozen=True)
class Generation:
    """Text generation: a prompt of `input_tokens`, then `output_tokens` generated greedily;
    the first output token comes from the prefill (summarization) stage."""

    input_tokens: int
    output_tokens: int

    def __post_init__(self) -> None:
        if self.input_tokens < 1 or self.output_tokens < 1:
            raise ArchipelagoError(
                f"tokens {self.input_tokens}:{self.output_tokens}: both counts must be >= 1")

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


def parse_tokens(text: str) -> Generation:
    """`IN:OUT`, e.g. `64:64`."""
    match = re.fullmatch(r"\s*(\d+)\s*:\s*(\d+)\s*", text)
    if not match:
        raise ArchipelagoError(f"--tokens '{text}' must look like IN:OUT, e.g. 64:64")
    return Generation(int(match.group(1)), int(match.group(2)))
