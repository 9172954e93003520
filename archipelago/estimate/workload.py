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


def parse_tokens(tokens: str) -> Generation:
    """`IN:OUT`, e.g. `64:64`."""
    match = re.fullmatch(r"\s*(\d+)\s*:\s*(\d+)\s*", tokens)
    if not match:
        raise ArchipelagoError(f"--tokens '{tokens}' must look like IN:OUT, e.g. 64:64")
    return Generation(int(match.group(1)), int(match.group(2)))


@dataclass(frozen=True)
class Sequence:
    """One encoder pass over a sequence of `seq_len` tokens."""

    seq_len: int


def parse_seq_len(seq_len: str) -> Sequence:
    """`--seq-len N`: a whole number of tokens, at least one."""
    try:
        length = int(seq_len)
    except ValueError:
        raise ArchipelagoError(f"--seq-len '{seq_len}' must be a whole number of tokens") \
            from None
    if length < 1:
        raise ArchipelagoError(f"--seq-len {length}: a sequence has at least one token")
    return Sequence(length)
