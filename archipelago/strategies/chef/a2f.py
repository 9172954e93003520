"""CHEF-A2F (seeds/004 §IV): which accelerator IPs to deploy on which FPGA.

Stage 1, coarse-grained initial deploying (§IV-A): the integer program of Eq. (2) under
Eq. (1): maximise the summed throughput of the deployed accelerators subject to each FPGA's
DSPs and BRAMs, with at least one accelerator of every layer type (of the IP type built
for it, ip_templates.ip_type: a depthwise conv needs a dwconv IP when a candidate is one,
else it counts as a conv layer; a MatMul counts as an fc layer). The paper solves it with
PuLP; here OR-Tools CP-SAT solves it exactly (throughputs scaled to integers). Throughput of
IP a on FPGA i is the MAC rate it reaches on the model's layers of its type (their MACs over
their summed latency at that FPGA's clock and bank bandwidth).
Stage 2, idle-aware re-deployment (§IV-B steps 1-4): remove the accelerator with the lowest
duty cycle (never the last of its type), try replacing each remaining accelerator of its
FPGA by another IP of the same type within the DSP/BRAM budget, map every candidate, re-map
the best with CHEF-M2A and keep it only if it shortens the latency; repeat from the new
duty cycles, moving to the next-least-busy accelerator when a removal gains nothing.
Candidates are ranked by M2A's list mapping alone and only the best is re-mapped (the paper
re-maps each): re-mapping is 3/4 of M2A's time and rarely reorders candidates.
"""

from collections.abc import Callable
from dataclasses import dataclass

from archipelago.errors import PartitionError, elide
from archipelago.hardware.machines import Cluster
from archipelago.models.dag import FC, LSTM, Conv, MatMul, ModelDAG
from archipelago.strategies.chef.deployment import Deployment, deploy, fits
from archipelago.strategies.chef.ip_templates import IPTemplate, ip_type, ip_types
from archipelago.strategies.chef.m2a import list_mapping, remap
from archipelago.strategies.chef.simulate import LayerCosts, Schedule, Tables, simulate

THROUGHPUT_SCALE = 10**6  # CP-SAT needs integer objective weights
Placed = list[tuple[int, IPTemplate]]


def layer_types(dag: ModelDAG, have: set[str]) -> list[str]:
    """The IP types the DAG's compute layers need when the candidates' types are `have`."""
    return sorted({ip_type(la, have) for la in dag.layers if la.is_compute})


def _shape(layer: Conv | FC | LSTM | MatMul) -> str:
    """A compute layer in a few words: `conv 3x3, 64->128`, `conv 3x3, 32->32, groups 32`,
    `fc 512->10`, `lstm 256->512`, `gru 256->512 x2`, `matmul 197x64 @ 64x197`."""
    if isinstance(layer, Conv):
        rows, cols = layer.window
        groups = f", groups {layer.groups}" if layer.groups > 1 else ""
        return f"conv {rows}x{cols}, {layer.in_ch}->{layer.out_ch}{groups}"
    if isinstance(layer, FC):
        return f"fc {layer.in_features}->{layer.out_features}"
    if isinstance(layer, MatMul):
        batch = f"{layer.batch} x " if layer.batch > 1 else ""
        return f"matmul {batch}{layer.rows}x{layer.inner} @ {layer.inner}x{layer.cols}"
    both = " x2" if layer.directions == 2 else ""
    return f"{layer.cell} {layer.embed}->{layer.hidden}{both}"


def _refusal(ip: IPTemplate, cluster: Cluster) -> str:
    """What keeps `ip` off every FPGA, shown on the FPGA it misses by the fewest resources:
    "needs 5,120 DSP, fpga 'a' has 1 DSP"."""
    need = ip.resources
    node = min(cluster.nodes, key=lambda f: (len(need.exceeding(f.resources)),
                                             -f.resources.dsp, -f.resources.bram))
    short = need.exceeding(node.resources)
    wants = " and ".join(f"{getattr(need, r):,} {r.upper()}" for r in short)
    has = " and ".join(f"{getattr(node.resources, r):,} {r.upper()}" for r in short)
    return f"needs {wants}, fpga '{node.name}' has {has}"


