"""CHEF search time on large inputs (issue #25 point 6: "16-FPGA VLocNet under 10 s"):
VLocNet (141 layers) on 16 U280s and on 16 mixed FPGAs, a 500-layer DAG on 16 U280s, and
VLocNet on HACC with 4,000 candidate IP templates.

    python -m benchmarks.bench_chef_large
"""

import tempfile
import time
from pathlib import Path

import yaml

from archipelago.hardware.cluster import resolve_cluster
from archipelago.hardware.cluster_file import cluster_from_dict
from archipelago.models.dag import ModelDAG, dag_from_dict
from archipelago.models.dag_zoo import builtin_dag
from archipelago.strategies.chef.plan import ChefConfig
from archipelago.strategies.chef.planners import plan_chef

# Sixteen FPGAs of Table II's kinds (seeds/004 §VII-A) on a 3 GB/s switch.
MIXED_16 = {"name": "mixed-16", "topology": "switch",
            "link": {"latency_ns": 0, "bandwidth_gbytes_s": 3},
            "nodes": [{"name": f"{dev}_{i}", "device": dev, "clock_mhz": 200}
                      for i in range(4) for dev in ("u280", "u250", "vcu118", "zcu102")]}


def branches_dag(branches: int = 4, depth: int = 125) -> ModelDAG:
    """`branches` independent models (MMMT) of `depth - 1` 3x3 convs and an FC each."""
    layers = []
    for b in range(branches):
        for d in range(depth - 1):
            ch = 16 << (d % 4)
            layers.append({"name": f"b{b}c{d}", "type": "conv", "modality": f"m{b}",
                           "in_ch": 3 if d == 0 else 16 << ((d - 1) % 4), "out_ch": ch,
                           "out_rows": 28, "out_cols": 28, "kernel": 3, "padding": 1,
                           "deps": [f"b{b}c{d - 1}"] if d else []})
        layers.append({"name": f"b{b}fc", "type": "fc", "modality": f"m{b}",
                       "in_features": 28 * 28 * (16 << ((depth - 2) % 4)), "out_features": 10,
                       "deps": [f"b{b}c{depth - 2}"]})
    return dag_from_dict({"name": f"branches-{branches * depth}", "layers": layers}, "bench")


def many_ips(count: int = 4000) -> dict:
    """`count` conv and FC templates of every parallelism and tile size in a grid."""
    ips = {}
    for tn in (4, 8, 16, 32):
        for tm in (8, 16, 32, 64):
            ips[f"fc_{tn}_{tm}"] = {"type": "fc", "tn": tn, "tm": tm}
            for tr in range(4, 32):
                for tc in range(4, 32):
                    if len(ips) < count:
                        ips[f"conv_{tn}_{tm}_{tr}x{tc}"] = {"type": "conv", "tn": tn, "tm": tm,
                                                           "tr": tr, "tc": tc, "k_max": 7}
    return {"ips": ips}


def timed(label: str, dag: ModelDAG, cluster, config: ChefConfig) -> None:
    start = time.perf_counter()
    plan = plan_chef(dag, cluster, config)
    print(f"{label:40s} {time.perf_counter() - start:6.2f} s  latency "
          f"{plan.schedule.latency_s * 1e3:.3f} ms, {len(plan.deployment.accs)} accelerators")


def main() -> None:
    vlocnet = builtin_dag("vlocnet")
    timed("vlocnet on 16xu280", vlocnet, resolve_cluster("16xu280"), ChefConfig())
    timed("vlocnet on 16 mixed FPGAs", vlocnet, cluster_from_dict(MIXED_16, "bench"),
          ChefConfig())
    timed("500 layers on 16xu280", branches_dag(), resolve_cluster("16xu280"), ChefConfig())
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "ips.yaml"
        path.write_text(yaml.safe_dump(many_ips()))
        timed("vlocnet on hacc, 4,000 IP templates", vlocnet, resolve_cluster("hacc"),
              ChefConfig(ip_file=str(path)))


if __name__ == "__main__":
    main()
