"""Hostile ONNX files (issue 25, "Why", ONNX): each built here with onnx.helper and given to
`archi plan FILE.onnx --strategy chef --cluster hacc`. A broken file ends in exit 2 and one
`error:` line naming the node or initializer at fault; the valid ones that were refused
before now plan, with layers checked against a hand count."""

import math
from pathlib import Path

import pytest

onnx = pytest.importorskip("onnx")
np = pytest.importorskip("numpy")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from archipelago.cli import app  # noqa: E402
from archipelago.errors import MESSAGE_LIMIT  # noqa: E402
from archipelago.models.onnx_import import dag_from_onnx  # noqa: E402

RUNNER = CliRunner()
X = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])


def _weight(name: str, shape: tuple[int, ...], value: float = 0.1) -> TensorProto:
    return numpy_helper.from_array(np.full(shape, value, np.float32), name)


def _save(path: Path, nodes: list, inputs: list | None = None, weights: list | None = None,
          opset: int = 13, out: list | None = None) -> Path:
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, out)
    graph = helper.make_graph(nodes, "g", inputs or [X], [y], initializer=weights or [])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    onnx.save(model, str(path))
    return path


def _conv_file(path: Path, weight: TensorProto | None = None, **attrs) -> Path:
    """x (1, 3, 8, 8) -> Conv 'c' with 4 output channels, 3x3 kernel."""
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="c", **attrs)
    return _save(path, [node], weights=[weight or _weight("w", (4, 3, 3, 3))])


def _plan(path: Path) -> tuple[int, str]:
    result = RUNNER.invoke(app, ["plan", str(path), "--strategy", "chef", "--cluster", "hacc",
                                 "--json"])
    return result.exit_code, result.stderr


def _refused(path: Path, pattern: str) -> str:
    """The one `error:` line `archi plan` ends with; it must match `pattern`."""
    code, stderr = _plan(path)
    lines = stderr.strip().splitlines()
    assert code == 2 and len(lines) == 1, stderr
    line = lines[0]
    assert line.startswith("error: ") and len(line) <= MESSAGE_LIMIT + len("error: "), line
    assert path.name in line
    import re

    assert re.search(pattern, line), line
    return line


def test_one_integer_window_attributes_become_lists(tmp_path) -> None:
    """strides=2, pads=1 (one integer where the spec takes a list) plan as [2, 2] and
    [1, 1, 1, 1] would; where the node's spatial rank is unknown, one line."""
    ints = _conv_file(tmp_path / "ints.onnx", strides=2, pads=1, dilations=1)
    lists = _conv_file(tmp_path / "lists.onnx", strides=[2, 2], pads=[1, 1, 1, 1])
    assert _plan(ints)[0] == 0
    (a,), (b,) = dag_from_onnx(ints).layers, dag_from_onnx(lists).layers
    assert a.model_dump() == b.model_dump()
    assert (a.stride, a.padding, a.out_rows) == (2, 1, (8 + 2 - 3) // 2 + 1)
    pool = helper.make_node("MaxPool", ["x"], ["y"], name="p", kernel_shape=2)
    _refused(_save(tmp_path / "pool.onnx", [pool]),
             r"node p \(MaxPool\)\.kernel_shape'.*one integer \(2\).*list")


def test_initializer_shorter_than_its_shape(tmp_path) -> None:
    weight = _weight("w", (4, 3, 3, 3))
    weight.raw_data = weight.raw_data[:100]
    _refused(_conv_file(tmp_path / "short.onnx", weight),
             r"initializer w'.*holds 100 bytes.*\[4, 3, 3, 3\] of FLOAT needs 432")
    typed = helper.make_tensor("w", TensorProto.FLOAT, [4, 3, 3, 3], [0.1] * 108)
    del typed.float_data[10:]
    _refused(_conv_file(tmp_path / "typed.onnx", typed),
             r"initializer w'.*holds 10 values; its shape \[4, 3, 3, 3\] needs 108")


@pytest.mark.parametrize(("data_type", "words"), [(TensorProto.UNDEFINED, "undefined"),
                                                  (99, "unknown"),
                                                  (TensorProto.STRING, "STRING")])
def test_initializer_of_an_undefined_or_unknown_element_type(tmp_path, data_type,
                                                             words) -> None:
    weight = _weight("w", (4, 3, 3, 3))
    weight.data_type = data_type
    _refused(_conv_file(tmp_path / "kind.onnx", weight),
             rf"initializer w'.*element type .*{words}.*one of BFLOAT16, BOOL")


def test_external_data_in_a_short_file(tmp_path) -> None:
    from onnx.external_data_helper import convert_model_to_external_data

    path = _conv_file(tmp_path / "ext.onnx")
    model = onnx.load(str(path))
    convert_model_to_external_data(model, location="w.bin", size_threshold=0)
    onnx.save(model, str(path))
    assert _plan(path)[0] == 0  # whole, it plans
    data = (tmp_path / "w.bin").read_bytes()
    (tmp_path / "w.bin").write_bytes(data[:50])
    _refused(path, r"initializer w'.*external data file .*w\.bin holds 50 bytes.*needs 432")
    (tmp_path / "w.bin").unlink()
    _refused(path, r"initializer w'.*external data file .*w\.bin: No such file")


def test_lstm_with_layout_1_on_a_one_dimensional_input(tmp_path) -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [5])
    lstm = helper.make_node("LSTM", ["x", "W", "R"], ["y"], name="l", hidden_size=4, layout=1)
    path = _save(tmp_path / "lstm.onnx", [lstm], [x],
                 [_weight("W", (1, 16, 5)), _weight("R", (1, 16, 4))], opset=14)
    _refused(path, r"node l \(LSTM\)'.*rank 3")
    steps = helper.make_tensor_value_info("x", TensorProto.FLOAT, [6, 1, 5])  # (T, N, E)
    lstm = helper.make_node("LSTM", ["x", "W", "R"], ["y"], name="l", hidden_size=4)
    path = _save(tmp_path / "ok.onnx", [lstm], [steps],
                 [_weight("W", (1, 16, 5)), _weight("R", (1, 16, 4))], opset=14)
    assert _plan(path)[0] == 0
    dag = dag_from_onnx(path)
    (layer,) = dag.layers
    assert (layer.cells, layer.embed, layer.hidden) == (6, 5, 4)
    assert dag.inputs == {"l": (6, 5)}  # T x E; the batch axis (the second one) dropped


