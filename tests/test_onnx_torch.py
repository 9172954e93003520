"""The torch interpreter of ONNX operators against onnxruntime, one operator family at a
time, on tiny single-op or few-op graphs (tolerance: onnx_run.RTOL / ATOL, said why
there), including the attribute forms of older opsets."""

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("onnxruntime")

from onnx import TensorProto
from onnx.helper import make_node as node
from onnx.helper import make_tensor

from archipelago.emulate.errors import EmulationError
from archipelago.strategies.chef.emulate.onnx_run import (
    compare,
    onnxruntime_outputs,
    seeded_inputs,
)
from tests.onnx_cases import check_against_onnxruntime, interpret, make_model

RNG = np.random.default_rng(7)


def w(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def i64(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int64)


X4 = {"x": [1, 4, 7, 6]}
F = TensorProto.FLOAT
CASES = {
    # convolution: groups, dilations, asymmetric pads, non-square kernel and strides, SAME
    "conv_grouped_dilated_asym": (
        [node("Conv", ["x", "w", "b"], ["y"], group=2, dilations=[2, 1],
              pads=[0, 0, 1, 1], strides=[2, 1])], X4, {"w": w(6, 2, 3, 2), "b": w(6)}, 17),
    "conv_depthwise_same": (
        [node("Conv", ["x", "w"], ["y"], group=4, auto_pad="SAME_UPPER", strides=[2, 2])],
        X4, {"w": w(4, 1, 3, 3)}, 11),
    "conv_1d": ([node("Conv", ["x", "w"], ["y"], pads=[2, 0])], {"x": [1, 3, 9]},
                {"w": w(5, 3, 3)}, 13),
    "gemm_alpha_beta_trans": (
        [node("Gemm", ["x", "w", "c"], ["y"], alpha=0.5, beta=2.0, transA=1, transB=1)],
        {"x": [5, 2]}, {"w": w(3, 5), "c": w(3)}, 13),
    "matmul_batched_broadcast": ([node("MatMul", ["x", "w"], ["y"])], {"x": [2, 3, 4, 5]},
                                 {"w": w(5, 6)}, 13),
    "matmul_two_inputs": ([node("MatMul", ["x", "z"], ["y"])],
                          {"x": [2, 3, 4], "z": [2, 4, 5]}, {}, 13),
    "arith_broadcast": (
        [node("Add", ["x", "a"], ["t1"]), node("Sub", ["t1", "b"], ["t2"]),
         node("Mul", ["t2", "a"], ["t3"]), node("Div", ["t3", "c"], ["y"])],
        X4, {"a": w(1, 4, 1, 1), "b": w(6), "c": np.float32(1.5) + np.abs(w(7, 1))}, 13),
    "batchnorm": ([node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"],
                        epsilon=1e-3)], X4,
                  {"s": w(4), "b": w(4), "m": w(4), "v": np.abs(w(4)) + 0.1}, 15),
    "activations": (
        [node("Relu", ["x"], ["a"]), node("LeakyRelu", ["x"], ["b"], alpha=0.2),
         node("Sigmoid", ["x"], ["c"]), node("HardSigmoid", ["x"], ["d"], alpha=0.3,
                                             beta=0.4),
         node("HardSwish", ["x"], ["e"]), node("Tanh", ["x"], ["f"]),
         node("Erf", ["x"], ["g"])], X4, {}, 14, ["a", "b", "c", "d", "e", "f", "g"]),
    "gelu_exact_and_tanh": ([node("Gelu", ["x"], ["a"]),
                             node("Gelu", ["x"], ["b"], approximate="tanh")], X4, {}, 20,
                            ["a", "b"]),
    "clip_opset6_attributes": ([node("Clip", ["x"], ["y"], min=-0.5, max=0.7)], X4, {}, 6),
    "clip_opset13_inputs": ([node("Clip", ["x", "", "hi"], ["y"])], X4,
                            {"hi": np.float32(0.3)}, 13),
    "relu6_clip_inputs": ([node("Clip", ["x", "lo", "hi"], ["y"])], X4,
                          {"lo": np.float32(0.0), "hi": np.float32(0.6)}, 11),
    "softmax_opset11_coerced_2d": ([node("Softmax", ["x"], ["y"], axis=1)], X4, {}, 11),
    "softmax_opset13_one_axis": ([node("Softmax", ["x"], ["y"], axis=1)], X4, {}, 13),
    "lrn_odd": ([node("LRN", ["x"], ["y"], size=3, alpha=1e-2, beta=0.75, bias=2.0)],
                {"x": [1, 6, 3, 3]}, {}, 13),
    "layernorm_last_axis": ([node("LayerNormalization", ["x", "g", "b"], ["y"])],
                            {"x": [2, 5, 8]}, {"g": w(8), "b": w(8)}, 17),
    "layernorm_from_axis1": ([node("LayerNormalization", ["x", "g"], ["y"], axis=1,
                                   epsilon=1e-3)], {"x": [2, 3, 4]}, {"g": w(3, 4)}, 17),
    "reducemean_opset13_attribute": ([node("ReduceMean", ["x"], ["y"], axes=[2, 3])], X4,
                                     {}, 13),
    "reducemean_opset18_input": ([node("ReduceMean", ["x", "ax"], ["y"], keepdims=0)], X4,
                                 {"ax": i64(-1)}, 18),
    "pow_sqrt": ([node("Pow", ["x", "two"], ["p"]), node("Sqrt", ["p"], ["y"])], X4,
                 {"two": np.float32(2.0)}, 13),
    "maxpool_ceil_asym_dilated": (
        [node("MaxPool", ["x"], ["y"], kernel_shape=[3, 2], strides=[2, 2], pads=[1, 0, 0, 1],
              ceil_mode=1, dilations=[1, 2])], X4, {}, 12),
    "avgpool_pads_excluded_ceil": (
        [node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2],
              pads=[1, 1, 0, 1], ceil_mode=1)], X4, {}, 19),
    "avgpool_pads_included": (
        [node("AveragePool", ["x"], ["y"], kernel_shape=[2, 3], strides=[2, 1],
              pads=[1, 1, 1, 1], count_include_pad=1)], X4, {}, 11),
    "global_pools": ([node("GlobalAveragePool", ["x"], ["a"]),
                      node("GlobalMaxPool", ["x"], ["b"])], X4, {}, 13, ["a", "b"]),
    "concat_split_opset11_attribute": (
        [node("Concat", ["x", "x"], ["c"], axis=1),
         node("Split", ["c"], ["a", "b"], axis=1, split=[3, 5])], X4, {}, 11, ["a", "b"]),
    "split_opset13_input": ([node("Split", ["x", "s"], ["a", "b"], axis=2)], X4,
                            {"s": i64(4, 3)}, 13, ["a", "b"]),
    "split_opset18_uneven_parts": ([node("Split", ["x"], ["a", "b", "c"], axis=3,
                                         num_outputs=3)], {"x": [1, 2, 3, 7]}, {}, 18,
                                   ["a", "b", "c"]),
    "flatten_reshape_transpose": (
        [node("Flatten", ["x"], ["f"], axis=2), node("Reshape", ["f", "s"], ["r"]),
         node("Transpose", ["r"], ["y"], perm=[2, 0, 1])], X4, {"s": i64(0, -1, 3)}, 13),
    "squeeze_unsqueeze_opset11_attributes": (
        [node("Unsqueeze", ["x"], ["u"], axes=[0, -1]),
         node("Squeeze", ["u"], ["y"], axes=[0, 1])], X4, {}, 11),
    "squeeze_unsqueeze_opset13_inputs": (
        [node("Unsqueeze", ["x", "a"], ["u"]), node("Squeeze", ["u", "b"], ["y"])], X4,
        {"a": i64(1, 5), "b": i64(0, 5)}, 13),
    "gather_negative_and_scalar": (
        [node("Gather", ["x", "i"], ["a"], axis=1), node("Gather", ["x", "j"], ["b"],
                                                         axis=-1)],
        X4, {"i": np.array([[-1, 0], [2, 1]], np.int64), "j": np.array(-1, np.int64)}, 13,
        ["a", "b"]),
    "slice_opset9_attributes": ([node("Slice", ["x"], ["y"], starts=[1, -4], ends=[3, 1000],
                                      axes=[1, 3])], X4, {}, 9),
    "slice_opset13_negative_steps": (
        [node("Slice", ["x", "st", "en", "ax", "sp"], ["y"])], X4,
        {"st": i64(-1, 5), "en": i64(-1000, 0), "ax": i64(2, 3), "sp": i64(-2, -1)}, 13),
    "pad_opset2_attributes": ([node("Pad", ["x"], ["y"], pads=[0, 0, 1, 2, 0, 0, 2, 1],
                                    value=1.5)], X4, {}, 2),
    "pad_constant_and_crop": ([node("Pad", ["x", "p", "v"], ["y"])], X4,
                              {"p": i64(0, 0, 1, -1, 0, 1, 0, 2), "v": np.float32(-2.0)}, 13),
    "pad_reflect_edge": ([node("Pad", ["x", "p"], ["a"], mode="reflect"),
                          node("Pad", ["x", "p"], ["b"], mode="edge")], X4,
                         {"p": i64(0, 0, 2, 1, 0, 0, 1, 3)}, 13, ["a", "b"]),
    "pad_opset18_axes": ([node("Pad", ["x", "p", "", "ax"], ["y"])], X4,
                         {"p": i64(1, 2, 3, 0), "ax": i64(-1, 2)}, 18),
    "identity_dropout_cast": (
        [node("Identity", ["x"], ["i"]), node("Dropout", ["i"], ["d"]),
         node("Cast", ["d"], ["c"], to=TensorProto.INT64),
         node("CastLike", ["c", "x"], ["y"])], X4, {}, 15),
    "shape_constant_expand": (
        [node("Shape", ["x"], ["s"], start=1), node("ConstantOfShape", ["s"], ["z"],
                                                    value=make_tensor("v", F, [1], [0.5])),
         node("Constant", [], ["k"], value_floats=[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
         node("Add", ["z", "k"], ["a"]),
         node("Constant", [], ["e"], value_ints=[2, 1, 1, 1]),
         node("Expand", ["x", "e"], ["b"])], X4, {}, 15,
        {"s": TensorProto.INT64, "a": F, "b": F}),
    "mod_both_signs": ([node("Mod", ["x", "d"], ["a"], fmod=1), node("Cast", ["x"], ["i"], to=7),
                        node("Mod", ["i", "k"], ["b"])], X4,
                       {"d": np.float32(-0.7), "k": np.array(-3, np.int64)}, 13,
                       {"a": F, "b": TensorProto.INT64}),
    "sum_mean": ([node("Sum", ["x", "a", "b"], ["s"]), node("Mean", ["x", "a", "b"], ["m"])],
                 X4, {"a": w(6), "b": w(4, 1, 1)}, 13, ["s", "m"]),
}


def _recurrent(op: str, direction: str, layout: int, states: bool, **attrs) -> tuple:
    gates = 4 if op == "LSTM" else 3
    d, hidden, embed, steps, batch = (2 if direction == "bidirectional" else 1), 5, 3, 4, 2
    names = ["x", "W", "R", "B", "", "h0"] + (["c0"] if op == "LSTM" else [])
    weights = {"W": w(d, gates * hidden, embed), "R": w(d, gates * hidden, hidden),
               "B": w(d, 2 * gates * hidden)}
    state = [batch, d, hidden] if layout else [d, batch, hidden]
    if states:
        weights |= {"h0": w(*state), "c0": w(*state)}
    else:
        names = names[:4]
    outs = ["y", "yh"] + (["yc"] if op == "LSTM" else [])
    x = [batch, steps, embed] if layout else [steps, batch, embed]
    return ([node(op, names, outs, hidden_size=hidden, direction=direction, layout=layout,
                  **attrs)], {"x": x}, {k: v for k, v in weights.items() if k in names}, 14,
            outs)


CASES |= {
    "lstm_forward_states": _recurrent("LSTM", "forward", 0, True),
    "lstm_reverse_layout1": _recurrent("LSTM", "reverse", 1, False),
    "lstm_bidirectional_layout1_states": _recurrent("LSTM", "bidirectional", 1, True),
    "gru_forward_reset_after": _recurrent("GRU", "forward", 0, True, linear_before_reset=1),
    "gru_bidirectional_reset_before": _recurrent("GRU", "bidirectional", 0, True),
    "gru_reverse_layout1": _recurrent("GRU", "reverse", 1, False, linear_before_reset=1),
}


# onnxruntime's CPU kernels refuse batch-first recurrences ("Batchwise recurrent operations
# (layout == 1) are not supported"): they are compared with onnx.reference, the
# specification's Python implementation, instead.
SPEC_ONLY = {"gru_reverse_layout1", "lstm_bidirectional_layout1_states",
             "lstm_reverse_layout1"}


@pytest.mark.parametrize("case", sorted(CASES))
def test_operator_matches_onnxruntime(case):
    nodes, inputs, weights, opset, *outputs = CASES[case]
    model = make_model(nodes, inputs, outputs[0] if outputs else ["y"], weights, opset)
    result = check_against_onnxruntime(model, spec=case in SPEC_ONLY)
    assert result["passed"], result["per_output"]


def test_the_check_catches_a_wrong_gate_order():
    """A GRU read with LSTM-like order (r before z) is far outside the tolerance: the
    comparison can fail."""
    nodes, inputs, weights, opset, outs = _recurrent("GRU", "forward", 0, True)
    good = make_model(nodes, inputs, outs, weights, opset)
    z, r, h = np.split(weights["W"], 3, axis=1)
    swapped = dict(weights, W=np.concatenate([r, z, h], axis=1))
    result = check_against_onnxruntime(good)
    assert result["passed"]
    bad = make_model(nodes, inputs, outs, swapped, opset)
    feed = seeded_inputs(good, 0)
    assert not compare(interpret(bad, feed), onnxruntime_outputs(good.SerializeToString(),
                                                                 feed))["passed"]


def test_an_unknown_operator_is_named_in_one_line():
    model = make_model([node("Celu", ["x"], ["y"], name="act7")], X4, ["y"], {}, 13)
    with pytest.raises(EmulationError, match=r"^node 'act7': operator ai.onnx.Celu has no "
                                             r"torch implementation in the emulator$"):
        check_against_onnxruntime(model)


def test_lrn_even_window_follows_the_specification():
    """onnxruntime refuses an even LRN size and onnx.reference's LRN loops over the batch
    axis instead of channels; the specification's sum, over channels
    [c - floor((size-1)/2), c + ceil((size-1)/2)], written out here, is the reference."""
    import torch

    from archipelago.strategies.chef.emulate.onnx_torch import OPS

    x = w(1, 6, 2, 2)
    size, alpha, beta, bias = 4, 0.1, 0.75, 2.0
    expected = np.empty_like(x)
    for c in range(6):
        window = x[:, max(0, c - 1):min(6, c + 3)]  # floor(3/2) = 1 before, ceil(3/2) = 2 after
        expected[:, c] = x[:, c] / (bias + alpha / size * (window ** 2).sum(1)) ** beta
    got = OPS["LRN"]([torch.from_numpy(x)], {"size": size, "alpha": alpha, "beta": beta,
                                             "bias": bias}, 13)
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-6)
