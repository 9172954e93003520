"""CHEF's cost model on the layers exported networks hold (issue 24): depthwise and grouped
convolutions, non-square kernels, element-wise layers, MatMul, bidirectional GRUs; each
against a count by hand, and planned by chef, chef-exact and h2h."""

import json
from math import ceil
from pathlib import Path

import pytest

from archipelago.errors import ConfigError, PartitionError
from archipelago.hardware.cluster import resolve_cluster
from archipelago.models.dag import dag_from_dict, load_dag
from archipelago.strategies.chef.exact import prefix_dag
from archipelago.strategies.chef.ip_templates import IPTemplate, builtin_ips, layer_cost
from archipelago.strategies.chef.plan import ChefConfig
from archipelago.strategies.chef.planners import plan_chef, plan_exact, plan_h2h
from tests.cli_here import archi_here

F, BW = 200e6, 12e9
IPS = builtin_ips()
NET = Path(__file__).parent / "data" / "dw_se_attention.yaml"


def _dag(*layers):
    return dag_from_dict({"name": "t", "layers": list(layers)}, "t")


def _cost(ip, dag, name):
    return layer_cost(ip, dag, dag.by_name[name], F, BW)


DW = {"name": "dw", "type": "conv", "in_ch": 32, "out_ch": 32, "groups": 32, "out_rows": 28,
      "out_cols": 28, "kernel": 3, "padding": 1}


def test_depthwise_3x3_on_the_dwconv_ip_by_hand():
    ip = IPS["dwconv_16"]
    # 16 lanes of a 3x3 window of FP32 MACs, five DSPs each (seeds/004 §I)
    assert ip.macs_per_cycle == 16 * 9 and ip.resources.dsp == 16 * 9 * 5
    # per lane, double-buffered: a stride-2 input tile (13*2+3)^2 = 841 words (two BRAM36
    # of 512 x 72 bits) and a 14x14 output tile (one); the 29-word line buffers and the
    # 9 weights are LUTRAM
    assert ip.resources.bram == 2 * 16 * (2 + 1)
    dag = _dag(DW)
    cost = _cost(ip, dag, "dw")
    # ceil(32/16) channel steps x 2x2 tiles x the 16x16 input pixels a tile streams
    assert cost.compute_s == pytest.approx(2 * 4 * 16 * 16 / F)
    words = 2 * 4 * 16 * (16 * 16 + 9) + 32 * 28 * 28
    assert cost.memory_s == pytest.approx(words * 4 / BW)


def test_wide_tiles_put_the_dwconv_line_buffers_in_bram():
    ip = IPTemplate(name="w", type="dwconv", tn=4, tr=8, tc=40, k_max=3)
    # rows of (40-1)*2+3 = 81 words: one BRAM36 per line buffer, two per lane (k_max - 1);
    # input tile 17 x 81 = 1,377 words: three blocks; output 320 words: one
    assert ip.resources.bram == 2 * 4 * (3 + 1) + 4 * 2 * 1


def test_a_kernel_wider_than_the_dwconv_window_runs_in_subwindows():
    dag = _dag({**DW, "kernel": 5, "padding": 2})
    cost = _cost(IPS["dwconv_16"], dag, "dw")
    # 5x5 on a 3x3 window: ceil(5/3)^2 = 4 sub-windows, each streaming a 16x16 tile
    assert cost.compute_s == pytest.approx(2 * 4 * 4 * 16 * 16 / F)
    assert _cost(IPS["dwconv5_16"], dag, "dw").compute_s == pytest.approx(2 * 4 * 18 * 18 / F)


