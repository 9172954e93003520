"""The chef, chef-exact and h2h planners on the built-in models and clusters."""

import pytest

from archipelago.errors import ArchipelagoError, PartitionError
from archipelago.hardware.cluster import resolve_cluster
from archipelago.models.dag_zoo import builtin_dag
from archipelago.strategies.chef.exact import prefix_dag
from archipelago.strategies.chef.plan import ChefConfig
from archipelago.strategies.chef.planners import plan_chef, plan_exact, plan_h2h

SMALL = ChefConfig(ips=("conv_16_32", "conv_32_32", "fc_16_32"), max_accs_per_fpga=2)


def test_chef_plan_on_hacc_reports_what_the_issue_asks():
    plan = plan_chef(builtin_dag("casua-surf"), resolve_cluster("hacc"), ChefConfig())
    out = plan.to_dict()
    assert set(out) >= {"latency_s", "deployment", "mapping", "comm_ratio",
                        "steps_latency_s", "search_s"}
    step1, step2, step3 = out["steps_latency_s"]
    assert step1 >= step2 >= step3 == out["latency_s"]
    assert len(out["mapping"]) == len(builtin_dag("casua-surf").layers)
    assert max(m["end_s"] for m in out["mapping"]) == out["latency_s"]
    for fpga in out["deployment"]:
        assert fpga["dsp_used"] <= fpga["dsp_available"]
        assert fpga["bram_used"] <= fpga["bram_available"]
    # every layer starts after its dependencies end
    ends = {m["layer"]: m["end_s"] for m in out["mapping"]}
    dag = builtin_dag("casua-surf")
    for m in out["mapping"]:
        assert all(ends[d] <= m["start_s"] + 1e-15 for d in dag.by_name[m["layer"]].deps)


@pytest.mark.parametrize("model", ["vfs", "facebag"])
def test_chef_near_the_exact_optimum_on_ten_layers(model):
    dag = prefix_dag(builtin_dag(model), 10)
    cluster = resolve_cluster("chef-cluster3")
    heuristic, exact = plan_chef(dag, cluster, SMALL), plan_exact(dag, cluster, SMALL)
    assert exact.latency_s <= heuristic.latency_s * (1 + 1e-9)
    assert heuristic.latency_s <= 1.23 * exact.latency_s  # Table VI's worst ratio


def test_exact_refuses_large_dags():
    with pytest.raises(PartitionError, match="use a subnetwork"):
        plan_exact(builtin_dag("vfs"), resolve_cluster("hacc"), SMALL)


def test_h2h_steps_and_one_accelerator_per_fpga():
    cluster = resolve_cluster("chef-cluster1").with_bandwidth(0.125)
    plan = plan_h2h(builtin_dag("cnn-lstm"), cluster, ChefConfig())
    assert sorted(a.fpga for a in plan.deployment.accs) == list(range(6))
    s = plan.steps_latency_s
    assert len(s) == 4 and s[0] >= s[1] >= s[2] >= s[3] == plan.latency_s


def test_bad_inputs_are_one_line():
    hacc = resolve_cluster("hacc")
    with pytest.raises(PartitionError, match="layer 'rgb_lstm' \\(lstm 256->256\\): no "
                       "candidate IP is a lstm IP; candidates: conv_8_16, from the engine"):
        plan_chef(builtin_dag("cnn-lstm"), hacc, ChefConfig(ips=("conv_8_16",)))
    with pytest.raises(ArchipelagoError, match="unknown IP"):
        plan_chef(builtin_dag("vfs"), hacc, ChefConfig(ips=("conv_1_1",)))
    small = resolve_cluster("chef-cluster2")
    # 32 x 64 MAC lanes at 5 DSPs each (seeds/004 §I) = 10,240; the U50LV has 5,952
    with pytest.raises(PartitionError, match="'conv_32_64' fits no FPGA of 'chef-cluster2': "
                       "it needs 10,240 DSP, fpga 'u50lv' has 5,952 DSP"):
        plan_chef(builtin_dag("vfs"), small, ChefConfig(ips=("conv_32_64", "fc_8_16")))


def test_cluster_size_bounds_name_the_limit(monkeypatch):
    """A2F's search stops at MAX_CHEF_FPGAS (H2H maps larger clusters); any heterogeneous
    cluster at MAX_FPGAS. Checked at a lowered bound of 2: 2 FPGAs plan, 3 are refused."""
    import archipelago.strategies.chef.planners as planners
    from archipelago.strategies.chef.planners import MAX_FPGAS

    def u280s(count: int):
        return resolve_cluster(f"{count}xu280").with_bandwidth(3)

    monkeypatch.setattr(planners, "MAX_CHEF_FPGAS", 2)
    dag = prefix_dag(builtin_dag("vfs"), 10)
    assert plan_chef(dag, u280s(2), SMALL).latency_s > 0
    with pytest.raises(PartitionError, match=r"up to 2 FPGAs; 3xu280 has 3 .*'h2h'"):
        plan_chef(dag, u280s(3), SMALL)
    plan_h2h(dag, u280s(3), SMALL)
    monkeypatch.setattr(planners, "MAX_CHEF_LAYERS", 9)
    with pytest.raises(PartitionError, match=r"DAGs of up to 9 layers; vfs\[:10\] has 10"):
        plan_chef(dag, u280s(2), SMALL)
    with pytest.raises(PartitionError, match=f"has {MAX_FPGAS + 1} FPGAs; .* at most {MAX_FPGAS}"):
        plan_h2h(dag, u280s(MAX_FPGAS + 1), SMALL)


def test_model_larger_than_cluster_dram_names_the_numbers():
    from archipelago.hardware.cluster_file import cluster_from_dict

    tiny = cluster_from_dict({"name": "tiny", "p2p_gbps": 3, "fpgas": [
        {"device": "u280", "freq_mhz": 200, "banks": {"count": 2, "size_bytes": 1 << 20}}]},
        "tiny.yaml")
    with pytest.raises(PartitionError, match=r"model 'vfs' keeps .* GiB .* 'tiny' has 0\.00"):
        plan_chef(builtin_dag("vfs"), tiny, ChefConfig())
