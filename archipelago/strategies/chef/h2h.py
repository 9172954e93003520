"""The H2H baseline as seeds/004 describes it (§II-C, §III, §V; ref [1]): one fixed
accelerator per FPGA, all FPGAs hanging off a CPU host whose memory holds every weight and
feature, mapped in four steps:
  1. computation-prioritized mapping under zero local DRAM: each layer on the accelerator
     that computes it fastest; weights and features all move through the host;
  2. weight locality: each FPGA buffers in its DRAM the weights of its layers, largest
     transfer first, as far as the DRAM holds;
  3. activation transfer: features between adjacent layers on the same accelerator stay;
  4. data-locality-aware re-mapping (shared with CHEF-M2A).
The host link of every FPGA runs at twice BW_inter, so a relayed transfer (store + load)
costs what one FPGA-to-FPGA transfer at BW_inter does (§III: relaying halves the bandwidth).
The fixed accelerators: FPGAs sorted by DSPs, the smallest take one layer type each (the
types with least work first), the rest the type with most work; each gets the largest IP of
its type that fits. With fewer FPGAs than types, a type whose layers another chosen type
also runs is left out (depthwise convs then run on the Conv IP).
The planner that returns this as a plan is planners.plan_h2h; CHEF's search starts from it
too (planners.plan_chef).
"""

import copy
from dataclasses import dataclass

from archipelago.errors import PartitionError
from archipelago.hardware.machines import Cluster
from archipelago.models.dag import ModelDAG
from archipelago.strategies.chef.a2f import Placed, layer_types
from archipelago.strategies.chef.deployment import deploy
from archipelago.strategies.chef.ip_templates import BYTES_PER_ELEMENT, IPTemplate, ip_type
from archipelago.strategies.chef.m2a import remap
from archipelago.strategies.chef.simulate import INF, LayerCosts, Tables, makespan


def _types(dag: ModelDAG, ips: list[IPTemplate], fpgas: int) -> set[str]:
    """The IP types to deploy: those the layers need, fewer when a type's layers can all
    run on the remaining ones and the FPGAs are too few for one each."""
    have = set(layer_types(dag, {ip.type for ip in ips}))
    for t in sorted(have):
        rest = have - {t}
        if len(have) > fpgas and set(layer_types(dag, rest)) <= rest:
            have = rest
    return have


def fixed_accelerators(dag: ModelDAG, cluster: Cluster,
                       ips: list[IPTemplate]) -> list[tuple[int, IPTemplate]]:
    have = _types(dag, ips, cluster.size)
    work = {t: sum(la.macs for la in dag.layers if la.is_compute and ip_type(la, have) == t)
            for t in have}
    types = sorted(work, key=lambda t: (work[t], t))  # least work first
    fpgas = sorted(range(cluster.size), key=lambda i: (cluster.nodes[i].resources.dsp, i))
    if len(fpgas) < len(types):
        raise PartitionError(f"H2H puts one accelerator on each FPGA: {len(types)} layer "
                             f"types need {len(types)} FPGAs, '{cluster.name}' has "
                             f"{len(fpgas)}")
    wanted = types[:-1] + [types[-1]] * (len(fpgas) - len(types) + 1)
    placed = []
    for i, t in zip(fpgas, wanted, strict=True):
        f = cluster.nodes[i]
        fitting = [ip for ip in ips if ip.type == t and not ip.resources.exceeding(f.resources)]
        if not fitting:
            raise PartitionError(f"H2H: no {t} IP fits FPGA '{f.name}' ({f.resources.dsp} "
                                 f"DSPs, {f.resources.bram} BRAMs)")
        placed.append((i, max(fitting, key=lambda ip: (ip.resources.dsp, ip.name))))
    return placed


def _host_tables(t: Tables, host_Bps: float, buffered: set[int], local: bool) -> Tables:
    """The same deployment seen through host memory: weight loads for layers not
    buffered, every feature stored to and loaded from the host unless `local` keeps it on
    its accelerator."""
    h = copy.copy(t)
    weights = [la.weight_elements * BYTES_PER_ELEMENT
               for la in (t.dag.by_name[n] for n in t.names)]
    h.cost = [[c if c == INF or i in buffered else c + weights[i] / host_Bps for c in row]
              for i, row in enumerate(t.cost)]
    relay = 2 / host_Bps
    h.per_byte = [[0.0 if (local and a == b) else relay for b in range(t.n_accs)]
                  for a in range(t.n_accs)]
    h.dram = [weights[i] if i in buffered else 0 for i in range(t.n_layers)]
    return h


def _buffer_weights(t: Tables, mapping: list[int]) -> set[int]:
    """Step 2: per FPGA, the largest weights first into its DRAM."""
    free = list(t.capacity)
    buffered = set()
    sizes = [t.dag.by_name[n].weight_elements * BYTES_PER_ELEMENT for n in t.names]
    for i in sorted(range(t.n_layers), key=lambda i: -sizes[i]):
        f = t.fpga_of[mapping[i]]
        if sizes[i] and sizes[i] <= free[f]:
            free[f] -= sizes[i]
            buffered.add(i)
    return buffered


@dataclass(frozen=True)
class H2HMapping:
    """H2H's fixed accelerators (`placed`), its four steps' latencies, and its final
    mapping, reckoned on `tables` (step 3's: the deployment seen through host memory).
    `own` is the same deployment in CHEF's own tables (weights and features in FPGA DRAM,
    FPGA-to-FPGA transfers), where CHEF's search can start from it."""

    placed: Placed
    own: Tables
    tables: Tables
    mapping: list[int]
    steps: tuple[float, ...]


def h2h_mapping(costs: LayerCosts, cluster: Cluster, ips: list[IPTemplate]) -> H2HMapping:
    """H2H's four steps on the fixed accelerators of `fixed_accelerators`."""
    placed = fixed_accelerators(costs.dag, cluster, ips)
    base = Tables(costs, cluster, deploy(cluster, placed))
    n = cluster.size
    host_Bps = 2 * min(cluster.pair_Bps(i, j) for i in range(n) for j in range(n) if i != j) \
        if n > 1 else 2 * cluster.nodes[0].banks[0].bandwidth_Bps
    step1 = _host_tables(base, host_Bps, set(), local=False)
    mapping = [min(range(base.n_accs), key=lambda a: (base.cost[i][a], a))
               for i in range(base.n_layers)]
    buffered = _buffer_weights(base, mapping)
    step2 = _host_tables(base, host_Bps, buffered, local=False)
    step3 = _host_tables(base, host_Bps, buffered, local=True)
    final = remap(step3, mapping)
    steps = (makespan(step1, mapping), makespan(step2, mapping), makespan(step3, mapping),
             makespan(step3, final))
    return H2HMapping(placed, base, step3, final, steps)