def test_depthwise_on_the_conv_ip_packs_min_tm_tn_channels_per_pass():
    """No dwconv IP deployed: the Conv IP runs min(tm, tn) = 16 channels per pass with
    block-diagonal weights, one multiplier of each lane's sixteen busy."""
    ip = IPS["conv_16_32"]
    dag = _dag(DW)
    cost = _cost(ip, dag, "dw")
    assert cost.compute_s == pytest.approx(2 * 4 * 196 * 9 / F)
    words = 2 * 4 * (16 * 16 * 16 + 32 * 16 * 9) + 32 * 28 * 28
    assert cost.memory_s == pytest.approx(words * 4 / BW)


def test_grouped_conv_runs_group_by_group_on_the_conv_ip():
    ip = IPS["conv_16_32"]
    base = {"name": "g", "type": "conv", "in_ch": 64, "out_ch": 128, "out_rows": 14,
            "out_cols": 14, "kernel": 3, "padding": 1}
    dense = _cost(ip, _dag(base), "g")
    four = _cost(ip, _dag({**base, "groups": 4}), "g")
    eight = _cost(ip, _dag({**base, "groups": 8}), "g")
    # dense: ceil(128/32) x ceil(64/16) = 16 passes of one 14x14 tile x 9
    assert dense.compute_s == pytest.approx(16 * 196 * 9 / F)
    # 4 groups of 16 -> 32 fill the 16 x 32 array: 4 passes, a quarter of the dense work
    assert four.compute_s == pytest.approx(4 * 196 * 9 / F)
    assert four.memory_s == pytest.approx((4 * (16 * 16 * 16 + 32 * 16 * 9) + 128 * 196)
                                          * 4 / BW)
    # 8 groups of 8 -> 16: two per pass, half the lanes multiplying zeros, 4 passes again
    assert eight.compute_s == four.compute_s


def test_kernel_3x1_and_asymmetric_pads():
    ip = IPS["conv_16_32"]
    dag = _dag({"name": "c", "type": "conv", "in_ch": 16, "out_ch": 32, "out_rows": 14,
                "out_cols": 14, "kernel": 3, "kernel_cols": 1, "pads": [1, 0, 1, 0]})
    cost = _cost(ip, dag, "c")
    assert cost.compute_s == pytest.approx(196 * 3 / F)  # one pass, one tile, Kr Kc = 3
    # input tile (13+3) rows x (13+1) cols per input lane, weights 32 x 16 x 3
    assert cost.memory_s == pytest.approx((16 * 16 * 14 + 32 * 16 * 3 + 32 * 196) * 4 / BW)
    # TF-"SAME" pads (0, 0, 1, 1) cost what symmetric pads of the same output do: padding
    # enters through the shape only
    same = {"name": "s", "type": "conv", "in_ch": 8, "out_ch": 16, "out_rows": 8,
            "out_cols": 8, "kernel": 3, "stride": 2}
    asym = _dag({**same, "pads": [0, 0, 1, 1]})
    sym = _dag({**same, "padding": 1})
    assert (asym.by_name["s"].in_rows, sym.by_name["s"].in_rows) == (16, 15)
    assert _cost(ip, asym, "s") == _cost(ip, sym, "s")


def test_non_square_pool_window():
    dag = _dag({"name": "c", "type": "conv", "in_ch": 8, "out_ch": 32, "out_rows": 14,
                "out_cols": 14, "kernel": 1},
               {"name": "p", "type": "pool", "deps": ["c"], "channels": 32, "out_rows": 7,
                "out_cols": 14, "kernel": 2, "kernel_cols": 1, "stride": 2, "stride_cols": 1})
    cost = _cost(IPS["conv_16_32"], dag, "p")
    assert cost.compute_s == pytest.approx(ceil(32 * 7 * 14 / 32) * 2 / F)
    assert cost.memory_s == pytest.approx((32 * 14 * 14 + 32 * 7 * 14) * 4 / BW)


