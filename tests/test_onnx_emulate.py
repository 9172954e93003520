"""The split emulation of exported networks against onnxruntime: each network written as
users write it in torch, exported, imported (models/onnx_import.py), its layers split over
two FPGA processes, and compared with onnxruntime on the original file (tolerance:
onnx_run.RTOL / ATOL). A stand-in import with every node its own layer splits a graph
node by node where the importer would refuse it or to place one node's weights."""

import warnings
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("onnxruntime")

from archipelago.emulate.errors import EmulationError
from archipelago.models.onnx_import import import_onnx
from archipelago.strategies.chef.emulate.onnx_run import RTOL, emulate_onnx
from tests.onnx_cases import node_layers

FPGAS = ["fpga0", "fpga1"]
# The layer types each network's import must hold (so the split runs what it is meant to).
TYPES = {"residual_cnn": {"conv", "add", "pool", "fc"},
         "depthwise_cnn": {"conv", "elementwise", "fc"},
         "vit_block": {"conv", "elementwise", "matmul", "fc"},
         "bilstm": {"lstm", "fc"}, "bigru": {"lstm", "fc"}}


def _split(imported) -> tuple[dict[str, int], list[str]]:
    """Layers in dependency order (the DAG's; graph order for the stand-in) alternate
    between the two processes, so values cross in both directions."""
    dag = getattr(imported, "dag", None)
    order = list(dag.order) if dag else sorted(imported.layer_nodes,
                                               key=lambda n: imported.layer_nodes[n])
    return {n: i % 2 for i, n in enumerate(order)}, order


def _emulate(path: Path, imported=None, **kwargs) -> dict:
    imported = imported or import_onnx(path)
    placement, order = _split(imported)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads (torch)
        return emulate_onnx(path, imported, placement, order, FPGAS, seed=1, **kwargs)


@pytest.mark.parametrize("name,dynamo,fold,opset", [
    ("residual_cnn", False, False, None), ("residual_cnn", True, True, None),
    ("depthwise_cnn", False, True, None), ("depthwise_cnn", True, True, None),
    ("vit_block", False, True, None), ("vit_block", True, True, None),
    ("vit_block", False, True, 14),  # LayerNormalization and GELU decomposed
    ("bilstm", False, True, None), ("bilstm", True, True, None), ("bigru", False, True, None)])
def test_network_split_over_two_processes_equals_onnxruntime(name, dynamo, fold, opset,
                                                             onnx_network):
    path = onnx_network(name, dynamo, fold, opset)
    imported = import_onnx(path)
    assert {d.type for d in imported.dag.layers} >= TYPES[name]
    report = _emulate(path, imported)
    assert report["passed"], report["per_output"]
    assert report["max_rel_error"] < RTOL
    assert set(report["bytes_per_link"]) == {"fpga0->fpga1", "fpga1->fpga0"}
    assert report["reference"].startswith("onnxruntime ")


def test_a_wrong_weight_on_one_fpga_fails_the_comparison(onnx_network):
    """The check can fail: one conv's weight off by a percent is far outside tolerance."""
    path = onnx_network("residual_cnn", dynamo=False)
    imported = node_layers(path)  # one node per layer: one conv's weight on one FPGA
    conv_weight = next(k for k, v in imported.constants.items() if v.ndim == 4)
    constants = dict(imported.constants)
    constants[conv_weight] = constants[conv_weight] * np.float32(1.01)
    report = _emulate(path, type(imported)(imported.layer_nodes, imported.layer_inputs,
                                           imported.layer_outputs, constants))
    assert not report["passed"] and not report["agrees"]
    assert report["max_rel_error"] > 10 * RTOL


def test_an_operator_the_interpreter_lacks_is_named_before_any_process(tmp_path):
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"], name="first"),
         helper.make_node("Celu", ["r"], ["y"], name="odd")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    path = tmp_path / "celu.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    with pytest.raises(EmulationError, match=r"^node 'odd': operator ai.onnx.Celu has no "
                                             r"torch implementation in the emulator$"):
        emulate_onnx(path, node_layers(path), {"n0": 0, "n1": 1}, ["n0", "n1"], FPGAS)


