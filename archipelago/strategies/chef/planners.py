"""The three planners of the row: `chef` (A2F + M2A), `chef-exact` (exhaustive, small DAGs)
and `h2h` (the baseline, whose method is h2h.py's). Each takes a DAG, a heterogeneous
cluster and a ChefConfig and returns a ScheduledDAG."""

import time
from collections.abc import Callable
from dataclasses import replace

from archipelago.errors import PartitionError
from archipelago.hardware.catalog import catalog
from archipelago.hardware.machines import Cluster
from archipelago.models.dag import ModelDAG
from archipelago.progress_bar import slow_progress
from archipelago.strategies.chef.a2f import (
    Evaluated,
    check_candidates,
    evaluate,
    initial_deployment,
    redeploy,
)
from archipelago.strategies.chef.deployment import deploy
from archipelago.strategies.chef.exact import all_deployments, optimal_mapping
from archipelago.strategies.chef.h2h import h2h_mapping
from archipelago.strategies.chef.ip_templates import IPTemplate, dram_bytes
from archipelago.strategies.chef.plan import ChefConfig, ScheduledDAG, check_dram
from archipelago.strategies.chef.simulate import (
    LayerCosts,
    Tables,
    dram_use,
    makespan,
    simulate,
)

# The paper's clusters hold 2 to 6 FPGAs (seeds/004 Table II). A2F re-deploys by evaluating
# a removal per accelerator, each a full M2A mapping, so its time grows with about the fourth
# power of the FPGA count: on 16 U280s vlocnet, the longest built-in DAG, takes 1.3 s of CPU
# (6.8 s before issue 36's incremental re-mapping; benchmarks/bench_chef_large.py).
MAX_CHEF_FPGAS = 16
# Table III's largest model, VLocNet, has 185 layers. M2A re-maps every wave of ready layers
# and A2F repeats M2A per removal: 500 layers planned in about 3 s on hacc, 2,000 in over
# 20 s, before issue 36 (500 on 16 U280s: 44.6 s of CPU then, 2.4 s now).
MAX_CHEF_LAYERS = 512
# Mapping a DAG keeps an FPGA-by-FPGA bandwidth table and an accelerator-by-accelerator
# transfer table; at 4,096 FPGAs those are 16 million entries each and H2H alone runs 6 s.
# The paper's clusters hold 2 to 6 FPGAs (seeds/004 Table II); 256 keeps any plan near 1 s.
MAX_FPGAS = 256


def check_cluster(cluster: Cluster) -> None:
    """The shape CHEF's planners need: at most MAX_FPGAS FPGAs, each with DSP slices to
    deploy accelerators on and DRAM banks to keep their data in (seeds/004 §V-A)."""
    if cluster.size > MAX_FPGAS:
        raise PartitionError(f"cluster '{cluster.name}' has {cluster.size} FPGAs; CHEF's "
                             f"planners map layers over at most {MAX_FPGAS}")
    for node in cluster.nodes:
        device = node.device
        if device.kind != "fpga" or node.resources.dsp < 1:
            fpgas = sorted(k for k, d in catalog().items() if d.kind == "fpga" and d.resources.dsp)
            raise PartitionError(f"node '{node.name}' of cluster '{cluster.name}' is a "
                                 f"{device.kind} ('{device.key}') without DSP slices; CHEF "
                                 f"places accelerators on FPGAs: {', '.join(fpgas)}")
        if not node.banks:
            raise PartitionError(f"node '{node.name}' of cluster '{cluster.name}' "
                                 f"('{device.key}') has no DRAM banks; CHEF keeps each "
                                 "layer's weights and features in its FPGA's DRAM")


def prepare(dag: ModelDAG, cluster: Cluster, config: ChefConfig) -> tuple:
    check_cluster(cluster)
    # a whole table spans all boards: those that fit here are kept; a named IP must fit
    ips = check_candidates(dag, cluster, config.candidates(cluster), config.candidates_source(),
                           named=config.ips is not None)
    check_dram(dag, cluster, [dram_bytes(dag, la) for la in dag.layers])
    return cluster, ips, LayerCosts(dag)


def _h2h_start(costs: LayerCosts, cluster: Cluster,
               ips: list[IPTemplate]) -> tuple[str, Evaluated] | None:
    """H2H's deployment as a start of CHEF's search: mapped by M2A's list mapping, and
    seeded with H2H's own mapping where that fits CHEF's DRAM model (each FPGA holds its
    layers' weights and features, §V-A; H2H may stream weights from the host instead), the
    faster after §V-B's re-mapping (ties: M2A's own). None where H2H has no deployment
    (more layer types than FPGAs) or M2A cannot map onto it within DRAM."""
    try:
        h2h = h2h_mapping(costs, cluster, ips)
        starts = [("h2h-deployment", evaluate(costs, cluster, h2h.placed))]
    except PartitionError:
        return None
    use = dram_use(h2h.own, h2h.mapping)
    if all(u <= c for u, c in zip(use, h2h.own.capacity, strict=True)):
        starts.append(("h2h-mapping", evaluate(costs, cluster, h2h.placed,
                                               initial=h2h.mapping)))
    return min(starts, key=lambda s: s[1].latency_s)


