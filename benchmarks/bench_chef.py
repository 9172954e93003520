"""CHEF search speed (issue #11 *Speed*): the whole search (A2F + M2A) and M2A alone for the
141-layer VLocNet on 4 FPGAs with 8 candidate IPs; the paper needs 13.5 s for M2A and up
to 78 s in all (seeds/004 §VII-E, Fig. 9).

    python -m benchmarks.bench_chef
"""

import time

from archipelago.hardware.cluster_file import cluster_from_dict
from archipelago.models.dag_zoo import builtin_dag
from archipelago.strategies.chef.m2a import m2a
from archipelago.strategies.chef.plan import ChefConfig
from archipelago.strategies.chef.planners import plan_chef
from archipelago.strategies.chef.simulate import LayerCosts, Tables, makespan

EIGHT_IPS = ("conv_8_16", "conv_16_16", "conv_16_32", "conv_32_32", "conv_32_64",
             "fc_8_16", "fc_16_32", "fc_32_32")
# Cluster 3 grown to four FPGAs as Table VI grows it (two U280s, two U250s, 3 GB/s P2P).
FOUR_FPGAS = {"name": "xacc-4", "topology": "switch",
              "link": {"latency_ns": 0, "bandwidth_gbytes_s": 3}, "nodes": [
    {"name": f"{dev}_{i}", "device": dev, "clock_mhz": mhz}
    for i in range(2) for dev, mhz in (("u280", 200), ("u250", 150))]}


def best_of(runs: int, fn):
    times, result = [], None
    for _ in range(runs):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return min(times), result


def main() -> None:
    dag = builtin_dag("vlocnet")
    cluster = cluster_from_dict(FOUR_FPGAS, "bench")
    config = ChefConfig(ips=EIGHT_IPS)
    total_s, plan = best_of(3, lambda: plan_chef(dag, cluster, config))
    tables = Tables(LayerCosts(dag), cluster, plan.deployment)
    m2a_s, (initial, final) = best_of(3, lambda: m2a(tables))
    print(f"VLocNet: {dag.compute_layers} Conv/FC layers ({len(dag.layers)} with pool/add), "
          f"{cluster.size} FPGAs, {len(EIGHT_IPS)} candidate IPs, "
          f"{len(plan.deployment.accs)} accelerators deployed")
    print(f"whole CHEF search (A2F + M2A): {total_s:.3f} s  (paper: up to 78 s; target < 5 s)")
    print(f"CHEF-M2A alone:                {m2a_s:.3f} s  (paper: 13.5 s; target < 1 s)")
    print(f"latency: steps {', '.join(f'{s * 1e3:.2f}' for s in plan.steps_latency_s)} ms; "
          f"M2A on the final deployment {makespan(tables, initial) * 1e3:.2f} -> "
          f"{makespan(tables, final) * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
