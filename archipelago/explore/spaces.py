"""Design spaces: what a strategy's engine search may move (each kind defines a builder
`space(spec, device)` in its package's `space` module and names it when it registers: the
candidate values are bounded by the board's resources), and the lookup by strategy.

A space is a set of categorical genes (each a name and its candidate values, seeds/002 §V-D:
"define a set of candidate values for each hardware parameter") and a decode from one value
per gene to the engine parameters, so the search works on integer arrays (one column per
gene, one row per candidate) and only decodes the rows it evaluates.
"""

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from archipelago.errors import ArchipelagoError
from archipelago.strategies.registry import get_strategy, resolve, strategies

# Spaces are enumerable: the search keeps one flag per gene combination, so it can say when
# a budget larger than the space has tried all of it. 2^24 flags are 16 MiB.
MAX_COMBINATIONS = 2**24


@dataclass(frozen=True)
class DesignSpace:
    """Genes (name -> candidate values), the decode of one value per gene to an engine
    config, and the published design point as gene values: evaluated first, so a search
    never returns anything worse than the paper's own configuration."""

    genes: Mapping[str, tuple[Any, ...]]
    decode: Callable[[dict[str, Any]], dict[str, Any]]
    baseline: Mapping[str, Any]

    def __post_init__(self) -> None:
        if self.combinations > MAX_COMBINATIONS:
            raise ValueError(f"a design space has {self.combinations} gene combinations, "
                             f"more than {MAX_COMBINATIONS}")
        self.indices(self.baseline, "the published design point")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.genes)

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(len(choices) for choices in self.genes.values())

    @property
    def combinations(self) -> int:
        return math.prod(self.sizes)

    def values(self, row: np.ndarray) -> dict[str, Any]:
        """The gene values of one candidate (a row of choice indices)."""
        return {name: choices[i] for (name, choices), i in zip(self.genes.items(),
                                                               row.tolist(), strict=True)}

    def engine(self, row: np.ndarray) -> dict[str, Any]:
        return self.decode(self.values(row))

    def indices(self, values: Mapping[str, Any], what: str) -> np.ndarray:
        """The row of choice indices of `values`; a ValueError naming `what` and the first
        gene that is missing or not one of its choices."""
        row = []
        for name, choices in self.genes.items():
            if name not in values or values[name] not in choices:
                raise ValueError(f"{what}: gene '{name}' is {values.get(name, 'missing')!r}, "
                                 f"not one of {list(choices)}")
            row.append(choices.index(values[name]))
        if set(values) - set(self.genes):
            raise ValueError(f"{what}: unknown genes {sorted(set(values) - set(self.genes))}")
        return np.array(row, dtype=np.int64)

    def flat(self, rows: np.ndarray) -> np.ndarray:
        """Each row's number among all gene combinations (mixed radix)."""
        return np.ravel_multi_index(tuple(rows.T), self.sizes)

    def rows(self, flat: np.ndarray) -> np.ndarray:
        return np.stack(np.unravel_index(flat, self.sizes), axis=1).astype(np.int64)


# The keys' encoder, made once (json.dumps with these options makes one a call).
_KEYS = json.JSONEncoder(sort_keys=True, separators=(",", ":"))


def engine_key(engine: Mapping[str, Any]) -> str:
    """A trial's key: its engine as canonical JSON (one engine, one trial)."""
    return _KEYS.encode(engine)


def engine_keys(engines: list[Mapping[str, Any]]) -> list[str]:
    """Each engine's `engine_key`, encoded as one list and cut between the engines: their
    values' own text may hold the cut's (a string, a nested dict), which makes more pieces
    than engines (then each is encoded alone)."""
    pieces = _KEYS.encode(engines)[2:-2].split("},{")
    if len(pieces) != len(engines) or not engines:
        return [engine_key(engine) for engine in engines]
    return ["{" + piece + "}" for piece in pieces]


def space_builder(strategy: str) -> Callable[[Any, Any, Any], DesignSpace]:
    """The builder `space(spec, device, workload)` strategy `strategy` registered (the
    workload as its plan kind parsed it, None for the strategy's own number format); an
    error naming the strategies `archi explore` takes (those with a space, and those whose plan kind
    explores by itself)."""
    path = get_strategy(strategy).design_space
    if path is None:
        explorable = sorted(n for n, s in strategies().items() if s.explorable)
        raise ArchipelagoError(f"strategy '{strategy}' has no engine design space to explore; "
                               f"explorable: {', '.join(explorable)}")
    return resolve(path)


def design_space(strategy: str, model: str, cluster: str, workload: Any = None
                 ) -> DesignSpace:
    """Strategy `strategy`'s space for `model` on the boards of `cluster` (a ring's boards
    are identical: its first board's resources bound it), in `workload`'s number format
    (None: the strategy's own)."""
    from archipelago.hardware.cluster import resolve_cluster
    from archipelago.models.zoo import resolve_model

    builder = space_builder(strategy)
    return builder(resolve_model(model), resolve_cluster(cluster).devices[0], workload)
