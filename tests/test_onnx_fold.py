"""Constant folding and the import's small rules on hand-built ONNX graphs: weights an
exporter computes (ConstantOfShape, Identity, Cast, Reshape of initializers, a Tile only
onnx.reference evaluates), shape arithmetic on a data value's static shape, a zero Pad
absorbed into the next conv's pads, and one-line refusals naming the node and operator."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from archipelago.errors import ConfigError  # noqa: E402
from archipelago.models.onnx_import import import_onnx  # noqa: E402

X = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])


def _save(path, nodes, weights=(), inputs=(X,)) -> None:
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    graph = helper.make_graph(nodes, "g", list(inputs), [y], initializer=list(weights))
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))


def _ints(name: str, values: list[int]) -> TensorProto:
    return numpy_helper.from_array(np.array(values, np.int64), name)


def test_weights_computed_from_initializers_are_folded(tmp_path) -> None:
    """w = Identity(Cast(Reshape(ConstantOfShape([108]), [4, 3, 3, 3]))), b = Tile of a
    one-element Constant: the conv imports with those weights; each folded node counted."""
    fill = numpy_helper.from_array(np.array([0.5], np.float32), "fill")
    nodes = [helper.make_node("ConstantOfShape", ["n"], ["flat"], value=fill),
             helper.make_node("Reshape", ["flat", "dims"], ["w4"]),
             helper.make_node("Cast", ["w4"], ["w32"], to=TensorProto.FLOAT),
             helper.make_node("Identity", ["w32"], ["w"]),
             helper.make_node("Constant", [], ["one"],
                              value=numpy_helper.from_array(np.array([0.25], np.float32))),
             helper.make_node("Tile", ["one", "reps"], ["b"]),
             helper.make_node("Conv", ["x", "w", "b"], ["y"], name="c", pads=[1, 1, 1, 1])]
    _save(tmp_path / "f.onnx", nodes, [_ints("n", [108]), _ints("dims", [4, 3, 3, 3]),
                                       _ints("reps", [4])])
    imported = import_onnx(tmp_path / "f.onnx")
    assert imported.dag.folded == {"Cast": 1, "Constant": 1, "ConstantOfShape": 1,
                                   "Identity": 1, "Reshape": 1, "Tile": 1}
    (conv,) = imported.dag.layers
    assert (conv.out_ch, conv.in_ch, conv.window, conv.padding) == (4, 3, (3, 3), 1)
    assert imported.layer_nodes == {"c": (6,)} and imported.layer_inputs == {"c": ("x",)}
    assert np.array_equal(imported.constants["w"], np.full((4, 3, 3, 3), 0.5, np.float32))
    assert np.array_equal(imported.constants["b"], np.full(4, 0.25, np.float32))


def test_shape_arithmetic_on_data_is_folded(tmp_path) -> None:
    """Flatten as the legacy exporter writes it: Reshape(x, Concat(Gather(Shape(x), 0),
    [-1])); the Shape of data is a constant (static shapes), the FC reads 192 features."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
             helper.make_node("Unsqueeze", ["n", "axes"], ["n1"]),
             helper.make_node("Concat", ["n1", "minus"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["flat"]),
             helper.make_node("Gemm", ["flat", "w"], ["y"], name="fc", transB=1)]
    weight = numpy_helper.from_array(np.zeros((10, 192), np.float32), "w")
    zero = numpy_helper.from_array(np.array(0, np.int64), "zero")
    _save(tmp_path / "s.onnx", nodes, [zero, _ints("axes", [0]), _ints("minus", [-1]), weight])
    imported = import_onnx(tmp_path / "s.onnx")
    (fc,) = imported.dag.layers
    assert (fc.in_features, fc.out_features, fc.macs) == (192, 10, 1920)
    assert imported.dag.folded == {"Concat": 1, "Gather": 1, "Shape": 1, "Unsqueeze": 1}
    assert imported.layer_nodes == {"fc": (4, 5)}  # the Reshape runs in the FC's layer
    assert imported.dag.inputs == {"fc": (3, 8, 8)}


def test_a_zero_pad_is_absorbed_into_the_conv_after_it(tmp_path) -> None:
    """Pad [0, 0, 1, 2, 0, 0, 3, 4] (rows 1 before, 3 after; cols 2 before, 4 after):
    the conv's pads become (1, 2, 3, 4), its input the 8x8 map; output 10 x 12."""
    nodes = [helper.make_node("Pad", ["x", "pads"], ["p"], name="pad"),
             helper.make_node("Conv", ["p", "w"], ["y"], name="c")]
    weights = [_ints("pads", [0, 0, 1, 2, 0, 0, 3, 4]),
               numpy_helper.from_array(np.zeros((2, 3, 3, 3), np.float32), "w")]
    _save(tmp_path / "pad.onnx", nodes, weights)
    (conv,) = import_onnx(tmp_path / "pad.onnx").dag.layers
    assert conv.borders == (1, 2, 3, 4) and (conv.out_rows, conv.out_cols) == (10, 12)
    assert conv.macs == 2 * 3 * 9 * 10 * 12
    weights[0] = _ints("pads", [0, 1, 0, 0, 0, 0, 0, 0])  # padding channels
    _save(tmp_path / "chan.onnx", nodes, weights)
    with pytest.raises(ConfigError, match=r"node pad \(Pad\).*zero padding of a feature "
                                          r"map's rows and columns"):
        import_onnx(tmp_path / "chan.onnx")


def test_an_unsupported_operator_is_one_line_naming_it(tmp_path) -> None:
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
             helper.make_node("TopK", ["c", "k"], ["y", "idx"], name="best", axis=1)]
    _save(tmp_path / "topk.onnx", nodes,
          [numpy_helper.from_array(np.zeros((4, 3, 1, 1), np.float32), "w"),
           _ints("k", [2])])
    with pytest.raises(ConfigError) as err:
        import_onnx(tmp_path / "topk.onnx")
    message = str(err.value)
    assert "\n" not in message and "topk.onnx" in message
    assert message.endswith("field 'node best (TopK)': operator TopK is not supported")


def test_ceil_mode_and_auto_pad_windows(tmp_path) -> None:
    """MaxPool 3x3 stride 2 with ceil_mode on 8x8: (8 - 3) / 2 + 1 = 3.5 -> 4 rows, the last
    window reading one row past the input: pads (0, 0, 1, 1). A SAME_UPPER 4x4 stride-2
    conv on 8x8 gives 4x4: total padding (4-1)*2 + 4 - 8 = 2, one each side."""
    pool = helper.make_node("MaxPool", ["x"], ["p"], name="p", kernel_shape=[3, 3],
                            strides=[2, 2], ceil_mode=1)
    head = helper.make_node("Conv", ["p", "w"], ["y"], name="c")  # a DAG needs compute
    weight = numpy_helper.from_array(np.zeros((2, 3, 1, 1), np.float32), "w")
    _save(tmp_path / "ceil.onnx", [pool, head], [weight])
    layer = import_onnx(tmp_path / "ceil.onnx").dag.by_name["p"]
    assert (layer.out_rows, layer.borders) == (4, (0, 0, 1, 1))
    conv = helper.make_node("Conv", ["x", "w"], ["y"], name="c", kernel_shape=[4, 4],
                            strides=[2, 2], auto_pad="SAME_UPPER")
    _save(tmp_path / "same.onnx", [conv],
          [numpy_helper.from_array(np.zeros((2, 3, 4, 4), np.float32), "w")])
    (layer,) = import_onnx(tmp_path / "same.onnx").dag.layers
    assert (layer.out_rows, layer.borders) == (4, (1, 1, 1, 1))
