"""CHEF-M2A (seeds/004 §V): map the DAG's layers onto the deployed accelerators.

Step A, computation- and communication-aware mapping (§V-A): take the ready layers (those
whose predecessors are all mapped, one DAG wave), enumerate their placements on the
accelerators that can run them, keep those passing the DRAM budget check, and choose the
one with the smallest latency increment (the latest end among the wave). Waves with more
than `WAVE_COMBINATIONS` placements are placed one layer at a time, each where it ends
first (the paper enumerates all; the cap keeps 141-layer searches under a second).
Step B, data-locality-aware re-mapping (§V-B): move a layer next to a neighbour when the
DRAM budget allows and the latency shrinks; repeat until nothing improves. "Next to" is any
accelerator on a neighbour's FPGA, not only the neighbour's own: in a heterogeneous
deployment the neighbour often sits on an IP of another type (a Conv feeding an FC), and
moving onto its FPGA is what removes the inter-FPGA transfer.
"""

from itertools import product
from math import prod

from archipelago.errors import PartitionError
from archipelago.strategies.chef.schedule import INF, Incumbent, run
from archipelago.strategies.chef.simulate import Tables, dram_use, makespan

WAVE_COMBINATIONS = 64


class _Budget:
    """§V-A step 2, the DRAM budget check: after a placement, every FPGA still fits what
    it holds; the rest of each layer type fits the free DRAM of the FPGAs with an
    accelerator of that type; and the largest remaining layer fits the FPGA with most free
    DRAM. A compute layer's "type" is its layer type with the FPGAs whose accelerators run
    it (one IP type's FPGAs, or those of two for a depthwise conv a Conv IP also runs)."""

    def __init__(self, t: Tables) -> None:
        self.t = t
        self.use = [0] * len(t.capacity)
        self.free = list(t.capacity)  # capacity - use, per FPGA
        everywhere = list(range(len(t.capacity)))
        self.type_fpgas: dict[object, list[int]] = {"*": everywhere}
        self.key: list[object] = []
        for i in range(t.n_layers):
            fpgas = sorted({t.fpga_of[a] for a in t.runs_on[i]})
            key = (t.type_of[i], *fpgas) if t.compute[i] and fpgas else "*"
            if key != "*":
                self.type_fpgas[key] = fpgas
            self.key.append(key)
        self.need: dict[object, int] = {}
        for i in range(t.n_layers):
            self.need[self.key[i]] = self.need.get(self.key[i], 0) + t.dram[i]
        # room[key]: the free DRAM of key's FPGAs, kept up to date by commit
        self.room = {key: sum(self.free[f] for f in self.type_fpgas[key]) for key in self.need}
        self.keys_on = [[k for k in self.need if f in self.type_fpgas[k]] for f in everywhere]
        self.largest = sorted(range(t.n_layers), key=lambda i: -t.dram[i])
        self.skipped = 0  # largest[:skipped] are mapped
        self.mapped = [False] * t.n_layers

    def _unmapped(self) -> int:
        """Index into `largest` of the largest unmapped layer (len(largest) when none)."""
        while self.skipped < len(self.largest) and self.mapped[self.largest[self.skipped]]:
            self.skipped += 1
        return self.skipped

    def ok(self, placed: list[tuple[int, int]]) -> bool:
        t = self.t
        free = list(self.free)
        need = dict(self.need)
        for i, acc in placed:
            free[t.fpga_of[acc]] -= t.dram[i]
            need[self.key[i]] -= t.dram[i]
        if min(free) < 0:
            return False
        for key, bytes_left in need.items():
            if bytes_left > sum(free[f] for f in self.type_fpgas[key]):
                return False
        placing = {i for i, _ in placed}
        for k in range(self._unmapped(), len(self.largest)):
            if self.largest[k] not in placing:
                return t.dram[self.largest[k]] <= max(free)
        return True

    def always_ok(self, layers: list[int]) -> bool:
        """True when every placement of `layers` passes: checked as if all of them landed
        on every FPGA at once while still counting as remaining (each condition only gets
        harder with less free DRAM and more remaining bytes). Integer bytes throughout, so
        the kept sums `room` give what summing the FPGAs would."""
        t = self.t
        added = 0
        for i in layers:
            added += t.dram[i]
        if min(self.free) < added:
            return False
        for key, bytes_left in self.need.items():
            if bytes_left > self.room[key] - added * len(self.type_fpgas[key]):
                return False
        k = self._unmapped()
        return k == len(self.largest) or t.dram[self.largest[k]] <= max(self.free) - added

    def commit(self, placed: list[tuple[int, int]]) -> None:
        for i, acc in placed:
            f, size = self.t.fpga_of[acc], self.t.dram[i]
            self.use[f] += size
            self.free[f] -= size
            for key in self.keys_on[f]:
                self.room[key] -= size
            self.need[self.key[i]] -= size
            self.mapped[i] = True

    @property
    def remaining(self) -> list[int]:
        return [i for i in range(self.t.n_layers) if not self.mapped[i]]


def _try_wave(t: Tables, wave: list[int], accs: tuple[int, ...], mapping: list[int],
              free: list[float], end: list[float]) -> tuple[float, float]:
    """(latency increment, sum of ends) of placing `wave` on `accs`, in wave order. Leaves
    trial values in `mapping` and `end` of the wave's layers, which no layer reads before
    the wave is placed (layers of one wave do not depend on each other)."""
    for i, acc in zip(wave, accs, strict=True):
        mapping[i] = acc
    worst = run(t.cost, t.preds, t.per_byte, mapping, wave, list(free), end)
    total = 0.0
    for i in wave:
        total += end[i]
    return worst, total


