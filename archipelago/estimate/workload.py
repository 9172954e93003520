"""Workloads: what a user asks the cluster to do."""

import re
from dataclasses import dataclass

from archipelago.engines.base import MAX_TOKENS
from archipelago.errors import ArchipelagoError
from archipelago.number_formats import canonical

# Concurrent sequences one plan serves at most: past every published serving batch (vLLM's
# default cap is 256 sequences), a larger count is a typo.
MAX_BATCH = 4096


@dataclass(frozen=True)
class Generation:
    """Text generation: a prompt of `input_tokens`, then `output_tokens` generated greedily;
    the first output token comes from the prefill (summarization) stage. `batch` sequences
    run together, each with its own prompt and KV cache, in `precision` (a format of
    number_formats.py; each kind says which its devices run; None: the strategy's own)."""

    input_tokens: int
    output_tokens: int
    batch: int = 1
    precision: str | None = None

    def __post_init__(self) -> None:
        if not (1 <= self.input_tokens <= MAX_TOKENS and 1 <= self.output_tokens <= MAX_TOKENS):
            raise ArchipelagoError(f"--tokens {self.input_tokens}:{self.output_tokens}: both "
                                   f"counts must be in 1..{MAX_TOKENS}")
        if not 1 <= self.batch <= MAX_BATCH:
            raise ArchipelagoError(f"--batch {self.batch}: must be in 1..{MAX_BATCH} sequences")
        if self.precision is not None:
            canonical(self.precision)  # a one-line refusal naming the valid choices

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


def parse_tokens(tokens: str) -> Generation:
    """`IN:OUT`, e.g. `64:64`."""
    match = re.fullmatch(r"\s*([0-9]+)\s*:\s*([0-9]+)\s*", tokens)
    if not match:
        raise ArchipelagoError(f"--tokens '{tokens[:40]}' must look like IN:OUT, e.g. 64:64")
    if max(len(g.lstrip("0")) for g in match.groups()) > len(str(MAX_TOKENS)):
        raise ArchipelagoError(f"--tokens '{tokens[:40]}': both counts must be in "
                               f"1..{MAX_TOKENS}")
    return Generation(int(match.group(1)), int(match.group(2)))


def parse_generation(tokens: str, batch: str = "1", precision: str = "") -> Generation:
    """`--tokens IN:OUT`, `--batch B` (B concurrent sequences, a whole number) and
    `--precision` (number_formats.PRECISIONS, synonyms resolved; empty: the strategy's
    own format)."""
    work = parse_tokens(tokens)
    text = batch.strip()
    if not re.fullmatch(r"[0-9]{1,7}", text):
        raise ArchipelagoError(f"--batch '{batch[:40]}' must be a whole number of sequences, "
                               f"1..{MAX_BATCH}")
    return Generation(work.input_tokens, work.output_tokens, int(text),
                      canonical(precision) if precision.strip() else None)


@dataclass(frozen=True)
class Sequence:
    """One encoder pass over a sequence of `seq_len` tokens."""

    seq_len: int


def parse_seq_len(seq_len: str) -> Sequence:
    """`--seq-len N`: a whole number of tokens, at least one."""
    text = seq_len.strip()
    if not re.fullmatch(r"[+-]?[0-9]+", text):
        raise ArchipelagoError(f"--seq-len '{seq_len[:40]}' must be a whole number of tokens")
    if len(text.lstrip("+-0")) > len(str(MAX_TOKENS)) or not 1 <= int(text) <= MAX_TOKENS:
        raise ArchipelagoError(f"--seq-len {text[:40]}: must be in 1..{MAX_TOKENS} tokens")
    length = int(text)
    return Sequence(length)
