"""NSGA-II over categorical genes, on numpy arrays (Deb et al., IEEE TEC 2002; the genetic
search of seeds/002 §V-D): constrained domination, non-dominated sorting and crowding on two
minimized objectives, binary tournaments, uniform crossover and per-gene mutation.

A population is an integer array, one row per candidate and one column per gene (the index
of its value among the gene's choices). Candidates are judged by `objectives` (n x 2) and
`violation` (n, >= 0; 0 is feasible): feasible ones before infeasible ones, infeasible ones
by violation alone (Deb's constrained domination), feasible ones by Pareto fronts.
"""

from bisect import bisect_right

import numpy as np


def pareto_fronts(objectives: np.ndarray) -> np.ndarray:
    """Each point's front (0 = non-dominated) for two minimized objectives, in O(n log n):
    in (f1, f2) order a point joins the first front whose last point does not dominate it:
    whose last f2 is larger, or whose last point equals it."""
    order = np.lexsort((objectives[:, 1], objectives[:, 0]))
    front = np.empty(len(objectives), dtype=np.int64)
    last_f2: list[float] = []  # per front, its last point's f2 (non-decreasing over fronts)
    last: list[tuple[float, float]] = []
    for i, (f1, f2) in zip(order.tolist(), objectives[order].tolist(), strict=True):
        k = bisect_right(last_f2, f2)
        if k and last[k - 1] == (f1, f2):  # an equal point (the largest f1 of its f2)
            k -= 1
        if k == len(last):
            last_f2.append(f2)
            last.append((f1, f2))
        else:
            last_f2[k], last[k] = f2, (f1, f2)
        front[i] = k
    return front


def ranks(objectives: np.ndarray, violation: np.ndarray) -> np.ndarray:
    """Constrained-domination rank: the Pareto front among feasible points, then infeasible
    points after every feasible front, ranked by violation (equal violations share a rank)."""
    feasible = violation <= 0
    rank = np.empty(len(violation), dtype=np.int64)
    fronts = pareto_fronts(objectives[feasible]) if feasible.any() else np.zeros(0, np.int64)
    rank[feasible] = fronts
    start = int(fronts.max()) + 1 if fronts.size else 0
    _, dense = np.unique(violation[~feasible], return_inverse=True)
    rank[~feasible] = start + dense
    return rank


def crowding(objectives: np.ndarray, rank: np.ndarray) -> np.ndarray:
    """Crowding distance within each rank: the normalized side lengths of the box spanned by
    a point's neighbours on each objective; the ends of a front (every member of a rank of
    at most two) are infinitely far. All ranks at once: each objective sorted by rank, then
    value (ties in index order), each rank a run of that order."""
    distance = np.zeros(len(rank))
    if not len(rank):
        return distance
    for column in objectives.T:
        order = np.lexsort((column, rank))
        ranked, values = rank[order], column[order]
        first = np.r_[True, ranked[1:] != ranked[:-1]]  # a rank's first point in `order`
        last = np.r_[first[1:], True]
        inside = np.flatnonzero(~first & ~last)
        gaps = np.full(len(rank), np.inf)
        with np.errstate(divide="ignore", invalid="ignore"):  # inf - inf: a span of nan
            span = (values[last] - values[first])[np.cumsum(first) - 1][inside]
            gaps[inside] = np.where(span > 0, (values[inside + 1] - values[inside - 1])
                                    / span, 0.0)
        distance[order] += gaps
    return distance


def survivors(objectives: np.ndarray, violation: np.ndarray, count: int) -> np.ndarray:
    """The indices of the `count` best by rank, then crowding (NSGA-II's elitist step)."""
    rank = ranks(objectives, violation)
    distance = crowding(objectives, rank)
    return np.lexsort((-distance, rank))[:count]


def offspring(rng: np.random.Generator, parents: np.ndarray, rank: np.ndarray,
              distance: np.ndarray, sizes: tuple[int, ...], count: int) -> np.ndarray:
    """`count` children: each of two binary-tournament winners (lower rank, then larger
    crowding distance), uniform crossover, then each gene mutated with probability 1/genes
    to another of its choices."""
    n, genes = parents.shape
    contenders = rng.integers(0, n, size=(2, 2, count))  # two tournaments of two
    winners = []
    for a, b in contenders:
        better_b = (rank[b] < rank[a]) | ((rank[b] == rank[a]) & (distance[b] > distance[a]))
        winners.append(np.where(better_b, b, a))
    mother, father = parents[winners[0]], parents[winners[1]]
    children = np.where(rng.random((count, genes)) < 0.5, mother, father)
    return mutate(rng, children, sizes, 1.0 / genes)


def mutate(rng: np.random.Generator, rows: np.ndarray, sizes: tuple[int, ...],
           probability: float) -> np.ndarray:
    """Each gene moved, with `probability`, to another of its choices (uniformly)."""
    size = np.asarray(sizes)
    move = (rng.random(rows.shape) < probability) & (size > 1)
    step = rng.integers(1, np.maximum(size, 2), size=rows.shape)
    return np.where(move, (rows + step) % size, rows)