def check_candidates(dag: ModelDAG, cluster: Cluster, ips: list[IPTemplate],
                     source: str, named: bool = False) -> list[IPTemplate]:
    """The candidates that fit some FPGA. One line for a compute layer none of them runs,
    naming the layer, the candidates (or that there are none) and `source` (where the list
    came from), and per IP of its type the FPGA limit that refused it; `named` IPs (the
    user's own list) must each fit some FPGA."""
    fitting = [ip for ip in ips
               if any(not ip.resources.exceeding(f.resources) for f in cluster.nodes)]
    if named and len(fitting) < len(ips):
        ip = next(ip for ip in ips if ip not in fitting)
        raise PartitionError(f"IP '{ip.name}' fits no FPGA of '{cluster.name}': "
                             f"it {_refusal(ip, cluster)} (candidates from {source})")
    layer = next((la for la in dag.layers
                  if la.is_compute and not any(ip.runs(la) for ip in fitting)), None)
    if layer is None:
        return fitting
    head = f"layer '{layer.name}' ({_shape(layer)})"
    kinds = " or ".join(ip_types(layer))
    of_type = sorted((ip for ip in ips if ip.runs(layer)),
                     key=lambda ip: (ip.resources.dsp, ip.resources.bram, ip.name))
    if not of_type:
        names = elide(", ".join(ip.name for ip in ips), 100) or "none"
        raise PartitionError(f"{head}: no candidate IP is a {kinds} IP; candidates: "
                             f"{names}, from {source}")
    refusals = elide("; ".join(f"ip '{ip.name}' {_refusal(ip, cluster)}" for ip in of_type),
                     160)
    raise PartitionError(f"{head}: no {kinds} IP fits any FPGA of '{cluster.name}': "
                         f"{refusals} (candidates from {source})")


def throughput(costs: LayerCosts, cluster: Cluster, fpga: int, ip: IPTemplate,
               have: set[str]) -> float:
    """MAC/s of `ip` on FPGA `fpga` over the model's layers of its type (bank unshared),
    a layer's type being the IP type it counts under among `have`."""
    node = cluster.nodes[fpga]
    column = costs.column(ip, node.clock_hz, node.banks[0].bandwidth_Bps)
    layers = [costs.dag.by_name[n] for n in costs.dag.order]
    picked = [(la.macs, s) for la, s in zip(layers, column, strict=True)
              if la.is_compute and ip_type(la, have) == ip.type]
    return sum(m for m, _ in picked) / sum(s for _, s in picked)


def objective_weights(costs: LayerCosts, cluster: Cluster,
                      ips: list[IPTemplate]) -> dict[tuple[int, str], int]:
    """thp_ita of Eq. (2), scaled so the best is THROUGHPUT_SCALE, as integers."""
    have = {ip.type for ip in ips}
    thp = {(i, ip.name): throughput(costs, cluster, i, ip, have)
           for i in range(len(cluster.nodes)) for ip in ips}
    top = max(thp.values())
    return {k: round(THROUGHPUT_SCALE * v / top) for k, v in thp.items()}


