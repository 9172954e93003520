"""M2A's one-layer placement loop against the general wave search it stands in for: the
same mapping, accelerator by accelerator, on VLocNet over a mixed 8-FPGA cluster."""

from archipelago.hardware.cluster_file import cluster_from_dict
from archipelago.models.dag_zoo import builtin_dag
from archipelago.strategies.chef import m2a
from archipelago.strategies.chef.a2f import initial_deployment
from archipelago.strategies.chef.deployment import deploy
from archipelago.strategies.chef.ip_templates import builtin_ips
from archipelago.strategies.chef.schedule import INF
from archipelago.strategies.chef.simulate import LayerCosts, Tables

MIXED = {"name": "mixed-8", "topology": "switch",
         "link": {"latency_ns": 0, "bandwidth_gbytes_s": 3},
         "nodes": [{"name": f"{dev}_{i}", "device": dev, "clock_mhz": 200}
                   for i in range(2) for dev in ("u280", "u250", "vcu118", "zcu102")]}


def _by_try_wave(t, i, opts, mapping, free, end, budget, roomy):
    """The general search's choice for a one-layer wave (list_mapping before the loop)."""
    best, best_key = None, (INF, INF)
    for acc in opts:
        if not roomy and not budget.ok([(i, acc)]):
            continue
        key = m2a._try_wave(t, [i], (acc,), mapping, free, end)
        if key < best_key:
            best, best_key = (acc,), key
    return best


def test_one_layer_loop_maps_as_the_wave_search(monkeypatch):
    dag = builtin_dag("vlocnet")
    cluster = cluster_from_dict(MIXED, "test")
    costs = LayerCosts(dag)
    ips = [ip for ip in builtin_ips().values() if ip.type in {"conv", "fc"}]
    tables = Tables(costs, cluster, deploy(cluster, initial_deployment(costs, cluster, ips, 4)))
    monkeypatch.setattr(m2a, "WAVE_COMBINATIONS", 0)  # every wave placed one layer at a time
    fast = m2a.list_mapping(tables)
    monkeypatch.setattr(m2a, "_best_single", _by_try_wave)
    assert m2a.list_mapping(tables) == fast
    assert len(set(fast)) > 4  # layers spread over many accelerators: a real choice each time