def plan_chef(dag: ModelDAG, cluster: Cluster, config: ChefConfig,
              progress: Callable[..., None] | None = None) -> ScheduledDAG:
    """§IV-§V: LP deployment, M2A (list mapping, re-mapping), idle-aware re-deployment,
    run from A2F's deployment and from H2H's (plan.ORIGINS says why); the faster end wins,
    A2F's on a tie, and a start M2A cannot map within DRAM is left out. H2H's mapping is
    never slower in CHEF's tables than in H2H's own (no host relay, no weight streaming)
    and every later step only shortens the latency, so `chef` never ends slower than `h2h`
    where H2H's mapping fits CHEF's DRAM model. `steps_latency_s` are Fig. 7's three steps
    from the winning start."""
    started = time.perf_counter()
    if cluster.size > MAX_CHEF_FPGAS:
        raise PartitionError(f"strategy 'chef' searches clusters of up to {MAX_CHEF_FPGAS} "
                             f"FPGAs; {cluster.name} has {cluster.size} (strategy "
                             "'h2h' maps larger ones)")
    if len(dag.layers) > MAX_CHEF_LAYERS:
        raise PartitionError(f"strategy 'chef' searches DAGs of up to {MAX_CHEF_LAYERS} "
                             f"layers; {dag.name} has {len(dag.layers)} (strategy 'h2h' "
                             "maps larger ones)")
    cluster, ips, costs = prepare(dag, cluster, config)
    seeded = _h2h_start(costs, cluster, ips)
    try:
        starts = [("a2f", evaluate(costs, cluster, initial_deployment(
            costs, cluster, ips, config.max_accs_per_fpga)))]
    except PartitionError:  # Eq. (2)'s deployment leaves a layer type too little DRAM
        if seeded is None:
            raise
        starts = []
    if seeded is not None:
        starts.append(seeded)
    origin, first, final = min(
        ((origin, first, redeploy(costs, cluster, ips, first, progress))
         for origin, first in starts), key=lambda s: s[2].latency_s)
    steps = (makespan(first.tables, first.initial), first.latency_s, final.latency_s)
    return ScheduledDAG("chef", dag, cluster, final.deployment, final.tables, final.schedule,
                        steps, time.perf_counter() - started, origin)


def plan_exact(dag: ModelDAG, cluster: Cluster, config: ChefConfig,
               progress: Callable[[], None] | None = None) -> ScheduledDAG:
    """Every deployment Eq. (1) allows, each mapped optimally: the joint optimum."""
    started = time.perf_counter()
    cluster, ips, costs = prepare(dag, cluster, config)
    best = None
    for placed in all_deployments(dag, cluster, ips, config.max_accs_per_fpga):
        tables = Tables(costs, cluster, deploy(cluster, placed))
        mapping, latency = optimal_mapping(tables)
        if best is None or latency < best[0]:
            best = (latency, tables, mapping)
        if progress:
            progress()
    assert best is not None  # check_candidates guarantees a deployment exists
    latency, tables, mapping = best
    return ScheduledDAG("chef-exact", dag, cluster, tables.deployment, tables,
                        simulate(tables, mapping), (latency,), time.perf_counter() - started,
                        "exhaustive")


def plan_h2h(dag: ModelDAG, cluster: Cluster, config: ChefConfig,
             progress: Callable[[], None] | None = None) -> ScheduledDAG:
    """The H2H baseline (h2h.py), its latency reckoned through host memory."""
    started = time.perf_counter()
    cluster, ips, costs = prepare(dag, cluster, config)
    h2h = h2h_mapping(costs, cluster, ips)
    return ScheduledDAG("h2h", dag, cluster, h2h.tables.deployment, h2h.tables,
                        simulate(h2h.tables, h2h.mapping), h2h.steps,
                        time.perf_counter() - started, "h2h")


# The strategies' planners as the registry (`__init__.py`) names them, each behind a bar.
def with_progress(planner: Callable[..., ScheduledDAG], what: str
                  ) -> Callable[[ModelDAG, Cluster, ChefConfig, object], ScheduledDAG]:
    """`planner(dag, cluster, config, progress)` as the registry calls it, behind a bar."""

    def run(dag: ModelDAG, cluster: Cluster, config: ChefConfig, workload: object
            ) -> ScheduledDAG:
        with slow_progress(f"{what} {dag.name}") as progress:
            plan = planner(dag, cluster, config, progress)
        return replace(plan, hls_precision=config.hls_precision)

    return run


chef_planner = with_progress(plan_chef, "CHEF search:")
h2h_planner = with_progress(plan_h2h, "H2H mapping:")
exact_planner = with_progress(plan_exact, "exact search:")