def test_a_layer_scheduled_before_the_one_it_reads_on_its_fpga_is_refused(tmp_path):
    path = _tiny_resnet(tmp_path / "tiny.onnx")
    imported = node_layers(path)
    placement = dict.fromkeys(imported.layer_nodes, 0)
    order = ["n2", "n0", "n1", *(f"n{i}" for i in range(3, 8))]
    with pytest.raises(EmulationError, match=r"^layer 'n2' reads 'r1' before the layer on "
                                             r"its FPGA that computes it runs"):
        emulate_onnx(path, imported, placement, order, FPGAS)


def _tiny_resnet(path: Path) -> Path:
    """conv-relu, conv, residual add-relu, global pool, flatten, fc: a graph today's
    importer reads, with the layers it forms written out below."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    node = helper.make_node
    nodes = [node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
             node("Relu", ["c1"], ["r1"], name="relu1"),
             node("Conv", ["r1", "w2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
             node("Add", ["c2", "r1"], ["a"], name="add"),
             node("Relu", ["a"], ["r2"], name="relu2"),
             node("GlobalAveragePool", ["r2"], ["g"], name="gap"),
             node("Flatten", ["g"], ["f"], name="flat"),
             node("Gemm", ["f", "wf", "bf"], ["y"], name="fc", transB=1)]
    shapes = {"w1": (4, 3, 3, 3), "b1": (4,), "w2": (4, 4, 3, 3), "wf": (5, 4), "bf": (5,)}
    graph = helper.make_graph(
        nodes, "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 6, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5])],
        [numpy_helper.from_array(rng.standard_normal(s).astype(np.float32), n)
         for n, s in shapes.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def test_archi_emulate_of_an_onnx_file_compares_the_plan_with_onnxruntime(tmp_path):
    from rich.console import Console

    from archipelago import api
    from archipelago.strategies.chef.report import print_emulation

    path = _tiny_resnet(tmp_path / "tiny.onnx")
    report = api.emulate(str(path), "chef-cluster1", "chef", seed=2)
    assert report["passed"] and report["processes"] == 6
    placed = sorted(n for names in report["layers_per_fpga"].values() for n in names)
    assert placed == sorted(import_onnx(path).layer_nodes)
    assert report["strategy"] == "chef" and report["cluster"] == "chef-cluster1"
    assert report["tolerance"] == {"rtol": RTOL, "atol": 1e-5}
    console = Console(record=True, width=200)
    print_emulation(report, console)
    text = console.export_text()
    assert "6 FPGA processes against onnxruntime" in text and ": PASS (max |error|" in text


@pytest.mark.parametrize("name", ["squeezenet", "shufflenet", "inception_v1", "inception_v2",
                                  "resnet50", "densenet121"])
def test_onnx_light_model_as_shipped_split_equals_onnxruntime(name):
    """The onnx package's light models as shipped (weights from ConstantOfShape nodes,
    ImageNet-size inputs; fire modules' Concat, the channel shuffle's Reshape-Transpose,
    LRN, BatchNormalization, Sum, Softmax), imported and split over two processes. (The
    other three, AlexNet, VGG-19 and ZFNet-512, pass too, in 0.5-2.5 s each: left out to
    keep the suite fast.)"""
    import onnx

    path = Path(onnx.__file__).parent / "backend/test/data/light" / f"light_{name}.onnx"
    report = _emulate(path)
    assert report["passed"], report["per_output"]


def test_archi_emulate_command_prints_the_check_and_its_json(onnx_network):
    """The command as a user runs it, on a file the user exported (h2h's plan on six
    FPGAs); chef's text output from the same command run in this process (one fresh
    interpreter importing torch is enough to show the command runs as a user's)."""
    import json

    from tests.cli_here import archi_here
    from tests.test_chef_cli import archi

    path = onnx_network("depthwise_cnn", dynamo=True)
    out = archi("emulate", str(path), "--cluster", "chef-cluster1", "--strategy", "h2h",
                "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["passed"] and data["agrees"] and data["processes"] == 6
    assert data["max_abs_error"] <= data["tolerance"]["atol"] + data["tolerance"]["rtol"]
    assert set(data["per_output"]) == {"output"}
    text = archi_here("emulate", str(path), "--cluster", "hacc", "--strategy", "chef")
    assert text.returncode == 0, text.stderr
    assert "2 FPGA processes against onnxruntime" in text.stdout and "PASS" in text.stdout


def test_what_the_reference_cannot_run_is_said_in_one_line(tmp_path):
    """An integer input (the emulation seeds FLOAT ones) and a batch-first LSTM (which
    onnxruntime's CPU kernel refuses) are refused in one line, not a traceback."""
    import onnx
    from onnx import TensorProto, helper

    from tests.onnx_cases import make_model

    ids = helper.make_graph([helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT)],
                            "g", [helper.make_tensor_value_info("x", TensorProto.INT64, [3])],
                            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])])
    path = tmp_path / "ids.onnx"
    onnx.save(helper.make_model(ids, opset_imports=[helper.make_opsetid("", 13)]), path)
    with pytest.raises(EmulationError, match=r"^input 'x' is of ONNX type INT64; the "
                       r"emulation feeds seeded FLOAT inputs, and integer ones only as "
                       r"token ids of an embedding table or as an attention mask "
                       r"\(cast to booleans\)$"):
        emulate_onnx(path, node_layers(path), {"n0": 0}, ["n0"], FPGAS)
    rng = np.random.default_rng(0)
    lstm = make_model([helper.make_node("LSTM", ["x", "W", "R"], ["y"], hidden_size=2,
                                        layout=1)], {"x": [1, 3, 2]}, ["y"],
                      {"W": rng.standard_normal((1, 8, 2)).astype(np.float32),
                       "R": rng.standard_normal((1, 8, 2)).astype(np.float32)}, 14)
    path = tmp_path / "lstm.onnx"
    onnx.save(lstm, path)
    with pytest.raises(EmulationError, match=r"^onnxruntime, the reference, refuses the "
                                             r"model: Exception during initialization: "
                                             r"layout_ == 0 was"):
        emulate_onnx(path, node_layers(path), {"n0": 0}, ["n0"], FPGAS)


