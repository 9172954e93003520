"""The tokens each rank has generated so far, in a memory-mapped file beside the progress
board: the launcher's check starts its transformers pass as soon as the tokens that pass
feeds are known, beside the ranks' last decode step and their exit instead of after them
(issue 36 point 4)."""

from pathlib import Path

import numpy as np

NONE = -1  # a token not generated yet


class RankTokens:
    """Token `index` of each rank (NONE: not yet), `capacity` per rank; a rank writes only
    its own row, the launcher reads them all."""

    def __init__(self, path: Path, ranks: int, capacity: int | None = None) -> None:
        """`capacity` creates the file (the launcher); None opens the one made (a rank)."""
        if capacity is None:
            self._tokens = np.memmap(path, np.int64, "r+").reshape(ranks, -1)
        else:
            self._tokens = np.memmap(path, np.int64, "w+", shape=(ranks, max(capacity, 1)))
            self._tokens[:] = NONE

    def publish(self, rank: int, index: int, token: int) -> None:
        self._tokens[rank, index] = token

    def agreed(self) -> list[int]:
        """The longest prefix every rank has generated, and generated alike."""
        rows = np.array(self._tokens)
        same = (rows != NONE).all(axis=0) & (rows == rows[0]).all(axis=0)
        return rows[0, :int(same.cumprod().sum())].tolist()
