"""dag.py's shape checks on the exported-network layer types, each case counted by hand:
windows with non-square kernels, per-axis strides and asymmetric pads read through a
dependency; element-wise layers that broadcast (squeeze-and-excitation), join (a class
token), or select (a token); MatMul operands; FC rows; a bidirectional LSTM's output."""

import pytest

from archipelago.errors import ConfigError
from archipelago.models.dag import dag_from_dict


def _dag(*layers, inputs=None):
    return dag_from_dict({"name": "t", "layers": list(layers), "inputs": inputs or {}}, "t")


STEM = {"name": "stem", "type": "conv", "in_ch": 3, "out_ch": 8, "out_rows": 9,
        "out_cols": 9, "kernel": 3}  # an 8 x 8 map out of an implied 11 x 11 input


def test_a_window_reads_its_dependency_with_its_own_pads_and_strides() -> None:
    """A 3x1 kernel, strides (2, 1), pads (0, 1, 1, 0) on the 9x9 map: rows
    (9 + 0 + 1 - 3) // 2 + 1 = 4, cols (9 + 1 + 0 - 1) // 1 + 1 = 10."""
    conv = {"name": "c", "type": "conv", "deps": ["stem"], "in_ch": 8, "out_ch": 8,
            "groups": 8, "kernel": 3, "kernel_cols": 1, "stride": 2, "stride_cols": 1,
            "pads": [0, 1, 1, 0], "out_rows": 4, "out_cols": 10}
    layer = _dag(STEM, conv).by_name["c"]
    assert layer.macs == 8 * 1 * 3 * 1 * 4 * 10
    with pytest.raises(ConfigError, match=r"'layers\.c': input 9x9 gives output 4x10, "
                                          r"declared 5x10"):
        _dag(STEM, {**conv, "out_rows": 5})


def test_pool_padding_beyond_half_its_window_on_either_axis() -> None:
    pool = {"name": "p", "type": "pool", "deps": ["stem"], "channels": 8, "kernel": 2,
            "kernel_cols": 4, "stride": 2, "stride_cols": 1, "pads": [0, 2, 1, 2], "out_rows": 5,
            "out_cols": 10}
    assert _dag(STEM, pool).by_name["p"].borders == (0, 2, 1, 2)
    with pytest.raises(ConfigError, match=r"'layers\.p\.pads': padding \[0, 3, 1, 2\] is "
                                          r"more than half the 2x4 kernel"):
        _dag(STEM, {**pool, "pads": [0, 3, 1, 2], "out_cols": 11})


def test_elementwise_broadcasts_joins_or_selects() -> None:
    gate = {"name": "gate", "type": "conv", "deps": ["pool"], "in_ch": 8, "out_ch": 8,
            "out_rows": 1, "out_cols": 1, "kernel": 1}
    pool = {"name": "pool", "type": "pool", "kind": "avg", "deps": ["stem"], "channels": 8,
            "kernel": 9, "stride": 9, "out_rows": 1, "out_cols": 1}
    se = {"name": "se", "type": "elementwise", "op": "Mul", "deps": ["stem", "gate"],
          "shape": [8, 9, 9]}  # (8, 9, 9) * (8, 1, 1)
    _dag(STEM, pool, gate, se)
    token = {"name": "tok", "type": "elementwise", "op": "Concat", "deps": ["stem"],
             "shape": [649], "params": 1}  # 648 computed elements and one learned
    select = {"name": "first", "type": "elementwise", "op": "Gather", "deps": ["tok"],
              "shape": [1]}
    _dag(STEM, token, select)
    with pytest.raises(ConfigError, match=r"'layers\.tok': broadcasts inputs of \[648\] "
                                          r"elements over shape \(650,\)"):
        _dag(STEM, {**token, "shape": [650]})


def test_matmul_operands_and_fc_rows() -> None:
    """q (2 heads x 5 tokens x 8) and k^T from one FC of 5 rows x 32 features: one
    layer holding both operands of q @ k^T gives 80 + 80 elements."""
    qk = {"name": "qk", "type": "fc", "in_features": 4, "out_features": 32, "rows": 5}
    scores = {"name": "s", "type": "matmul", "deps": ["qk"], "batch": 2, "rows": 5,
              "inner": 8, "cols": 5}
    dag = _dag(qk, scores, inputs={"qk": [5, 4]})
    assert dag.by_name["qk"].macs == 5 * 4 * 32 and dag.by_name["s"].macs == 2 * 5 * 8 * 5
    with pytest.raises(ConfigError, match=r"'layers\.s': multiplies 2 x \(5x8 @ 8x6\) = "
                                          r"176 operand elements, its inputs give 160"):
        _dag(qk, {**scores, "cols": 6}, inputs={"qk": [5, 4]})
    with pytest.raises(ConfigError, match="expects 20 input features, its input gives 24"):
        _dag(qk, inputs={"qk": [6, 4]})


def test_a_bidirectional_lstm_feeds_its_steps_to_a_per_step_fc() -> None:
    """(T=7, 2 x 5) out of a bidirectional LSTM, into an FC on each of the 7 steps."""
    lstm = {"name": "l", "type": "lstm", "embed": 6, "hidden": 5, "cells": 7,
            "directions": 2, "cell": "gru"}
    fc = {"name": "fc", "type": "fc", "deps": ["l"], "in_features": 10, "out_features": 4,
          "rows": 7}
    dag = _dag(lstm, fc, inputs={"l": [7, 6]})
    assert dag.by_name["l"].out_shape == (7, 10) and dag.by_name["fc"].macs == 7 * 40
    with pytest.raises(ConfigError, match="expects 60 input features, its input gives 70"):
        _dag(lstm, {**fc, "rows": 6}, inputs={"l": [7, 6]})