def test_weights_that_overflow_float32_blame_the_model_in_one_line(tmp_path):
    """Two 1x1 convs with every weight 3e38 (float32 reaches 3.4e38): onnxruntime's own
    output is NaN (inf - inf over the seeded inputs' signs), which was compared, warned
    about by numpy and reported as "max_abs_error is nan: a bug in the emulation"."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from tests.test_chef_cli import archi

    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
         helper.make_node("Conv", ["c", "w2"], ["y"], name="conv2")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])],
        initializer=[numpy_helper.from_array(np.full(shape, 3e38, np.float32), name)
                     for name, shape in (("w", (4, 3, 1, 1)), ("w2", (4, 4, 1, 1)))])
    path = tmp_path / "huge.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    out = archi("emulate", str(path), "--cluster", "hacc", "--strategy", "chef")
    assert out.returncode == 2 and out.stdout == ""
    assert len(out.stderr.splitlines()) == 1 and out.stderr.startswith("error: /")
    assert out.stderr.endswith("huge.onnx: the model's numbers overflow float32: "
                               "onnxruntime's own output 'y' holds NaN (largest weight "
                               "3e+38; float32 reaches 3.4e+38), so there is nothing to "
                               "check the emulation against; scale the weights down\n")


@pytest.mark.parametrize("case", ["mobile_tf_pad", "hand_attention", "lstm_reading_T_E"])
def test_the_importers_own_test_networks_split_equal_onnxruntime(case, tmp_path):
    """The networks tests/test_onnx_exported.py imports (a zero Pad absorbed into the next
    conv's pads, attention written by hand as q @ k^T, an LSTM reading a (T, E) input)
    split over two processes."""
    from torch import nn

    from tests import test_onnx_exported as exported

    module, shape = {"mobile_tf_pad": (exported.MobileBlock(), (1, 3, 16, 16)),
                     "hand_attention": (exported.EncoderBlock(), (1, 5, 12)),
                     "lstm_reading_T_E": (nn.LSTM(8, 4), (6, 8))}[case]
    path = tmp_path / "n.onnx"
    imported = exported._export(module, shape, path, dynamo=False)
    report = _emulate(path, imported)
    assert report["passed"], report["per_output"]
