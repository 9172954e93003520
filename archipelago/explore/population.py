"""The state of one search: every trial the study holds (its own and concurrent runs'), the
parents of the next generation, and which gene combinations are taken, so a candidate is
never an engine already evaluated and the search knows when the space is exhausted."""

from typing import Any

import numpy as np

from archipelago.errors import elide
from archipelago.explore import genetic
from archipelago.explore.evaluate import fabric, violation
from archipelago.explore.spaces import DesignSpace, engine_key, engine_keys
from archipelago.explore.stored import DamagedStudy, TrialRecord, read_stored

# Parents kept per generation, and children per generation (one evaluation batch). Chosen
# on the brute-forced LORA spaces (tests/test_explore_genetic.py, benchmarks/bench_explore.py):
# enough generations in a 30% budget to reach the optimum, batches large enough for numpy.
POPULATION = 32
MUTATION_ROUNDS = 4  # tries at fresh children before filling up with unseen random designs


class Population:
    """Trials by key, their genes and scores as arrays, and the current parents."""

    def __init__(self, space: DesignSpace) -> None:
        self.space = space
        # The journal's values by key: this run's as made, others' once validated (TrialRecord)
        self.records: dict[str, dict[str, Any]] = {}
        self.taken = np.zeros(space.combinations, dtype=bool)  # gene combinations used
        self._rows = np.zeros((0, len(space.genes)), dtype=np.int64)  # genes per trial
        self._scores = np.zeros((0, 3))  # latency, fabric, violation per trial
        self.parents = np.zeros(0, dtype=np.int64)  # indices into the trials
        # Candidates proposed and not yet taken in, by key: their row and decode (genes,
        # engine), so a batch is decoded once and this run's records need no check.
        self.proposed: dict[str, tuple[np.ndarray, dict[str, Any], dict[str, Any]]] = {}

    def __len__(self) -> int:
        return len(self.records)

    def add(self, items: dict[str, Any], own: bool = False) -> None:
        """Take in trials (key -> record value) not held yet: this run's `own` as made (it
        proposed them, `search._records` built their values), what was read back from a
        journal validated first; then choose the next parents."""
        if not own and items.keys() <= self.records.keys():
            return  # nothing new (a study no other run writes to)
        first, rows, scores = len(self.records), [], []
        for key, value in items.items():
            if key in self.records:
                continue
            if own:
                rows.append(self.proposed.pop(key)[0])
            else:
                value = dict(read_stored(TrialRecord, value, f"trial {elide(key, 40)}"))
                rows.append(self._row(value["genes"], key))
            self.records[key] = value
            used = value["utilization"]
            scores.append((value["latency_s"], fabric(used), violation(used, value["feasible"])))
        if rows:
            self._rows = np.concatenate([self._rows, np.stack(rows)])
            self._scores = np.concatenate([self._scores, np.array(scores)])
            self.taken[self.space.flat(np.stack(rows))] = True
            pool = np.concatenate([self.parents, np.arange(first, len(self.records))])
            objectives, excess = self._arrays(pool)
            self.parents = pool[genetic.survivors(objectives, excess, POPULATION)]

    def _row(self, genes: dict[str, Any], key: str) -> np.ndarray:
        try:
            row = self.space.indices(genes, f"trial {elide(key, 40)}")
        except ValueError as err:
            raise DamagedStudy(str(err)) from None
        if engine_key(self.space.decode(genes)) != key:
            raise DamagedStudy(f"trial {elide(key, 40)}: its genes decode to another engine")
        return row

    @property
    def scores(self) -> np.ndarray:
        """Each trial's latency, worst fabric fraction and violation, in `records`' order."""
        return self._scores

    def _arrays(self, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self._scores[index, :2], self._scores[index, 2]

    def propose(self, rng: np.random.Generator, count: int) -> list[tuple[np.ndarray, str]]:
        """Up to `count` candidates (gene row, engine key) that no trial has evaluated: the
        published point first while missing, then children of the parents, then unseen
        random designs; fewer only when the space has no more."""
        out: list[tuple[np.ndarray, str]] = []
        baseline = self.space.indices(self.space.baseline, "the published design point")
        self._take(baseline[None], out, count)
        if len(self.parents):
            objectives, excess = self._arrays(self.parents)
            rank = genetic.ranks(objectives, excess)
            distance = genetic.crowding(objectives, rank)
            parents = self._rows[self.parents]
            for _ in range(MUTATION_ROUNDS):
                if len(out) >= count:
                    break
                children = genetic.offspring(rng, parents, rank, distance, self.space.sizes,
                                             count - len(out))
                self._take(children, out, count)
        while len(out) < count:
            free = np.flatnonzero(~self.taken)
            if not free.size:
                break
            picks = rng.choice(free, size=min(count - len(out), free.size), replace=False)
            self._take(self.space.rows(picks), out, count)
        return out

    def _take(self, rows: np.ndarray, out: list[tuple[np.ndarray, str]], count: int) -> None:
        """Add to `out` each row whose combination and engine are new, in order, marking it
        taken, until `out` holds `count`; the rows of combinations not taken decoded first,
        together."""
        flats = self.space.flat(rows)
        _, first = np.unique(flats, return_index=True)  # a combination's first row
        fresh = np.sort(first[~self.taken[flats[first]]])
        names, choices = self.space.names, tuple(self.space.genes.values())
        values = [{name: c[i] for name, c, i in zip(names, choices, index, strict=True)}
                  for index in rows[fresh].tolist()]  # as space.values
        engines = [self.space.decode(genes) for genes in values]
        keys = {key for _, key in out}
        for row, flat, genes, engine, key in zip(fresh.tolist(), flats[fresh].tolist(), values,
                                                 engines, engine_keys(engines), strict=True):
            if len(out) >= count:
                return
            self.taken[flat] = True  # a combination decoding to a held engine is used up too
            if key not in self.records and key not in keys:
                keys.add(key)
                out.append((rows[row], key))
                self.proposed[key] = (rows[row], genes, engine)

    def exhausted(self) -> bool:
        """Whether every engine of the space is a trial (every combination taken is not
        enough: the last batch may have been cut at the budget)."""
        if not self.taken.all():
            return False
        rows = self.space.rows(np.arange(self.space.combinations))
        return {engine_key(self.space.engine(row)) for row in rows} <= self.records.keys()
