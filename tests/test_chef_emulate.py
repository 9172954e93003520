"""Emulating CHEF schedules: one process per FPGA, output equal to the unsplit DAG."""

import pytest

pytest.importorskip("torch")

from archipelago.hardware.cluster import resolve_cluster
from archipelago.models.dag_zoo import builtin_dag
from archipelago.strategies.chef.emulate.run import emulate_dag
from archipelago.strategies.chef.plan import ChefConfig
from archipelago.strategies.chef.planners import plan_chef


def _emulate(plan):
    placement = plan.placement()
    order = sorted(placement, key=lambda n: plan.schedule.start[plan.tables.names.index(n)])
    return emulate_dag(plan.dag, placement, order, [f.name for f in plan.cluster.nodes],
                       seed=3)


def test_cnn_lstm_split_over_six_fpgas_equals_unsplit():
    plan = plan_chef(builtin_dag("cnn-lstm"), resolve_cluster("chef-cluster1"),
                     ChefConfig())
    report = _emulate(plan)
    assert report["processes"] == 6 and report["outputs_equal"]
    assert report["max_abs_diff"] == 0.0
    assert report["bytes_per_link"] == report["expected_bytes_per_link"]
    assert report["bytes_per_link"]  # the schedule does cross FPGAs
    placement = plan.placement()
    for fpga, layers in report["layers_per_fpga"].items():
        index = [f.name for f in plan.cluster.nodes].index(fpga)
        assert layers == sorted(n for n, f in placement.items() if f == index)


def test_imported_module_planned_and_emulated_equals_the_module():
    import torch

    from archipelago.models.torch_import import dag_from_module
    from archipelago.strategies.chef.emulate.run import Given
    from tests.test_torch_import import TwoModalitiesSafe, module_weights

    torch.manual_seed(1)
    module = TwoModalitiesSafe().eval()
    image, audio = torch.randn(1, 3, 8, 8), torch.randn(1, 1, 8, 8)
    dag, params = dag_from_module(module, (image, audio), "two")
    cluster = resolve_cluster("chef-cluster1").with_bandwidth(15)
    plan = plan_chef(dag, cluster, ChefConfig())
    placement = plan.placement()
    order = sorted(placement, key=lambda n: plan.schedule.start[plan.tables.names.index(n)])
    given = Given(module_weights(module, params), {"img1": image[0], "aud": audio[0]})
    report = emulate_dag(dag, placement, order, [f.name for f in cluster.nodes], given=given)
    assert report["outputs_equal"]
    with torch.no_grad():
        expected = module(image, audio)[0]
    # the split run's output is the unsplit DAG's bit for bit; the DAG is the module's
    assert report["max_abs_diff"] == 0.0
    from archipelago.strategies.chef.emulate.dag_torch import run_dag

    unsplit = run_dag(dag, given.inputs, given.weights)[dag.order[-1]]
    torch.testing.assert_close(unsplit, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("exported", [False, True])
def test_a_conv_imported_as_fc_emulates_with_the_modules_own_4d_weight(exported):
    """A VGG classifier written as a 7x7 convolution over the 7x7 map is an FC layer
    (layer_forms); given the module's own (32, 8, 7, 7) weight, the split run and the
    unsplit DAG both equal the module, traced or as torch.export's program."""
    import torch

    from archipelago.models.torch_import import dag_from_module
    from archipelago.strategies.chef.emulate.dag_torch import run_dag
    from archipelago.strategies.chef.emulate.run import Given
    from tests.test_torch_import import module_weights
    from tests.user_networks import VGGHead

    torch.manual_seed(2)
    module, image = VGGHead(as_conv=True).eval(), torch.randn(1, 3, 14, 14)
    source = torch.export.export(module, (image,)).module() if exported else module
    dag, params = dag_from_module(source, (image,), "vgg")
    head = dag.by_name["fc1"]
    assert (head.type, head.in_features) == ("fc", 8 * 7 * 7)
    given = Given(module_weights(module, params), {"features_0": image[0]})
    assert given.weights["fc1"][0].shape == (32, 8, 7, 7)
    with torch.no_grad():
        expected = module(image)[0]
    torch.testing.assert_close(run_dag(dag, given.inputs, given.weights)["fc2"], expected,
                               rtol=1e-5, atol=1e-6)
    report = emulate_dag(dag, {n: i % 2 for i, n in enumerate(dag.order)}, list(dag.order),
                         ["fpga0", "fpga1"], given=given)
    assert report["outputs_equal"] and report["max_abs_diff"] == 0.0
