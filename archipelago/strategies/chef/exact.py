"""Exact baselines for small DAGs (seeds/004 §VII-E): the optimal mapping by enumerating
every layer-to-accelerator assignment (Table VII), and the optimal deployment by trying
every deployment Eq. (1) allows (Table VI), so CHEF's near-optimality is measured.

The mapping search walks layers in wave order and prunes a branch once its partial
latency reaches the best found: adding a layer never lowers the latency of a schedule, so
no optimum is cut. Both refuse instances above a stated size instead of running for days.
"""

from collections.abc import Iterator
from itertools import combinations_with_replacement, product

from archipelago.errors import PartitionError
from archipelago.hardware.machines import Cluster
from archipelago.models.dag import ModelDAG, validate_dag
from archipelago.strategies.chef.a2f import layer_types
from archipelago.strategies.chef.deployment import fits
from archipelago.strategies.chef.ip_templates import IPTemplate
from archipelago.strategies.chef.schedule import INF, run
from archipelago.strategies.chef.simulate import Tables

MAX_MAPPINGS = 4**12  # N^M above this is refused (12 layers on 4 accelerators)
MAX_DEPLOYMENTS = 2000


def optimal_mapping(t: Tables, limit: int = MAX_MAPPINGS) -> tuple[list[int], float]:
    options = [[a for a in range(t.n_accs) if t.cost[i][a] < INF] for i in range(t.n_layers)]
    space = 1
    for opts in options:
        space *= max(1, len(opts))
    if space > limit:
        raise PartitionError(f"exact mapping of {t.n_layers} layers on {t.n_accs} "
                             f"accelerators would enumerate {space:.3g} mappings (limit "
                             f"{limit:.3g}); use a subnetwork of at most ~10 layers")
    n = t.n_layers
    mapping, end, use = [-1] * n, [0.0] * n, [0] * len(t.capacity)
    best: list = [INF, None]

    def walk(i: int, free: list[float], latest: float) -> None:
        if latest >= best[0]:
            return
        if i == n:
            best[0], best[1] = latest, list(mapping)
            return
        for acc in options[i]:
            f = t.fpga_of[acc]
            if use[f] + t.dram[i] > t.capacity[f]:
                continue
            mapping[i], was_free = acc, free[acc]
            finish = run(t.cost, t.preds, t.per_byte, mapping, (i,), free, end)
            use[f] += t.dram[i]
            walk(i + 1, free, max(latest, finish))
            use[f] -= t.dram[i]
            free[acc] = was_free

    walk(0, [0.0] * t.n_accs, 0.0)
    if best[1] is None:
        raise PartitionError("no mapping fits the cluster's DRAM")
    return best[1], best[0]


def _fpga_options(fpga, ips: list[IPTemplate], max_per_fpga: int,
                  cluster: Cluster, index: int) -> list[tuple[IPTemplate, ...]]:
    out: list[tuple[IPTemplate, ...]] = [()]
    for k in range(1, max_per_fpga + 1):
        for combo in combinations_with_replacement(ips, k):
            if fits(cluster, [(index, ip) for ip in combo]):
                out.append(combo)
    return out


def all_deployments(dag: ModelDAG, cluster: Cluster, ips: list[IPTemplate],
                    max_per_fpga: int,
                    limit: int = MAX_DEPLOYMENTS) -> Iterator[list[tuple[int, IPTemplate]]]:
    """Every deployment satisfying Eq. (1) with at most `max_per_fpga` IPs per FPGA."""
    types = set(layer_types(dag, {ip.type for ip in ips}))
    usable = [ip for ip in ips if ip.type in types]
    per_fpga = [_fpga_options(f, usable, max_per_fpga, cluster, i)
                for i, f in enumerate(cluster.nodes)]
    space = 1
    for opts in per_fpga:
        space *= len(opts)
    if space > limit:
        raise PartitionError(f"exact deployment would try {space} deployments (limit "
                             f"{limit}); use fewer IPs, FPGAs or accelerators per FPGA")
    for choice in product(*per_fpga):
        placed = [(i, ip) for i, combo in enumerate(choice) for ip in combo]
        if {ip.type for _, ip in placed} >= types:
            yield placed


def prefix_dag(dag: ModelDAG, layers: int) -> ModelDAG:
    """The first `layers` layers in wave order: closed under dependencies, so a valid DAG
    (the 9-10-layer subnetworks of Tables VI and VII)."""
    keep = dag.order[:layers]
    sub = ModelDAG(name=f"{dag.name}[:{layers}]", layers=tuple(dag.by_name[n] for n in keep),
                   inputs={k: v for k, v in dag.inputs.items() if k in keep})
    return validate_dag(sub, sub.name)
