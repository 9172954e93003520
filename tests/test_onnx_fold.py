"""Constant folding and the import's small rules on hand-built ONNX graphs: weights an
exporter computes (ConstantOfShape, Identity, Cast, Reshape of initializers, a Tile only
onnx.reference evaluates), shape arithmetic on a data value's static shape, a zero Pad
absorbed into the next conv's pads, and one-line refusals naming the node and operator."""

import re

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from archipelago.errors import ConfigError  # noqa: E402
from archipelago.models.onnx_import import import_onnx  # noqa: E402

X = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])


def _save(path, nodes, weights=(), inputs=(X,), out=None) -> None:
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, out)
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


def _save_flatten(path, **inputs) -> None:
    """Flatten as the legacy exporter writes it, Reshape(x, Concat(Gather(Shape(x), 0),
    [-1])), then an FC of 192 features to 10."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
             helper.make_node("Unsqueeze", ["n", "axes"], ["n1"]),
             helper.make_node("Concat", ["n1", "minus"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["flat"]),
             helper.make_node("Gemm", ["flat", "w"], ["y"], name="fc", transB=1)]
    _save(path, nodes, [numpy_helper.from_array(np.array(0, np.int64), "zero"),
                        _ints("axes", [0]), _ints("minus", [-1]),
                        numpy_helper.from_array(np.zeros((10, 192), np.float32), "w")],
          **inputs)


def test_shape_arithmetic_on_data_is_folded(tmp_path) -> None:
    """Flatten as the legacy exporter writes it: Reshape(x, Concat(Gather(Shape(x), 0),
    [-1])); the Shape of data is a constant (static shapes), the FC reads 192 features."""
    _save_flatten(tmp_path / "s.onnx")
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


def test_a_shape_onnx_left_unknown_is_folded_once_inferred(tmp_path) -> None:
    """Swin's windows as the legacy exporter writes them: a Pad whose pads are computed
    (onnx's inference leaves its output's shape unknown, dimensions 0), then a mask of the
    padded map's size cut into 4x4 windows by a Reshape target computed from its Shape.
    Folding that Shape before inference again knew the shape made the mask 0 x 0 and the
    target [0, 4, 0, 4] (an IndexError); folded after, the mask is 8 x 8 in 2 x 4 x 2 x 4."""
    ints = {name: _ints(name, value) for name, value in (
        ("two", [2]), ("four", [4]), ("zero", [0]), ("one", [1]), ("back", [1, 1, 8, 8]))}
    half = numpy_helper.from_array(np.array([0.5], np.float32))
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
             helper.make_node("Shape", ["c"], ["cs"]),
             helper.make_node("Sub", ["cs", "cs"], ["z4"]),
             helper.make_node("Concat", ["z4", "z4"], ["pads"], axis=0),
             helper.make_node("Pad", ["c", "pads"], ["p"], name="pad"),
             helper.make_node("Shape", ["p"], ["ps"]),
             helper.make_node("Slice", ["ps", "two", "four"], ["hw"]),
             helper.make_node("ConstantOfShape", ["hw"], ["mask"], value=half),
             helper.make_node("Div", ["hw", "four"], ["halves"]),
             helper.make_node("Gather", ["halves", "zero"], ["h"], axis=0),
             helper.make_node("Gather", ["halves", "one"], ["w_"], axis=0),
             helper.make_node("Concat", ["h", "four", "w_", "four"], ["t"], axis=0),
             helper.make_node("Reshape", ["mask", "t"], ["windows"], name="windows"),
             helper.make_node("Reshape", ["windows", "back"], ["bias"]),
             helper.make_node("Add", ["p", "bias"], ["y"], name="add")]
    weight = numpy_helper.from_array(np.full((4, 3, 1, 1), 0.1, np.float32), "w")
    _save(tmp_path / "windows.onnx", nodes, [weight, *ints.values()])
    imported = import_onnx(tmp_path / "windows.onnx")
    assert imported.constants["hw"].tolist() == [8, 8]
    assert imported.constants["windows"].shape == (2, 4, 2, 4)
    (conv,) = imported.dag.layers
    assert (conv.out_ch, conv.out_rows, conv.out_cols) == (4, 8, 8)


def test_a_value_of_unknown_rank_is_inferred_again_not_taken_for_a_scalar(tmp_path) -> None:
    """nn.MultiheadAttention's in-projection split as the TorchScript exporter writes it:
    the packed projection reshaped to a target concatenated from a Slice of its Shape whose
    end is a Mod of constants, which onnx's inference does not evaluate, so it leaves the
    Reshape's output without a rank (no shape at all: read as () it passed for a known
    scalar, nothing was inferred again, and the Gather of q was refused as 'shape unknown');
    then the part gathered and projected on: FC 6 -> 6 on 4 rows, the split, FC 3 -> 5."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 6])
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["packed"], name="in_proj"),
             helper.make_node("Mod", ["seven", "five"], ["end"]),
             helper.make_node("Shape", ["packed"], ["s"]),
             helper.make_node("Slice", ["s", "zero", "end"], ["lead"]),
             helper.make_node("Concat", ["lead", "parts"], ["target"], axis=0),
             helper.make_node("Reshape", ["packed", "target"], ["split"]),
             helper.make_node("Gather", ["split", "index"], ["q"], name="q", axis=2),
             helper.make_node("MatMul", ["q", "w2"], ["y"], name="out_proj")]
    weights = [numpy_helper.from_array(np.full((6, 6), 0.1, np.float32), "w1"),
               numpy_helper.from_array(np.full((3, 5), 0.1, np.float32), "w2"),
               numpy_helper.from_array(np.array(1, np.int64), "index"),
               *(_ints(n, v) for n, v in (("seven", [7]), ("five", [5]), ("zero", [0]),
                                          ("parts", [2, 3])))]
    _save(tmp_path / "split.onnx", nodes, weights, inputs=(x,), out=[1, 4, 5])
    dag = import_onnx(tmp_path / "split.onnx").dag
    assert [(la.name, la.type, la.macs) for la in dag.layers] == [
        ("in_proj", "fc", 4 * 6 * 6), ("q", "elementwise", 0), ("out_proj", "fc", 4 * 3 * 5)]
    assert dag.by_name["q"].shape == (4, 3)