def test_elementwise_layers_on_any_output_stage():
    dag = _dag(
        {"name": "c", "type": "conv", "in_ch": 8, "out_ch": 32, "out_rows": 14,
         "out_cols": 14, "kernel": 1},
        {"name": "f", "type": "fc", "in_features": 8, "out_features": 32},
        {"name": "mul", "type": "elementwise", "op": "Mul", "deps": ["c", "f"],
         "shape": [32, 14, 14]},
        {"name": "ln", "type": "elementwise", "op": "LayerNormalization", "deps": ["f"],
         "shape": [32], "ops_per_element": 5, "params": 64})
    conv, dw, lstm = IPS["conv_16_32"], IPS["dwconv_16"], IPS["lstm_64"]
    assert all(ip.runs(dag.by_name["mul"]) for ip in IPS.values())
    # squeeze-and-excitation's Mul: 6,272 outputs over 32 lanes; reads both inputs
    mul = _cost(conv, dag, "mul")
    assert mul.compute_s == pytest.approx(196 / F)
    assert mul.memory_s == pytest.approx((6272 + 32 + 6272) * 4 / BW)
    # LayerNorm: 5 operations per element, its 64 parameters read; 16 lanes on dwconv_16
    # and on lstm_64 (P/4)
    for ip, lanes in ((conv, 32), (dw, 16), (lstm, 16)):
        ln = _cost(ip, dag, "ln")
        assert ln.compute_s == pytest.approx(ceil(32 / lanes) * 5 / F)
        assert ln.memory_s == pytest.approx((32 + 32 + 64) * 4 / BW)


def test_matmul_streams_its_right_operand_through_the_fc_ip():
    dag = _dag({"name": "a", "type": "fc", "in_features": 8, "out_features": 1280},
               {"name": "b", "type": "fc", "in_features": 8, "out_features": 2560},
               {"name": "mm", "type": "matmul", "deps": ["a", "b"], "batch": 2, "rows": 10,
                "inner": 64, "cols": 20})
    mm = dag.by_name["mm"]
    assert IPS["fc_16_32"].runs(mm) and not IPS["conv_16_32"].runs(mm)
    cost = _cost(IPS["fc_16_32"], dag, "mm")
    # 2 products x 10 rows x ceil(20/32) x ceil(64/16): 80 cycles for 25,600 MACs
    assert cost.compute_s == pytest.approx(80 / F) and mm.macs == 25600
    # left rows read once per tm step, the right operand once, the output written once
    assert cost.memory_s == pytest.approx(2 * (10 * 64 + 64 * 20 + 10 * 20) * 4 / BW)


def test_bidirectional_gru_runs_both_directions_on_one_engine():
    dag = _dag({"name": "g", "type": "lstm", "cell": "gru", "directions": 2, "embed": 32,
                "hidden": 64, "cells": 5})
    weights = 2 * 3 * 64 * (32 + 64 + 2)
    assert dag.by_name["g"].weight_elements == weights
    small = IPTemplate(name="s", type="lstm", parallel=64, weight_buffer_words=1)
    big = IPTemplate(name="b", type="lstm", parallel=64, weight_buffer_words=weights)
    for ip, reads in ((small, 5), (big, 1)):
        cost = _cost(ip, dag, "g")
        # 3 gates x 64 x 96 = 18,432 MACs a cell, 288 cycles; 2 directions x 5 cells
        assert cost.compute_s == pytest.approx(2 * 5 * 288 / F)
        assert cost.memory_s == pytest.approx((reads * weights + 2 * 5 * 96) * 4 / BW)


def test_operand_shapes_are_checked():
    fc = {"name": "a", "type": "fc", "in_features": 8, "out_features": 100}
    with pytest.raises(ConfigError, match=r"'layers\.mm': multiplies 1 x \(10x8 @ 8x4\) = 112 "
                       "operand elements, its inputs give 100"):
        _dag(fc, {"name": "mm", "type": "matmul", "deps": ["a"], "rows": 10, "inner": 8,
                  "cols": 4})
    with pytest.raises(ConfigError, match="inputs of 100 elements neither join nor broadcast"):
        _dag(fc, {"name": "e", "type": "elementwise", "op": "Relu", "deps": ["a"],
                  "shape": [10, 20]})