def _best_single(t: Tables, i: int, opts: list[int], mapping: list[int], free: list[float],
                 end: list[float], budget: _Budget, roomy: bool) -> tuple[int] | None:
    """(accelerator,) where layer `i` alone ends first, the first such in `opts` order, or
    None when no placement passes the budget: _try_wave's choice for a one-layer wave (its
    key is then (end, end)), with schedule.run's arithmetic inlined in the same order of
    operations, since this loop is most of a large search (every layer x accelerator x
    deployment A2F tries)."""
    preds, per_byte, cost_i = t.preds[i], t.per_byte, t.cost[i]
    arrive = 0.0
    for p, _ in preds:
        if end[p] > arrive:
            arrive = end[p]
    sources = [(nbytes, mapping[p]) for p, nbytes in preds]
    best, best_end = None, INF
    for acc in opts:
        if not roomy and not budget.ok([(i, acc)]):
            continue
        ready, row, xfer = free[acc], per_byte[acc], 0.0
        if arrive > ready:
            ready = arrive
        for nbytes, src in sources:
            xfer += nbytes * row[src]
        e = ready + xfer + cost_i[acc]
        if e < best_end:
            best, best_end = acc, e
    return None if best is None else (best,)


def list_mapping(t: Tables) -> list[int]:
    """§V-A: wave by wave, the admissible placement with the smallest latency increment."""
    n = t.n_layers
    mapping, free, end = [-1] * n, [0.0] * t.n_accs, [0.0] * n
    budget = _Budget(t)
    waves: list[list[int]] = [[] for _ in range(max(t.wave_of) + 1)]
    for i in range(n):
        waves[t.wave_of[i]].append(i)
    for wave in waves:
        options = [t.runs_on[i] for i in wave]
        for i, opts in zip(wave, options, strict=True):
            if not opts:
                raise PartitionError(f"layer '{t.names[i]}' ({t.type_of[i]}): no deployed "
                                     f"accelerator runs it")
        if prod(len(o) for o in options) <= WAVE_COMBINATIONS:
            groups = [(wave, options)]
        else:
            groups = [([i], [opts]) for i, opts in zip(wave, options, strict=True)]
        for layers, opts in groups:
            roomy = budget.always_ok(layers)
            if len(layers) == 1:
                best = _best_single(t, layers[0], opts[0], mapping, free, end, budget, roomy)
                if best is None:
                    raise PartitionError(_no_room(t, layers[0], budget))
                mapping[layers[0]] = best[0]
                run(t.cost, t.preds, t.per_byte, mapping, layers, free, end)
                budget.commit([(layers[0], best[0])])
                continue
            best, best_key = None, (INF, INF)
            for accs in product(*opts):
                if not roomy and not budget.ok(list(zip(layers, accs, strict=True))):
                    continue
                key = _try_wave(t, layers, accs, mapping, free, end)
                if key < best_key:
                    best, best_key = accs, key
            if best is None:
                raise PartitionError(_no_room(t, layers[0], budget))
            for i, acc in zip(layers, best, strict=True):
                mapping[i] = acc
            run(t.cost, t.preds, t.per_byte, mapping, layers, free, end)
            budget.commit(list(zip(layers, best, strict=True)))
    return mapping


def _no_room(t: Tables, i: int, budget: _Budget) -> str:
    free = {t.cluster.nodes[f].name: c - u for f, (c, u) in
            enumerate(zip(t.capacity, budget.use, strict=True))}
    rest = sum(t.dram[j] for j in budget.remaining)
    return (f"layer '{t.names[i]}': the model's remaining weights and features "
            f"({rest / 2**20:,.1f} MiB) exceed the cluster's free DRAM "
            f"({', '.join(f'{k} {v / 2**20:,.1f} MiB' for k, v in free.items())})")


def remap(t: Tables, mapping: list[int]) -> list[int]:
    """§V-B: move layers next to their neighbours while the latency shrinks. A move of
    layer i re-schedules from i on (the prefix is unchanged), through Incumbent.moved."""
    mapping = list(mapping)
    use = dram_use(t, mapping)
    best = makespan(t, mapping)
    improved = True
    while improved:
        improved = False
        end = [0.0] * t.n_layers
        run(t.cost, t.preds, t.per_byte, mapping, range(t.n_layers), [0.0] * t.n_accs, end)
        incumbent = Incumbent(t.reads, mapping, end)
        free, prefix = [0.0] * t.n_accs, 0.0  # before layer i
        for i in range(t.n_layers):
            current = mapping[i]
            near = {t.fpga_of[mapping[j]] for j, _ in t.preds[i]} | \
                {t.fpga_of[mapping[j]] for j in t.succs[i]}
            for acc in [a for f in sorted(near) for a in t.accs_on[f] if a != current]:
                src, dst = t.fpga_of[current], t.fpga_of[acc]
                if t.cost[i][acc] == INF or (
                        src != dst and use[dst] + t.dram[i] > t.capacity[dst]):
                    continue
                bound = best * (1 - 1e-12)
                if prefix >= bound:  # an unchanged end already reaches it
                    continue
                mapping[i] = acc
                trial = list(incumbent.end)
                suffix = incumbent.moved(t.cost, t.preds, t.per_byte, mapping, i, current,
                                         list(free), trial, bound)
                latency = max(prefix, suffix)
                if latency < bound:
                    best, improved = latency, True
                    use[src] -= t.dram[i]
                    use[dst] += t.dram[i]
                    current = acc
                    incumbent = Incumbent(t.reads, mapping, trial)
                else:
                    mapping[i] = current
            free[mapping[i]] = incumbent.end[i]
            prefix = max(prefix, incumbent.end[i])
    return mapping


def m2a(t: Tables) -> tuple[list[int], list[int]]:
    """The initial mapping and the re-mapped one."""
    initial = list_mapping(t)
    return initial, remap(t, initial)
