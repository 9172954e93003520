"""Emulating CHEF schedules: one process per FPGA, output equal to the unsplit DAG."""

import pytest

pytest.importorskip("torch")

from archipelago.emulate.chef.run import emulate_dag
from archipelago.hardware.hetero import resolve_hetero_cluster
from archipelago.models.dag_zoo import builtin_dag
from archipelago.strategies.chef.plan import ChefConfig
from archipelago.strategies.chef.planners import plan_chef


def _emulate(plan):
    placement = plan.placement()
    order = sorted(placement, key=lambda n: plan.schedule.start[plan.tables.names.index(n)])
    return emulate_dag(plan.dag, placement, order, [f.name for f in plan.cluster.fpgas],
                       seed=3)


def test_cnn_lstm_split_over_six_fpgas_equals_unsplit():
    plan = plan_chef(builtin_dag("cnn-lstm"), resolve_hetero_cluster("chef-cluster1"),
                     ChefConfig())
    report = _emulate(plan)
    assert report["processes"] == 6 and report["outputs_equal"]
    assert report["max_abs_diff"] == 0.0
    assert report["bytes_per_link"] == report["expected_bytes_per_link"]
    assert report["bytes_per_link"]  # the schedule does cross FPGAs
    placement = plan.placement()
    for fpga, layers in report["layers_per_fpga"].items():
        index = [f.name for f in plan.cluster.fpgas].index(fpga)
        assert layers == sorted(n for n, f in placement.items() if f == index)
