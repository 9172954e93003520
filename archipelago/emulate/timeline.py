"""Where one emulation's wall time goes. The launcher marks its own steps; each rank stamps
its own onto a small file beside the progress board (CLOCK_MONOTONIC is one clock for every
process of a Linux machine, so the stamps line up); the report carries both as seconds
since the launch began, which bench_emulate prints (issue 36 point 4)."""

import time
from pathlib import Path

import numpy as np

# A rank's steps, in order: forked and running the worker, joined the others, its shard
# loaded, its first and last token out, its result handed over (a rank program
# stamps the middle three; one that does not leaves them out of the report).
RANK_PHASES = ("started", "joined", "loaded", "first_token", "last_token", "gathered")


class RankStamps:
    """When each rank reached each of RANK_PHASES (NaN: not yet), in a memory-mapped file."""

    def __init__(self, path: Path, ranks: int, create: bool = False) -> None:
        self._at = np.memmap(path, np.float64, "w+" if create else "r+",
                             shape=(ranks, len(RANK_PHASES)))
        if create:
            self._at[:] = np.nan

    def stamp(self, rank: int, phase: str) -> None:
        self._at[rank, RANK_PHASES.index(phase)] = time.monotonic()

    def read(self) -> np.ndarray:
        return np.array(self._at)


class Timeline:
    """The launcher's marks, from its start; `report` adds the ranks' stamps."""

    def __init__(self) -> None:
        self.begin = time.monotonic()
        self.marks: dict[str, float] = {}

    def mark(self, step: str, once: bool = False) -> None:
        """`step` reached now (`once`: only the first time it is)."""
        if not (once and step in self.marks):
            self.marks[step] = time.monotonic() - self.begin

    def report(self, stamps: np.ndarray | None) -> dict[str, object]:
        """{"launcher": {step: s}, "ranks": [{phase: s}]}, seconds since the launch began,
        rounded to the millisecond; phases a rank never reached are left out."""
        ranks = [] if stamps is None else [
            {phase: round(float(at) - self.begin, 3)
             for phase, at in zip(RANK_PHASES, row, strict=True) if not np.isnan(at)}
            for row in stamps]
        return {"launcher": {k: round(v, 3) for k, v in self.marks.items()}, "ranks": ranks}
