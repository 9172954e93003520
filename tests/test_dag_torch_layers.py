"""The seeded-DAG emulator (dag_torch.py) on the layer types of exported networks, each
checked against a torch module built independently on the same weights (nn.Conv2d with
groups behind a ZeroPad2d, nn.GRU and nn.LSTM bidirectional, nn.LayerNorm, ...) or, for
pooling, a brute-force loop; and a split run of them over two FPGA processes."""

import math

import numpy as np
import pytest

pytest.importorskip("torch")

import torch
from torch import nn

from archipelago.emulate.errors import EmulationError
from archipelago.models.dag import LSTM, Conv, Elementwise, MatMul, ModelDAG, Pool
from archipelago.strategies.chef.emulate.dag_torch import (
    layer_weights,
    model_inputs,
    run_dag,
    run_layer,
)
from archipelago.strategies.chef.emulate.run import emulate_dag

SEED = 5


def _one(layer, shape: tuple[int, ...]) -> tuple[ModelDAG, torch.Tensor, list]:
    dag = ModelDAG(name="one", layers=(layer,), inputs={layer.name: shape})
    x = model_inputs(dag, SEED)[layer.name]
    return dag, x, layer_weights(dag, layer.name, SEED)


@pytest.mark.parametrize("groups,out_ch", [(2, 6), (4, 4)])  # grouped, depthwise
def test_grouped_non_square_asymmetric_conv_equals_nn_conv2d(groups, out_ch):
    # input 9x7, kernel 3x2, strides 2x1, pads (top 0, left 1, bottom 1, right 0)
    layer = Conv(name="c", in_ch=4, out_ch=out_ch, groups=groups, kernel=3, kernel_cols=2,
                 stride=2, stride_cols=1, pads=(0, 1, 1, 0), out_rows=4, out_cols=7,
                 relu=False)
    dag, x, weights = _one(layer, (4, 9, 7))
    module = nn.Sequential(nn.ZeroPad2d((1, 0, 0, 1)),
                           nn.Conv2d(4, out_ch, (3, 2), (2, 1), groups=groups))
    module[1].weight.data, module[1].bias.data = weights
    with torch.no_grad():
        expected = module(x[None])[0]
    torch.testing.assert_close(run_layer(dag, "c", [x], weights), expected)


def _brute_pool(x: np.ndarray, window, strides, pads, kind: str) -> np.ndarray:
    """Windows over the map padded with -inf (max) or zeros counted in the mean (avg)."""
    top, left, bottom, right = pads
    fill = -np.inf if kind == "max" else 0.0
    padded = np.pad(x, ((0, 0), (top, bottom), (left, right)), constant_values=fill)
    rows = (padded.shape[1] - window[0]) // strides[0] + 1
    cols = (padded.shape[2] - window[1]) // strides[1] + 1
    out = np.empty((x.shape[0], rows, cols), np.float32)
    for r in range(rows):
        for c in range(cols):
            patch = padded[:, r * strides[0]:r * strides[0] + window[0],
                           c * strides[1]:c * strides[1] + window[1]]
            out[:, r, c] = patch.max((1, 2)) if kind == "max" else patch.mean((1, 2))
    return out


@pytest.mark.parametrize("kind", ["max", "avg"])
def test_non_square_asymmetric_pool_equals_brute_force(kind):
    layer = Pool(name="p", kind=kind, channels=3, kernel=2, kernel_cols=3, stride=2,
                 stride_cols=1, pads=(1, 0, 0, 2), out_rows=4, out_cols=6)
    dag, x, _ = _one(layer, (3, 7, 6))
    got = run_layer(dag, "p", [x], [])
    expected = _brute_pool(x.numpy(), (2, 3), (2, 1), (1, 0, 0, 2), kind)
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("cell,module_type", [("gru", nn.GRU), ("lstm", nn.LSTM)])
def test_bidirectional_recurrence_equals_torch_module(cell, module_type):
    layer = LSTM(name="r", cell=cell, directions=2, embed=3, hidden=4, cells=5)
    dag, x, weights = _one(layer, (15,))
    module = module_type(3, 4, bidirectional=True)
    names = ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0")
    for i, name in enumerate(names):
        getattr(module, name).data = weights[i]
        getattr(module, name + "_reverse").data = weights[4 + i]
    with torch.no_grad():
        expected = module(x.reshape(5, 1, 3))[0][:, 0]
    torch.testing.assert_close(run_layer(dag, "r", [x], weights), expected)


