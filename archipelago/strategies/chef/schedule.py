"""CHEF's schedule recurrence (seeds/004 §VI, Fig. 6): the one rule that the simulator, M2A's
list mapping and re-mapping, and the exact search all evaluate.

Layers run in wave order. A layer starts when its accelerator is free and its predecessors
have ended; its box is the transfer of its inputs plus its compute. The rule reads plain
tables (built from the cluster and deployment by `simulate.Tables`), so it does not depend
on how a cluster is described:

- `cost[i][a]`: compute seconds of layer i on accelerator a (INF where a cannot run it);
- `preds[i]`: (predecessor, bytes) pairs of layer i;
- `per_byte[a][b]`: transfer seconds per byte from accelerator b to accelerator a.

It is one loop over the layers it is given, not a function per layer: a search runs
millions of layer steps, and a call per step would add to every one of them.
"""

INF = float("inf")


def run(cost: list[list[float]], preds: list[list[tuple[int, int]]],
        per_byte: list[list[float]], mapping: list[int], layers,
        free: list[float], end: list[float], bound: float = INF,
        start: list[float] | None = None, comm: list[float] | None = None) -> float:
    """Schedule `layers` (positions, each after its predecessors) on the accelerators that
    `mapping` gives them, from accelerator availability `free` and predecessor ends `end`,
    both updated in place. Returns the latest end among `layers`, or INF as soon as one ends
    at or after `bound` (ends only grow, so a search can stop there). `start` and `comm`,
    when given, receive each layer's start and transfer seconds."""
    latest = 0.0
    for i in layers:
        acc = mapping[i]
        ready, xfer, row = free[acc], 0.0, per_byte[acc]
        for p, nbytes in preds[i]:
            if end[p] > ready:
                ready = end[p]
            xfer += nbytes * row[mapping[p]]
        e = end[i] = free[acc] = ready + xfer + cost[i][acc]
        if start is not None:
            start[i], comm[i] = ready, xfer
        if e >= bound:
            return INF
        if e > latest:
            latest = e
    return latest
