"""What the `persistent` strategy is told: the NPU overlay's design parameters plus the
options that shape the recorded program (model size, steps, weight placement, partition,
the host's CPU proxies). Validated once; `--hidden 64` on the command line and
`hidden: 64` in an engine-config file land here alike."""

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator

from archipelago.engines.base import MAX_DIM, MAX_TOKENS
from archipelago.strategies.host_offload.npu_overlay import NPUConfig
from archipelago.strategies.host_offload.proxies import load_profile


class HostConfig(NPUConfig):
    # input tokens encoded and output tokens decoded
    steps: int = Field(default=50, ge=1, le=MAX_TOKENS)
    hidden: int | None = Field(default=None, ge=2, le=MAX_DIM)  # None: the built-in's default size
    layers: int | None = Field(default=None, ge=1, le=1024)
    vocab: int | None = Field(default=None, ge=2, le=2**22)
    beam: int | None = Field(default=None, le=1024)
    weights: Literal["persistent", "pcie", "ddr4"] = "persistent"
    partition: str | None = None  # RxC row x column blocks, for the matvec model
    cpu_profile: Path | None = None  # CPU proxies; None: the cluster's host or this machine

    @field_validator("cpu_profile")
    @classmethod
    def _readable_profile(cls, path: Path | None) -> Path | None:
        """Read through the safe reader now, whichever command was given it: `emulate`
        never prices a call, and a FIFO or a NaN there was accepted unread."""
        if path is not None:
            load_profile(path)
        return path

    @field_validator("beam")
    @classmethod
    def _beam(cls, beam: int | None) -> int | None:
        if beam is not None and beam < 1:
            raise ValueError(f"beam width {beam}: a beam search keeps at least one hypothesis")
        return beam
