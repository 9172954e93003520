"""CHEF's search shortcuts (issue 36 point 3) against the plain computations they stand in
for. M2A's re-mapping fast path (schedule.Incumbent) against the recurrence (schedule.run,
the definition): on seeded random DAGs, mappings and bounds, every move of one layer gets
the same verdict and, when kept, the same ends; and `m2a.remap` gives the mapping §V-B's
loop gives when every move is scheduled by `run` from a fresh snapshot (`_plain_remap`
below, the search as it was written before the fast path). A2F's memo of evaluated
deployments against evaluating each afresh."""

import random
from types import SimpleNamespace

from archipelago.hardware.cluster import resolve_cluster
from archipelago.models.dag_zoo import builtin_dag
from archipelago.strategies.chef import a2f
from archipelago.strategies.chef.a2f import evaluate
from archipelago.strategies.chef.m2a import remap
from archipelago.strategies.chef.plan import ChefConfig
from archipelago.strategies.chef.planners import plan_chef
from archipelago.strategies.chef.schedule import INF, Incumbent, Reads, run
from archipelago.strategies.chef.simulate import dram_use, makespan


def _instance(rng: random.Random, dyadic: bool) -> SimpleNamespace:
    """A random layer DAG in wave order on 2-5 accelerators over 1-3 FPGAs. `dyadic`
    draws costs and transfer rates from a few multiples of 1/4, so ends tie often (the
    comparisons at equality are where a fast path would slip)."""
    n, n_accs = rng.randint(2, 12), rng.randint(2, 5)
    n_fpgas = rng.randint(1, min(3, n_accs))
    fpga_of = [a % n_fpgas for a in range(n_accs)]

    def draw() -> float:
        return rng.choice((0.25, 0.5, 1.0, 1.5, 2.0)) if dyadic else rng.uniform(0.01, 3)

    preds = [[(p, rng.choice((0, 4, 64, 100))) for p in sorted(rng.sample(range(j), min(
        j, rng.randint(0, 3))))] for j in range(n)]
    cost = []
    for _ in range(n):
        row = [draw() if rng.random() < 0.75 else INF for _ in range(n_accs)]
        if all(c == INF for c in row):
            row[rng.randrange(n_accs)] = draw()
        cost.append(row)
    per_byte = [[0.0 if a == b else draw() / 64 for b in range(n_accs)] for a in range(n_accs)]
    dram = [rng.randint(1, 10) for _ in range(n)]
    return SimpleNamespace(
        n_layers=n, n_accs=n_accs, fpga_of=fpga_of, preds=preds, cost=cost,
        per_byte=per_byte, dram=dram, reads=Reads(preds),
        succs=[[j for j in range(n) if any(p == i for p, _ in preds[j])] for i in range(n)],
        accs_on=[[a for a in range(n_accs) if fpga_of[a] == f] for f in range(n_fpgas)],
        capacity=[rng.randint(sum(dram) // n_fpgas, sum(dram)) for _ in range(n_fpgas)])


def _mapping(rng: random.Random, t: SimpleNamespace) -> list[int]:
    return [rng.choice([a for a in range(t.n_accs) if t.cost[i][a] < INF])
            for i in range(t.n_layers)]


def _snapshots(t, mapping: list[int]) -> tuple[list[float], list[list[float]]]:
    free, end, before = [0.0] * t.n_accs, [0.0] * t.n_layers, []
    for i in range(t.n_layers):
        before.append(list(free))
        run(t.cost, t.preds, t.per_byte, mapping, (i,), free, end)
    return end, before


def _plain_remap(t, mapping: list[int]) -> list[int]:
    """§V-B with each move scheduled by `run` over the suffix (the reference)."""
    mapping = list(mapping)
    use = dram_use(t, mapping)
    best = makespan(t, mapping)
    improved = True
    while improved:
        improved = False
        end, before = _snapshots(t, mapping)
        for i in range(t.n_layers):
            current = mapping[i]
            near = {t.fpga_of[mapping[j]] for j, _ in t.preds[i]} | \
                {t.fpga_of[mapping[j]] for j in t.succs[i]}
            for acc in [a for f in sorted(near) for a in t.accs_on[f] if a != current]:
                src, dst = t.fpga_of[current], t.fpga_of[acc]
                if t.cost[i][acc] == INF or (
                        src != dst and use[dst] + t.dram[i] > t.capacity[dst]):
                    continue
                mapping[i] = acc
                suffix = run(t.cost, t.preds, t.per_byte, mapping, range(i, t.n_layers),
                             list(before[i]), list(end), best * (1 - 1e-12))
                latency = max([0.0, *end[:i], suffix])
                if latency < best * (1 - 1e-12):
                    best, improved, current = latency, True, acc
                    use[src] -= t.dram[i]
                    use[dst] += t.dram[i]
                    end, before = _snapshots(t, mapping)
                else:
                    mapping[i] = current
    return mapping


def test_every_move_gets_run_s_verdict_and_ends():
    rng = random.Random(36)
    rejected = early = 0
    for case in range(300):
        t = _instance(rng, dyadic=case % 2 == 0)
        mapping = _mapping(rng, t)
        end, before = _snapshots(t, mapping)
        incumbent = Incumbent(t.reads, mapping, end)
        latency = max(end)
        # the search's own bound, bounds at ties with incumbent ends, and none at all
        bounds = {latency * (1 - 1e-12), latency, INF, *rng.sample(end, min(3, len(end)))}
        for i in range(t.n_layers):
            for acc in range(t.n_accs):
                if acc == mapping[i] or t.cost[i][acc] == INF:
                    continue
                moved = [*mapping[:i], acc, *mapping[i + 1:]]
                for bound in sorted(bounds):
                    plain_end, fast_end = list(end), list(end)
                    plain = run(t.cost, t.preds, t.per_byte, moved, range(i, t.n_layers),
                                list(before[i]), plain_end, bound)
                    fast = incumbent.moved(t.cost, t.preds, t.per_byte, moved, i,
                                           mapping[i], list(before[i]), fast_end, bound)
                    assert fast == plain, (case, i, acc, bound)
                    if plain < INF:
                        assert fast_end == plain_end, (case, i, acc, bound)
                    if plain == INF:  # rejected: did the fast path stop before `run`?
                        rejected += 1
                        early += fast_end != plain_end
    # some rejections stopped early (left ends `run` went on to rewrite): small random DAGs
    # end soon after most moves; VLocNet's re-mapping schedules 8.5x fewer layers
    assert early > rejected // 20, (early, rejected)


def test_a_later_chain_is_rejected_where_it_stops_being_earlier():
    """a -> b -> c -> d, 1 s each on accelerator 0 (ends 1, 2, 3, 4), 2 s on 1, no transfer
    cost. Moving a to 1 ends it at 2; b then ends at 3, no input of c or d is earlier than
    before, and d ended at 4 >= the bound: rejected after b, c left unscheduled (`run`
    goes on to c, which now ends at 4)."""
    cost, per_byte = [[1.0, 2.0]] * 4, [[0.0, 0.0], [0.0, 0.0]]
    preds = [[], [(0, 8)], [(1, 8)], [(2, 8)]]
    end = [1.0, 2.0, 3.0, 4.0]
    incumbent = Incumbent(Reads(preds), [0, 0, 0, 0], end)
    trial = list(end)
    assert incumbent.moved(cost, preds, per_byte, [1, 0, 0, 0], 0, 0, [0.0, 0.0], trial,
                           4.0 * (1 - 1e-12)) == INF
    assert trial == [2.0, 3.0, 3.0, 4.0]
    plain = list(end)
    assert run(cost, preds, per_byte, [1, 0, 0, 0], range(4), [0.0, 0.0], plain,
               4.0 * (1 - 1e-12)) == INF
    assert plain == [2.0, 3.0, 4.0, 4.0]


def test_remap_maps_as_the_plain_search():
    rng = random.Random(11)
    changed = 0
    for case in range(400):
        t = _instance(rng, dyadic=case % 2 == 1)
        mapping = _mapping(rng, t)
        expected = _plain_remap(t, mapping)
        assert remap(t, mapping) == expected, case
        changed += expected != mapping
    assert changed > 100  # the re-mapping moved layers in many cases: a real search


def test_redeploy_meets_each_deployment_once_and_ends_as_without_memo(monkeypatch):
    """A2F's re-deployment evaluates a deployment once however often its removals and
    replacements reach it, and plans as when it evaluates every one afresh."""
    dag, cluster = builtin_dag("cnn-lstm"), resolve_cluster("hacc")
    calls = []

    def counted(*args, **how):
        calls.append(how)
        return evaluate(*args, **how)

    monkeypatch.setattr(a2f, "evaluate", counted)
    memo = plan_chef(dag, cluster, ChefConfig()).to_dict()
    once = len(calls)
    monkeypatch.setattr(a2f, "_memo", lambda seen, *args, **how: counted(*args, **how))
    fresh = plan_chef(dag, cluster, ChefConfig()).to_dict()
    assert len(calls) - once > once  # the search meets deployments again and again
    memo.pop("search_s"), fresh.pop("search_s")
    assert memo == fresh
