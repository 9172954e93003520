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
millions of layer steps, and a call per step would add to every one of them. `Incumbent`
is its fast path for the re-mapping's one-layer moves, checked against it.
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


class Reads:
    """Who reads each layer's end: `last[p]`, the last layer reading it (p itself when
    none does), and `released[j]`, the layers whose last reader is j."""

    def __init__(self, preds: list[list[tuple[int, int]]]) -> None:
        self.last = list(range(len(preds)))
        for j, pairs in enumerate(preds):
            for p, _ in pairs:
                self.last[p] = j
        self.released: list[list[int]] = [[] for _ in preds]
        for p, j in enumerate(self.last):
            self.released[j].append(p)


class Incumbent:
    """The schedule of one mapping, against which M2A's re-mapping (§V-B) evaluates moving
    one layer: the fast path of `run` over the suffix from the moved layer, giving the
    same decision and, when the move is kept, the same ends (tests/test_chef_incremental.py
    checks it against `run`, which stays the definition).

    Why it is faster: almost every move tried is rejected, and is rejected because a layer
    near the end still ends at or after the bound. Once every input the rest of the
    schedule reads is no earlier than in the incumbent (each accelerator's free time, each
    end a later layer waits for, and no later layer reading the moved layer's place), every
    later end is no earlier either, the recurrence being monotone in its inputs even in
    floating point (`max`, and `+` of non-negative terms, round monotonically). If the
    incumbent has an end at or after the bound among those later layers, `run` would stop
    there with INF, so the move is rejected without scheduling them."""

    def __init__(self, reads: Reads, mapping: list[int], end: list[float]) -> None:
        n = len(end)
        self.reads, self.end = reads, end
        # tail[j]: the latest incumbent end from layer j on; no end at all past the last
        self.tail = [-INF] * (n + 1)
        for j in range(n - 1, -1, -1):
            self.tail[j] = max(end[j], self.tail[j + 1])
        self.last_on = {acc: j for j, acc in enumerate(mapping)}

    def moved(self, cost: list[list[float]], preds: list[list[tuple[int, int]]],
              per_byte: list[list[float]], mapping: list[int], i: int, was: int,
              free: list[float], end: list[float], bound: float) -> float:
        """`run(cost, preds, per_byte, mapping, range(i, n), free, end, bound)` where
        `mapping` is the incumbent's with layer i moved off accelerator `was`, and `free`
        and `end` are the incumbent's before layer i (both updated in place; `end` holds
        the new schedule when the result is below `bound`)."""
        old, tail, last_on = self.end, self.tail, self.last_on
        released = self.reads.released
        n = len(old)
        latest = 0.0
        # inputs of the rest earlier than the incumbent's: layers' ends, accelerators
        early: set[int] = set()
        early_accs: set[int] = set()
        if last_on[was] > i and free[was] < old[i]:  # `was` lost layer i, and is needed
            early_accs.add(was)
        reads_moved = self.reads.last[i]
        for j in range(i, n):
            acc = mapping[j]
            ready, xfer, row = free[acc], 0.0, per_byte[acc]
            for p, nbytes in preds[j]:
                if end[p] > ready:
                    ready = end[p]
                xfer += nbytes * row[mapping[p]]
            e = end[j] = free[acc] = ready + xfer + cost[j][acc]
            if e >= bound:
                return INF
            if e > latest:
                latest = e
            if e < old[j]:
                early.add(j)
                # layer i's new accelerator is free no earlier than the incumbent's: it
                # ran nothing between the layer before i and i
                if j != i and last_on[acc] > j:
                    early_accs.add(acc)
                else:
                    early_accs.discard(acc)
            else:
                early_accs.discard(acc)
            for p in released[j]:
                early.discard(p)
            if (not early and not early_accs and j >= reads_moved
                    and tail[j + 1] >= bound):
                return INF
        return latest