def _elementwise(op: str, params: int = 0, shape=(4, 3, 2)):
    layer = Elementwise(name="e", op=op, shape=shape, params=params)
    return _one(layer, shape)


@pytest.mark.parametrize("op,module", [
    ("Sigmoid", nn.Sigmoid()), ("HardSwish", nn.Hardswish()), ("Gelu", nn.GELU()),
    ("Softmax", nn.Softmax(-1)), ("Clip", nn.ReLU6()), ("LRN", nn.LocalResponseNorm(5)),
    ("Tanh", nn.Tanh()), ("relu", nn.ReLU())])
def test_activation_equals_torch_module(op, module):
    dag, x, weights = _elementwise(op)
    expected = module(x[None])[0] if op == "LRN" else module(x)
    torch.testing.assert_close(run_layer(dag, "e", [x], weights), expected)


def test_normalizations_equal_their_formulas():
    dag, x, weights = _elementwise("LayerNormalization", params=4, shape=(3, 2))
    norm = nn.LayerNorm(2)
    norm.weight.data, norm.bias.data = weights[0][:2], weights[0][2:4]
    torch.testing.assert_close(run_layer(dag, "e", [x], weights), norm(x))
    dag, x, weights = _elementwise("BatchNormalization", params=8)
    scale, shift = weights[0][:4], weights[0][4:]
    torch.testing.assert_close(run_layer(dag, "e", [x], weights),
                               x * scale[:, None, None] + shift[:, None, None])


def test_squeeze_excitation_mul_broadcasts_per_channel():
    layer = Elementwise(name="e", op="Mul", shape=(4, 3, 2))
    dag = ModelDAG(name="se", layers=(
        Conv(name="a", in_ch=2, out_ch=4, kernel=1, out_rows=3, out_cols=2),
        Pool(name="s", deps=("a",), kind="avg", channels=4, kernel=3, kernel_cols=2,
             out_rows=1, out_cols=1),
        layer.model_copy(update={"deps": ("a", "s")})))
    inputs = model_inputs(dag, SEED)
    weights = {n: layer_weights(dag, n, SEED) for n in dag.order}
    values = run_dag(dag, inputs, weights)
    torch.testing.assert_close(values["e"], values["a"] * values["a"].mean((1, 2),
                                                                          keepdim=True))


def test_matmul_of_two_operands_equals_torch_matmul():
    dag = ModelDAG(name="mm", layers=(
        Elementwise(name="q", op="Identity", shape=(2, 3, 4)),
        Elementwise(name="k", op="Identity", shape=(2, 4, 5)),
        MatMul(name="m", deps=("q", "k"), batch=2, rows=3, inner=4, cols=5)))
    inputs = model_inputs(dag, SEED)
    values = run_dag(dag, inputs, {})
    torch.testing.assert_close(values["m"], torch.matmul(inputs["q"], inputs["k"]))


def test_split_run_of_the_new_layer_types_equals_the_unsplit_dag():
    dag = ModelDAG(name="mixed", layers=(
        Conv(name="c1", in_ch=3, out_ch=8, kernel=3, stride=2, pads=(0, 0, 1, 1),
             out_rows=4, out_cols=4),
        Conv(name="dw", deps=("c1",), in_ch=8, out_ch=8, groups=8, kernel=3, padding=1,
             out_rows=4, out_cols=4),
        Elementwise(name="bn", deps=("dw",), op="BatchNormalization", shape=(8, 4, 4),
                    params=16),
        Pool(name="sq", deps=("bn",), kind="avg", channels=8, kernel=4, out_rows=1,
             out_cols=1),
        Elementwise(name="hs", deps=("sq",), op="HardSigmoid", shape=(8, 1, 1)),
        Elementwise(name="se", deps=("bn", "hs"), op="Mul", shape=(8, 4, 4)),
        LSTM(name="gru", deps=("se",), cell="gru", directions=2, embed=8, hidden=3,
             cells=16)), inputs={"c1": (3, 8, 8)})
    placement = {"c1": 0, "dw": 1, "bn": 1, "sq": 0, "hs": 0, "se": 1, "gru": 0}
    report = emulate_dag(dag, placement, list(dag.order), ["f0", "f1"], seed=SEED)
    assert report["outputs_equal"] and report["agrees"] and report["max_abs_diff"] == 0.0
    assert report["bytes_per_link"] == report["expected_bytes_per_link"]
    assert math.prod(dag.by_name["gru"].out_shape) == 16 * 6