def test_a_shape_of_a_dynamic_dimension_names_the_value_not_the_operator(tmp_path) -> None:
    """A batch dimension 'N': Shape(x) is not folded (its 0 is no size); the refusal names
    the input x and its symbolic dimension (onnx_check), not the Shape operator."""
    batch = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])
    _save_flatten(tmp_path / "n.onnx", inputs=(batch,))
    with pytest.raises(ConfigError, match=r"field 'input x': dimension 0 is symbolic "
                                          r"\('N'\)"):
        import_onnx(tmp_path / "n.onnx")


def test_a_sequence_is_refused_by_its_operator(tmp_path) -> None:
    """SequenceEmpty has no inputs, so all of them are constants: it was folded into a
    Python list, which the second shape inference read as an array (AttributeError)."""
    nodes = [helper.make_node("SequenceEmpty", [], ["empty"], name="empty"),
             helper.make_node("SequenceInsert", ["empty", "x"], ["one"]),
             helper.make_node("SequenceAt", ["one", "zero"], ["y"])]
    _save(tmp_path / "seq.onnx", nodes, [numpy_helper.from_array(np.array(0, np.int64),
                                                                 "zero")], out=[1, 3, 8, 8])
    with pytest.raises(ConfigError, match=r"field 'node empty \(SequenceEmpty\)': operator "
                                          "SequenceEmpty is not supported$"):
        import_onnx(tmp_path / "seq.onnx")


@pytest.mark.parametrize(("shape", "target", "allowzero", "result"), [
    ((2, 3, 4), [0, -1], False, (2, 12)),
    ((2, 3, 4), [-1], False, (24,)),
    ((2, 3, 4), [4, 0, 2], False, (4, 3, 2)),  # the 0 copies dimension 1
    ((2, 0, 4), [0, 8], True, (0, 8)),  # allowzero: a 0 is a size
    ((2, 3, 4), [0, 0, 0, 0], False, "position 3 copies a dimension"),
    ((2, 3, 4), [5, -1], False, "(24 elements) to [5, -1]: the target does not hold"),
    ((2, 3, 4), [-1, -1], False, "at most one -1"),
    ((2, 3, 4), [6, -2, 2], False, "at most one -1"),
    ((2, 3, 4), [0, -1], True, "the target does not hold"),  # -1 beside a size 0
])
def test_reshape_targets_by_the_onnx_rules(shape, target, allowzero, result) -> None:
    from archipelago.models.onnx_fold import reshaped

    if isinstance(result, tuple):
        assert reshaped(shape, target, allowzero) == result
    else:
        with pytest.raises(ValueError, match=re.escape(result)):
            reshaped(shape, target, allowzero)


@pytest.mark.parametrize("source", ["data", "constant"])
def test_a_reshape_its_elements_cannot_fill_is_refused_naming_it(tmp_path, source) -> None:
    """A 4 x 8 x 8 map (or weight) reshaped to 5 x 7: onnx's strict inference passes it,
    and it failed only in an emulation's rank (data) or as a NumPy error (constant)."""
    reshape = helper.make_node("Reshape", ["c", "t"], ["r"], name="squeeze_it")
    if source == "data":
        nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"), reshape,
                 helper.make_node("Relu", ["r"], ["y"])]
        weights = [numpy_helper.from_array(np.zeros((4, 3, 1, 1), np.float32), "w")]
    else:  # its sum added to the input: Add's inference does not see the shape clash
        nodes = [reshape, helper.make_node("ReduceSum", ["r"], ["total"], keepdims=0),
                 helper.make_node("Add", ["x", "total"], ["y"])]
        weights = [numpy_helper.from_array(np.zeros((1, 4, 8, 8), np.float32), "c")]
    _save(tmp_path / "r.onnx", nodes, [*weights, _ints("t", [5, 7])])
    with pytest.raises(ConfigError) as err:
        import_onnx(tmp_path / "r.onnx")
    assert str(err.value).endswith(
        "field 'node squeeze_it (Reshape)': Reshape of [1, 4, 8, 8] (256 elements) to [5, 7]: "
        "the target does not hold that many elements")