def test_a_cycle_is_refused_naming_its_nodes(tmp_path) -> None:
    add = helper.make_node("Add", ["x", "y"], ["y"], name="loop_add")
    _refused(_save(tmp_path / "self.onnx", [add]), r"cycle through 1 node\(s\): loop_add")
    a = helper.make_node("Add", ["x", "b"], ["a"], name="first")
    b = helper.make_node("Relu", ["a"], ["b"], name="second")
    c = helper.make_node("Relu", ["a"], ["y"], name="out")
    _refused(_save(tmp_path / "two.onnx", [a, b, c]), r"cycle through 2 node\(s\): "
                                                       r"(first -> second|second -> first)")


def test_opset_999_and_an_unknown_ir_version(tmp_path) -> None:
    path = _save(tmp_path / "opset.onnx", [helper.make_node("Relu", ["x"], ["y"])], opset=999)
    _refused(path, r"'opset_import': opset 999 is outside 6\.\.\d+")
    model = onnx.load(str(path))
    model.ir_version = 999
    onnx.save(model, str(path))
    _refused(path, r"'ir_version': IR version 999 is outside 3\.\.\d+")


def test_negative_and_zero_dimensions(tmp_path) -> None:
    weight = _weight("w", (4, 3, 3, 3))
    weight.dims[0] = -4
    _refused(_conv_file(tmp_path / "neg.onnx", weight), r"initializer w'.*dimension -4")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, -8, 8])
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="c")
    _refused(_save(tmp_path / "negx.onnx", [node], [x], [_weight("w", (4, 3, 3, 3))]),
             r"value x'.*\[1, 3, -8, 8\] has a dimension below 1")
    zero = numpy_helper.from_array(np.zeros((0, 3, 3, 3), np.float32), "w")
    _refused(_conv_file(tmp_path / "zero.onnx", zero), r"initializer w'.*dimension 0")


def test_non_finite_weights(tmp_path) -> None:
    values = np.full((4, 3, 3, 3), 0.1, np.float32)
    values[1, 2, 0, 0], values[3, 0, 1, 1] = np.nan, np.inf
    _refused(_conv_file(tmp_path / "nan.onnx", numpy_helper.from_array(values, "w")),
             r"initializer w'.*2 of its 108 weights are not finite \(first: nan\)")


def test_an_if_node(tmp_path) -> None:
    branch = helper.make_graph([helper.make_node("Relu", ["x"], ["r"])], "b", [],
                               [helper.make_tensor_value_info("r", TensorProto.FLOAT, None)])
    cond = numpy_helper.from_array(np.array(True), "cond")
    node = helper.make_node("If", ["cond"], ["y"], name="branchy", then_branch=branch,
                            else_branch=branch)
    path = _save(tmp_path / "if.onnx", [node], weights=[cond], out=[1, 3, 8, 8])
    _refused(path, r"node branchy \(If\)'.*control flow")


def test_a_conv_branch_added_to_a_concat_plans(tmp_path) -> None:
    """y = Concat(conv a, conv b) + conv c: the concatenation becomes its own layer (a 1x1
    pool joining a and b), which the Add reads beside c; hand-counted sizes."""
    nodes = [helper.make_node("Conv", ["x", "wa"], ["a"], name="a", pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["x", "wb"], ["b"], name="b"),
             helper.make_node("Concat", ["a", "b"], ["ab"], name="cat", axis=1),
             helper.make_node("Conv", ["x", "wc"], ["c"], name="c"),
             helper.make_node("Add", ["ab", "c"], ["y"], name="sum")]
    weights = [_weight("wa", (2, 3, 3, 3)), _weight("wb", (4, 3, 1, 1)),
               _weight("wc", (6, 3, 1, 1))]
    path = _save(tmp_path / "branch.onnx", nodes, weights=weights, out=[1, 6, 8, 8])
    code, stderr = _plan(path)
    assert code == 0, stderr
    dag = dag_from_onnx(path)
    layers = {layer.name: layer for layer in dag.layers}
    assert sorted(layers) == ["a", "ab", "b", "c", "sum"]
    assert layers["ab"].deps == ("a", "b") and layers["ab"].out_shape == (6, 8, 8)
    assert layers["sum"].deps == ("ab", "c") and layers["sum"].out_shape == (6, 8, 8)
    macs = 2 * 3 * 9 * 64 + 4 * 3 * 64 + 6 * 3 * 64
    assert sum(getattr(la, "macs", 0) for la in dag.layers) == macs