def test_an_elementwise_op_not_emulated_is_refused_before_any_process():
    dag = ModelDAG(name="odd", layers=(
        Conv(name="c", in_ch=1, out_ch=1, kernel=1, out_rows=2, out_cols=2),
        Elementwise(name="e", deps=("c",), op="GroupNormalization", shape=(1, 2, 2))))
    with pytest.raises(EmulationError, match=r"^layer 'e': element-wise op "
                                             r"'GroupNormalization' is not emulated "
                                             r"\(valid: relu, sigmoid, "):
        emulate_dag(dag, {"c": 0, "e": 1}, ["c", "e"], ["f0", "f1"])



def test_operand_shaping_rules_of_elementwise_layers():
    """Each shaping rule on a hand-computed case: a stored class token before the joined
    inputs, a tiled divisor, a reduction over consecutive groups, a selection's first
    elements."""
    from archipelago.strategies.chef.emulate.elementwise import elementwise

    x = torch.arange(6.0)
    token = torch.tensor([-1.0, -2.0, 9.0])
    layer = Elementwise(name="e", op="Concat", shape=(4, 2), params=3)
    torch.testing.assert_close(elementwise(layer, [x], token),
                               torch.tensor([-1.0, -2.0, 0, 1, 2, 3, 4, 5]).reshape(4, 2))
    tiled = elementwise(Elementwise(name="e", op="Expand", shape=(2, 6)), [x], None)
    torch.testing.assert_close(tiled, torch.stack([x, x]))
    mean = elementwise(Elementwise(name="e", op="ReduceMean", shape=(3,)), [x], None)
    torch.testing.assert_close(mean, torch.tensor([0.5, 2.5, 4.5]))
    picked = elementwise(Elementwise(name="e", op="Gather", shape=(2,)), [x], None)
    torch.testing.assert_close(picked, torch.tensor([0.0, 1.0]))


def test_per_token_fc_and_matmul_operand_orders():
    from archipelago.models.dag import FC

    dag = ModelDAG(name="t", layers=(FC(name="f", rows=3, in_features=4, out_features=2),),
                   inputs={"f": (3, 4)})
    x = model_inputs(dag, SEED)["f"]
    w, b = layer_weights(dag, "f", SEED)
    torch.testing.assert_close(run_layer(dag, "f", [x], [w, b]), x @ w.T + b)
    q, k = torch.randn(2, 3, 4), torch.randn(2, 4, 5)
    mm = MatMul(name="m", batch=2, rows=3, inner=4, cols=5)
    dag = ModelDAG(name="t", layers=(mm,))
    expected = torch.bmm(q, k)
    for operands in ([q, k], [k, q], [torch.cat([q.flatten(), k.flatten()])]):
        torch.testing.assert_close(run_layer(dag, "m", operands, []), expected)


@pytest.mark.parametrize("name", ["vit_block", "depthwise_cnn", "bilstm"])
def test_seeded_run_of_an_imported_dag_splits_bit_for_bit(name, onnx_network):
    """The importer's DAG of an exported network (Concat with a class token, Gather of a
    step, LayerNormalization, Softmax, MatMul, per-token FC, SE Mul, bidirectional LSTM)
    run with seeded weights: the split run equals the unsplit one exactly (both on one
    torch thread)."""
    pytest.importorskip("onnxruntime")
    from archipelago.models.onnx_import import import_onnx

    dag = import_onnx(onnx_network(name, dynamo=True)).dag
    placement = {n: i % 2 for i, n in enumerate(dag.order)}
    report = emulate_dag(dag, placement, list(dag.order), ["f0", "f1"], seed=SEED)
    assert report["outputs_equal"] and report["max_abs_diff"] == 0.0
    assert report["bytes_per_link"] == report["expected_bytes_per_link"]