def initial_deployment(costs: LayerCosts, cluster: Cluster, ips: list[IPTemplate],
                       max_per_fpga: int) -> Placed:
    """Eq. (2) under Eq. (1), solved exactly with CP-SAT."""
    from ortools.sat.python import cp_model

    types = layer_types(costs.dag, {ip.type for ip in ips})
    usable = [ip for ip in ips if ip.type in types]
    weight = objective_weights(costs, cluster, usable)
    model = cp_model.CpModel()
    x = {}
    for i, node in enumerate(cluster.nodes):
        f = node.resources
        for ip in usable:
            need = ip.resources
            bound = min(f.dsp // need.dsp, f.bram // max(need.bram, 1), max_per_fpga)
            x[i, ip.name] = model.new_int_var(0, bound, f"x_{i}_{ip.name}")
        model.add(sum(ip.resources.dsp * x[i, ip.name] for ip in usable) <= f.dsp)
        model.add(sum(ip.resources.bram * x[i, ip.name] for ip in usable) <= f.bram)
        model.add(sum(x[i, ip.name] for ip in usable) <= max_per_fpga)
    for t in types:
        model.add(sum(x[i, ip.name] for i in range(len(cluster.nodes))
                      for ip in usable if ip.type == t) >= 1)
    model.maximize(sum(weight[k] * v for k, v in x.items()))
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = 0
    status = solver.solve(model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        raise PartitionError(f"no deployment on '{cluster.name}' holds one IP of each layer "
                             f"type ({', '.join(types)}) within the FPGAs' DSPs and BRAMs")
    by_name = {ip.name: ip for ip in usable}
    return [(i, by_name[name]) for (i, name), v in x.items() for _ in range(solver.value(v))]


@dataclass(frozen=True)
class Evaluated:
    placed: Placed
    deployment: Deployment
    tables: Tables
    initial: list[int]
    mapping: list[int]
    schedule: Schedule

    @property
    def latency_s(self) -> float:
        return self.schedule.latency_s


def evaluate(costs: LayerCosts, cluster: Cluster, placed: Placed,
             remapped: bool = True, initial: list[int] | None = None) -> Evaluated:
    """Deploy and map; `remapped=False` stops after M2A's list mapping (a cheap ranking).
    `initial` (accelerator per layer of this deployment) replaces the list mapping as the
    start of §V-B's re-mapping: the search seeded with another planner's mapping."""
    deployment = deploy(cluster, placed)
    tables = Tables(costs, cluster, deployment)
    if initial is None:
        initial = list_mapping(tables)
    mapping = remap(tables, initial) if remapped else initial
    return Evaluated(placed, deployment, tables, initial, mapping, simulate(tables, mapping))


def _memo(seen: dict[tuple, Evaluated], costs: LayerCosts, cluster: Cluster, placed: Placed,
          **how) -> Evaluated:
    """evaluate(costs, cluster, placed, **how), once per deployment in `seen`."""
    key = deploy(cluster, placed).accs
    if key not in seen:
        seen[key] = evaluate(costs, cluster, placed, **how)
    return seen[key]


def _replacements(cluster: Cluster, ips: list[IPTemplate], current: Evaluated,
                  removed: int) -> list[Placed]:
    """§IV-B step 2: without accelerator `removed`, each other accelerator of its FPGA
    swapped for another IP of its type that fits (and the removal alone)."""
    accs = current.deployment.accs
    base = [(a.fpga, a.ip) for j, a in enumerate(accs) if j != removed]
    options = [base]
    fpga = accs[removed].fpga
    for k, (f, ip) in enumerate(base):
        if f != fpga:
            continue
        for other in ips:
            if other.type == ip.type and other.name != ip.name:
                candidate = [*base[:k], (f, other), *base[k + 1:]]
                if fits(cluster, candidate):
                    options.append(candidate)
    return options


def redeploy(costs: LayerCosts, cluster: Cluster, ips: list[IPTemplate],
             start: Evaluated, progress: Callable[..., None] | None = None) -> Evaluated:
    """§IV-B steps 1-4 until no removal and replacement shortens the latency. `progress`
    hears each step's removals to try (`total=`, `what=`), then `progress()` per removal
    tried: a step maps every replacement of every accelerator on the removed one's FPGA,
    minutes with thousands of IP templates."""
    current, step = start, 0
    # evaluations by deployment content: the same IPs on the same banks map the same way,
    # and a search meets one deployment many times (replacements of different removals,
    # across steps, and the ranked best re-mapped): 92 distinct of 307 for bench_chef's
    listed: dict[tuple, Evaluated] = {}
    remapped: dict[tuple, Evaluated] = {}
    while True:
        accs = current.deployment.accs
        per_type: dict[str, int] = {}
        for a in accs:
            per_type[a.ip.type] = per_type.get(a.ip.type, 0) + 1
        duty = current.schedule.duty_cycles(len(accs))
        order = sorted((j for j, a in enumerate(accs) if per_type[a.ip.type] > 1),
                       key=lambda j: (duty[j], j))
        step += 1
        if progress:
            progress(total=len(order), what=f"step {step}: removals")
        better = None
        for removed in order:
            ranked = [_memo(listed, costs, cluster, p, remapped=False)
                      for p in _replacements(cluster, ips, current, removed)]
            if progress:
                progress()
            top = min(ranked, key=lambda e: e.latency_s)
            best = _memo(remapped, costs, cluster, top.placed, initial=top.initial)
            if best.latency_s < current.latency_s * (1 - 1e-9):
                better = best
                break
        if better is None:
            return current
        current = better
