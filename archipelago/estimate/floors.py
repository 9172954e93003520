"""Physical floors: no phase of an estimate may be faster than physics allows (issue 32).

A phase (a prompt's prefill, a decode step, an encoder pass, a DAG's run) cannot end before
its busiest device has read, from its memories, the bytes the plan makes it read, nor before
that device has done its FLOPs at its peak. Each kind's `floors` hook says, from the plan
alone, what each device must do in each phase (a `DeviceLoad`); this module turns that into
seconds and the pipeline (`archipelago.api.estimate`) refuses an estimate below them.

The floors are lower bounds, not estimates: peak bandwidths and peak FLOPs from the catalog,
only bytes that must move. A read whose bytes are held in several memories (LORA's weights
mirrored in HBM and DDR) may come from any of them, all at once: the device needs at least
max over sets S of its memories of (bytes held only inside S) / (bandwidth of S), the
smallest time in which the memories' bandwidth can deliver every read (Hall's condition for
a fractional transport).
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from itertools import combinations

import numpy as np

from archipelago.errors import ArchipelagoError

# Arithmetic slack: an estimate equal to its floor, summed in another order, may come out a
# few ulps below it; a real defect is percents.
_SLACK = 1e-9


@dataclass(frozen=True)
class Read:
    """`bytes` a device must read in a phase, held in each of `memories` (any may serve)."""

    bytes: float
    memories: tuple[str, ...]


@dataclass(frozen=True)
class DeviceLoad:
    """What one device must do in one phase: its reads, with each memory's peak bandwidth
    (`bandwidths`, bytes/s, the catalog's), and its FLOPs at `peak_flops` (None: the
    catalog gives no peak for it, so no compute floor)."""

    device: str  # how the refusal names it: "rank 3 (u280)"
    reads: tuple[Read, ...]
    bandwidths: Mapping[str, float] = field(hash=False)
    flops: float = 0.0
    peak_flops: float | None = None

    def memory_floor(self) -> tuple[float, str]:
        """The least seconds its memories need to deliver its reads, and why."""
        names = sorted({m for r in self.reads if r.bytes > 0 for m in r.memories})
        best, why = 0.0, ""
        for size in range(1, len(names) + 1):
            for subset in combinations(names, size):
                moved = sum(r.bytes for r in self.reads if set(r.memories) <= set(subset))
                bandwidth = sum(self.bandwidths[m] for m in subset)
                if moved / bandwidth > best:
                    best = moved / bandwidth
                    why = (f"{self.device} reads {moved / 1e9:,.4g} GB from "
                           f"{'+'.join(subset)} at {bandwidth / 1e9:,.4g} GB/s")
        return best, why

    def compute_floor(self) -> tuple[float, str]:
        if self.peak_flops is None or self.flops <= 0:
            return 0.0, ""
        return self.flops / self.peak_flops, (
            f"{self.device} does {self.flops / 1e12:,.4g} TFLOP at its "
            f"{self.peak_flops / 1e12:,.4g} TFLOPS peak")

    def floor(self) -> tuple[float, str]:
        return max(self.memory_floor(), self.compute_floor(), key=lambda f: f[0])


@dataclass(frozen=True)
class PhaseFloor:
    """One phase of an estimate: its estimated seconds and every device's load in it."""

    phase: str
    estimate_s: float
    loads: tuple[DeviceLoad, ...]

    def floor(self) -> tuple[float, str]:
        """The phase's floor (its slowest device's) and why."""
        return max((load.floor() for load in self.loads), key=lambda f: f[0],
                   default=(0.0, ""))


class BelowFloor(ArchipelagoError):
    """An estimate came out faster than its plan's physical floor: a bug in the estimate."""


def below(estimate_s: float, floor_s: float) -> bool:
    """Whether `estimate_s` is under `floor_s` by more than arithmetic slack."""
    return estimate_s < floor_s * (1 - _SLACK)


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.4g} ms"


def check_floors(floors: Iterable[PhaseFloor], where: str) -> None:
    """Refuse, in one line naming the phase, its estimate and its floor, the first phase
    estimated below its floor."""
    for phase in floors:
        check_floor(phase.phase, phase.estimate_s, phase.floor(), where)


def check_floor(phase: str, estimate_s: float | np.ndarray, floor: tuple[float, str],
                where: str) -> None:
    """Refuse `estimate_s` (or the least of an array of designs' estimates) below
    `floor` (seconds, why)."""
    refused = refusal(phase, float(np.min(estimate_s)), floor, where)
    if refused is not None:
        raise BelowFloor(refused)


def refusal(phase: str, estimate_s: float, floor: tuple[float, str], where: str
            ) -> str | None:
    """What `check_floor` refuses `estimate_s` with, or None where it is not below."""
    bound, why = floor
    if not below(estimate_s, bound):
        return None
    return (f"{where}: {phase} estimated at {_ms(estimate_s)}, below its physical floor of "
            f"{_ms(bound)} ({why}): a bug in the estimate, please report the command")