def _conv2d_models() -> list[Path]:
    root = Path(onnx.__file__).parent / "backend" / "test" / "data" / "pytorch-converted"
    return sorted(p / "model.onnx" for p in root.glob("test_Conv2d*"))


@pytest.mark.skipif(not _conv2d_models(), reason="onnx's backend test data not installed")
def test_the_onnx_packages_own_conv2d_models(tmp_path) -> None:
    """Opset 6, IR 3 exports of nn.Conv2d (batch 2): they import, non-square kernels and
    groups costed as such (MACs: the weight's elements per output position, a hand
    count), or are refused for what they are (dilation), never for a shape the file does
    not declare."""
    for model in _conv2d_models():
        name = model.parent.name
        copy = tmp_path / f"{name}.onnx"
        copy.write_bytes(model.read_bytes())
        if name == "test_Conv2d_dilated":
            _refused(copy, r"node \d+ \(Conv\)'.*dilations \[2, 2\]")
            continue
        if name in ("test_Conv2d_padding", "test_Conv2d_strided"):
            code, stderr = _plan(copy)
            assert code == 0, stderr
        (layer,) = dag_from_onnx(copy).layers
        (kernel,) = [t.dims for t in onnx.load(str(copy)).graph.initializer
                     if len(t.dims) == 4]
        assert layer.macs == math.prod(kernel) * layer.out_rows * layer.out_cols
        assert layer.window == tuple(kernel[2:]) and layer.groups * kernel[1] == layer.in_ch


def test_long_names_are_elided_in_the_middle(tmp_path) -> None:
    """A 5,000-character initializer name: the line keeps its start and end, within the
    limit, and still names the file."""
    values = np.full((4, 3, 3, 3), np.nan, np.float32)
    name = "head_" + "x" * 5000 + "_tail"
    node = helper.make_node("Conv", ["x", name], ["y"], name="c")
    path = _save(tmp_path / "long.onnx", [node], weights=[numpy_helper.from_array(values, name)])
    line = _refused(path, r"initializer head_x+\.\.\.\[5,010 characters\]\.\.\.x+_tail'.*not "
                          r"finite")
    assert len(line) <= MESSAGE_LIMIT + len("error: ")


def test_elide_keeps_both_ends_within_the_limit() -> None:
    from archipelago.errors import elide

    assert elide("a" * 10 + "b" * 10, 11) == "aaa ... bbb"
    assert elide("short", 11) == "short"
    assert len(elide("x" * 100_000, MESSAGE_LIMIT)) == MESSAGE_LIMIT


def test_a_file_past_protobufs_limit_is_refused_before_loading(tmp_path) -> None:
    """A 2 GiB + 1 byte file (sparse: no disk used) is refused by its size, naming the file
    and the limit, without onnx reading a byte of it."""
    from archipelago.models import onnx_check

    path = tmp_path / "huge.onnx"
    with open(path, "wb") as file:
        file.truncate(onnx_check.MAX_MODEL_BYTES + 1)
    line = _refused(path, r"huge\.onnx: field 'file': is 2,147,483,648 bytes; an ONNX file "
                          r"holds at most 2,147,483,647 \(2 GiB, protobuf's limit\)")
    assert "external data" in line


def test_external_data_past_the_limit_is_refused_before_loading(tmp_path) -> None:
    """Two initializers whose external data (sparse files) sum past MAX_EXTERNAL_BYTES: the
    second is refused by name with the limit; the first alone plans on (is only checked)."""
    from archipelago.models import onnx_check

    half = onnx_check.MAX_EXTERNAL_BYTES // 2 + 4  # bytes: two of them pass the limit
    weights = []
    for name in ("a", "b"):
        tensor = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=[half // 4],
                             data_location=TensorProto.EXTERNAL)
        tensor.external_data.add(key="location", value=f"{name}.bin")
        with open(tmp_path / f"{name}.bin", "wb") as file:
            file.truncate(half)
        weights.append(tensor)
    nodes = [helper.make_node("Identity", ["x"], ["y"], name="i")]
    path = _save(tmp_path / "big.onnx", nodes, weights=weights, out=[1, 3, 8, 8])
    _refused(path, rf"initializer b': external data reaches {2 * half:,} bytes with this "
                   rf"initializer; the limit is {onnx_check.MAX_EXTERNAL_BYTES:,} \(8 GiB\)")
