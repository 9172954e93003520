"""CHEF IP templates: resource and performance models on layers computed by hand."""

from pathlib import Path

import pytest

from archipelago.errors import ConfigError
from archipelago.models.dag import dag_from_dict
from archipelago.strategies.chef.ip_templates import (
    IPTemplate,
    builtin_ips,
    dram_bytes,
    layer_cost,
    load_ips,
)

F, BW = 200e6, 12e9


def _dag(*layers):
    return dag_from_dict({"name": "t", "layers": list(layers)}, "t")


CONV = {"name": "c", "type": "conv", "out_ch": 64, "in_ch": 32, "out_rows": 28,
        "out_cols": 28, "kernel": 3, "padding": 1}


def test_fig5_naming_and_five_dsps_per_mac():
    ip = builtin_ips()["conv_16_32"]
    assert (ip.tn, ip.tm) == (16, 32) and ip.resources.dsp == 5 * 16 * 32
    # 16 input banks of an 16x16 input tile, 32 output banks of 14x14: one BRAM36 each,
    # double-buffered; 3x3..7x7 weight banks live in LUTRAM.
    assert ip.resources.bram == 2 * (16 + 32)


def test_conv_cost_by_hand():
    dag = _dag(CONV)
    ip = builtin_ips()["conv_16_32"]
    cost = layer_cost(ip, dag, dag.by_name["c"], F, BW)
    # ceil(64/32)=2 x ceil(32/16)=2 x (2x2 tiles of 14x14) x 9 = 28,224 cycles
    assert cost.compute_s == pytest.approx(2 * 2 * 4 * 196 * 9 / F)
    in_tile = 16 * 16 * 16  # tn x (13+3)^2
    words = 2 * 2 * 4 * (in_tile + 32 * 16 * 9) + 64 * 28 * 28
    assert cost.memory_s == pytest.approx(words * 4 / BW)
    assert cost.latency_s == max(cost.compute_s, cost.memory_s)


def test_fc_is_memory_bound_by_its_weights():
    dag = _dag({"name": "f", "type": "fc", "out_features": 1000, "in_features": 4096})
    ip = builtin_ips()["fc_16_32"]
    cost = layer_cost(ip, dag, dag.by_name["f"], F, BW)
    assert cost.compute_s == pytest.approx(32 * 256 / F)  # ceil(1000/32) x 4096/16
    words = 32 * 4096 + (1000 * 4096 + 1000) + 1000
    assert cost.memory_s == pytest.approx(words * 4 / BW) and cost.latency_s == cost.memory_s


def test_lstm_cells_are_sequential_and_weights_stream_when_too_big():
    layer = {"name": "l", "type": "lstm", "embed": 64, "hidden": 128, "cells": 10}
    dag = _dag(layer)
    small = IPTemplate(name="s", type="lstm", parallel=64, weight_buffer_words=1)
    big = IPTemplate(name="b", type="lstm", parallel=64, weight_buffer_words=1 << 20)
    cell_macs = 4 * 128 * (64 + 128)
    weights = 4 * 128 * 192 + 8 * 128
    for ip, reads in ((small, 10), (big, 1)):
        cost = layer_cost(ip, dag, dag.by_name["l"], F, BW)
        assert cost.compute_s == pytest.approx(10 * cell_macs / 64 / F)
        assert cost.memory_s == pytest.approx((reads * weights + 10 * 192) * 4 / BW)


def test_ip_type_and_light_layers():
    dag = _dag(CONV, {"name": "p", "type": "pool", "deps": ["c"], "channels": 64,
                      "out_rows": 14, "out_cols": 14, "kernel": 2, "stride": 2})
    fc, conv = builtin_ips()["fc_8_16"], builtin_ips()["conv_8_16"]
    assert not fc.runs(dag.by_name["c"]) and conv.runs(dag.by_name["c"])
    pool = dag.by_name["p"]
    assert fc.runs(pool)
    cost = layer_cost(conv, dag, pool, F, BW)
    assert cost.compute_s == pytest.approx(64 * 14 * 14 / 16 * 4 / F)
    assert cost.memory_s == pytest.approx((64 * 28 * 28 + 64 * 14 * 14) * 4 / BW)
    assert dram_bytes(dag, pool) == 64 * 14 * 14 * 4


def test_user_ip_file(tmp_path: Path):
    path = tmp_path / "ips.yaml"
    path.write_text("ips:\n  mine: {type: conv, tn: 4, tm: 8, tr: 7, tc: 7, k_max: 3}\n")
    assert load_ips(path)["mine"].resources.dsp == 160
    path.write_text("ips:\n  mine: {type: gru, tn: 4}\n")
    with pytest.raises(ConfigError, match=r"ips\.yaml: field 'ips\.mine\.type'"):
        load_ips(path)
    path.write_text("ips:\n  c: {type: conv, k_max: 1000000000000}\n")
    with pytest.raises(ConfigError, match=r"'ips\.c\.k_max': .* less than or equal to 256"):
        load_ips(path)


def test_an_lstm_ip_narrower_than_its_four_gates_still_has_an_output_lane():
    """`parallel` below 4 leaves no whole lane per gate; pooling on it runs one lane wide
    (it divided by zero)."""
    from archipelago.strategies.chef.ip_templates import IPTemplate

    assert IPTemplate(name="l", type="lstm", parallel=1).lanes == 1
    assert IPTemplate(name="l", type="lstm", parallel=64).lanes == 16