def test_chef_deploys_a_dwconv_ip_for_depthwise_layers():
    dag = load_dag(NET)
    plan = plan_chef(dag, resolve_cluster("hacc"), ChefConfig())
    types = {a.ip.type for a in plan.deployment.accs}
    assert types == {"conv", "dwconv", "fc"}
    # without a dwconv candidate the Conv IP runs the depthwise layer
    only = ChefConfig(ips=("conv_16_32", "fc_16_32"))
    fallback = plan_chef(dag, resolve_cluster("hacc"), only)
    dw1 = fallback.tables.names.index("dw1")
    assert fallback.deployment.accs[fallback.schedule.mapping[dw1]].ip.type == "conv"
    q = {"name": "q", "type": "conv", "in_ch": 8, "out_ch": 32, "out_rows": 4, "out_cols": 4,
         "kernel": 1}
    attention = _dag(q, {**q, "name": "k"}, {"name": "s", "type": "matmul", "deps": ["q", "k"],
                                             "rows": 16, "inner": 32, "cols": 16})
    with pytest.raises(PartitionError, match=r"layer 's' \(matmul 16x32 @ 32x16\): no "
                       "candidate IP is a fc IP"):
        plan_chef(attention, resolve_cluster("hacc"), ChefConfig(ips=("conv_16_32",)))


def test_h2h_and_exact_cost_the_new_layers_alike():
    dag = load_dag(NET)
    h2h = plan_h2h(dag, resolve_cluster("hacc"), ChefConfig())
    # two FPGAs for three IP types: the depthwise layer runs on the Conv IP
    assert sorted(a.ip.type for a in h2h.deployment.accs) == ["conv", "fc"]
    small = prefix_dag(dag, 8)
    assert {la.type for la in small.layers} >= {"conv", "pool", "fc", "elementwise"}
    config = ChefConfig(ips=("conv_8_16", "dwconv_8", "fc_8_16"), max_accs_per_fpga=2)
    cluster = resolve_cluster("chef-cluster3")
    heuristic, exact = plan_chef(small, cluster, config), plan_exact(small, cluster, config)
    assert exact.latency_s <= heuristic.latency_s * (1 + 1e-9)
    for plan in (heuristic, exact):  # both schedule each layer for its cost-model latency
        for i, name in enumerate(plan.tables.names):
            acc = plan.deployment.accs[plan.schedule.mapping[i]]
            node = cluster.nodes[acc.fpga]
            box = plan.schedule.end[i] - plan.schedule.start[i] - plan.schedule.comm_s[i]
            bw = plan.tables.dram_Bps[plan.schedule.mapping[i]]
            want = layer_cost(acc.ip, small, small.by_name[name], node.clock_hz, bw)
            assert box == pytest.approx(want.latency_s)


@pytest.mark.parametrize("strategy", ["chef", "h2h"])
def test_cli_plans_depthwise_se_attention_on_hacc(strategy):
    out = archi_here("plan", str(NET), "--cluster", "hacc", "--strategy", strategy, "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert len(data["mapping"]) == 18 and data["latency_s"] > 0


def test_token_wise_fc_costs_its_rows():
    """A Linear on 16 tokens: 16 x ceil(24/16) x ceil(40/8) cycles on fc_8_16; weights
    read once, the 16 x 40 inputs once per block of 16 outputs, 16 x 24 outputs written."""
    dag = _dag({"name": "f", "type": "fc", "rows": 16, "in_features": 40, "out_features": 24})
    cost = _cost(builtin_ips()["fc_8_16"], dag, "f")
    assert cost.compute_s == pytest.approx(16 * 2 * 5 / F)
    words = 2 * 16 * 40 + (24 * 40 + 24) + 16 * 24
    assert cost.memory_s == pytest.approx(words * 4 / BW)
