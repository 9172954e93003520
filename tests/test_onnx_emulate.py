"""The split emulation of exported networks against onnxruntime: each network written as
users write it in torch, exported, split over two FPGA processes, and compared with
onnxruntime on the original file (tolerance: onnx_run.RTOL / ATOL)."""

import warnings
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("onnxruntime")

from archipelago.emulate.errors import RankFailure
from archipelago.strategies.chef.emulate.onnx_run import RTOL, emulate_onnx
from tests.onnx_cases import node_layers
from tests.onnx_networks import export

FPGAS = ["fpga0", "fpga1"]


def _split(imported, chunk: int = 3) -> tuple[dict[str, int], list[str]]:
    """Consecutive runs of `chunk` layers alternate between the two processes, so values
    cross in both directions."""
    order = sorted(imported.layer_nodes, key=lambda n: min(imported.layer_nodes[n]))
    return {n: (i // chunk) % 2 for i, n in enumerate(order)}, order


def _emulate(path: Path, imported=None, **kwargs) -> dict:
    imported = imported or node_layers(path)
    placement, order = _split(imported)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads (torch)
        return emulate_onnx(path, imported, placement, order, FPGAS, seed=1, **kwargs)


@pytest.mark.parametrize("name,dynamo,fold", [
    ("residual_cnn", False, False), ("residual_cnn", True, True),
    ("depthwise_cnn", False, True), ("depthwise_cnn", True, True),
    ("vit_block", False, True), ("vit_block", True, True),
    ("bilstm", False, True), ("bilstm", True, True)])
def test_network_split_over_two_processes_equals_onnxruntime(name, dynamo, fold, tmp_path):
    path = export(name, tmp_path / f"{name}.onnx", dynamo, fold)
    report = _emulate(path)
    assert report["passed"], report["per_output"]
    assert report["max_rel_error"] < RTOL
    assert set(report["bytes_per_link"]) == {"fpga0->fpga1", "fpga1->fpga0"}
    assert report["reference"].startswith("onnxruntime ")


def test_a_wrong_weight_on_one_fpga_fails_the_comparison(tmp_path):
    """The check can fail: one conv's weight off by a percent is far outside tolerance."""
    path = export("residual_cnn", tmp_path / "r.onnx", dynamo=False)
    imported = node_layers(path)
    conv_weight = next(k for k, v in imported.constants.items() if v.ndim == 4)
    constants = dict(imported.constants)
    constants[conv_weight] = constants[conv_weight] * np.float32(1.01)
    report = _emulate(path, type(imported)(imported.layer_nodes, imported.layer_inputs,
                                           imported.layer_outputs, constants))
    assert not report["passed"] and report["max_rel_error"] > 10 * RTOL


def test_an_operator_the_interpreter_lacks_names_its_rank_and_node(tmp_path):
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"], name="first"),
         helper.make_node("Celu", ["r"], ["y"], name="odd")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    path = tmp_path / "celu.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    imported = node_layers(path)
    with pytest.raises(RankFailure, match=r"^rank 1: FPGA 'fpga1': layer 'n1': EmulationError: "
                                          r"node 'odd': operator ai.onnx.Celu has no torch"):
        emulate_onnx(path, imported, {"n0": 0, "n1": 1}, ["n0", "n1"], FPGAS)
