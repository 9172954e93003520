"""ONNX importer: the ONNX export of a torch module imports to the same layer DAG as the
module traced with torch.fx (an independent path through another framework's graph)."""

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")
# torch's TorchScript ONNX exporter warns about its own deprecation and tracing.
pytestmark = pytest.mark.filterwarnings("ignore")

from archipelago.errors import ConfigError  # noqa: E402
from archipelago.models.dag import ModelDAG  # noqa: E402
from archipelago.models.onnx_import import dag_from_onnx  # noqa: E402
from archipelago.models.torch_import import dag_from_module  # noqa: E402
from archipelago.models.zoo import resolve_model  # noqa: E402
from tests.test_torch_import import TwoModalitiesSafe  # noqa: E402


def _signatures(dag: ModelDAG) -> list[tuple]:
    """Each layer as its type, sizes and the signatures of what it reads: names (and the
    ONNX operators an import records as fused) aside, equal lists mean equal graphs."""
    memo: dict[str, tuple] = {}

    def sign(name: str) -> tuple:
        if name not in memo:
            layer = dag.by_name[name]
            sizes = layer.model_dump(exclude={"name", "deps", "modality", "fused"})
            memo[name] = (tuple(sorted(sizes.items())), tuple(sorted(map(sign, layer.deps))))
        return memo[name]

    return sorted(sign(layer.name) for layer in dag.layers)


def _export(module: torch.nn.Module, inputs: tuple, path) -> None:
    torch.onnx.export(module, inputs, str(path), dynamo=False)


def test_onnx_export_imports_to_the_traced_dag(tmp_path) -> None:
    module = TwoModalitiesSafe().eval()
    inputs = (torch.randn(1, 3, 8, 8), torch.randn(1, 1, 8, 8))
    traced, _ = dag_from_module(module, inputs, "two")
    _export(module, inputs, tmp_path / "two.onnx")
    imported = dag_from_onnx(tmp_path / "two.onnx")
    assert len(imported.layers) == len(traced.layers) == 8
    assert _signatures(imported) == _signatures(traced)
    assert sorted(imported.inputs.values()) == sorted(traced.inputs.values())
    assert resolve_model(str(tmp_path / "two.onnx")).name == "two"  # `archi plan x.onnx`


def test_unsupported_operators_and_bad_files_are_one_line_errors(tmp_path) -> None:
    class Dilated(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 4, 3, dilation=2)

        def forward(self, x):
            return torch.sigmoid(self.conv(x))

    _export(Dilated(), (torch.randn(1, 3, 9, 9),), tmp_path / "d.onnx")
    with pytest.raises(ConfigError, match=r"d\.onnx.*dilated"):
        dag_from_onnx(tmp_path / "d.onnx")
    (tmp_path / "junk.onnx").write_bytes(b"\x00not a model")
    with pytest.raises(ConfigError, match=r"junk\.onnx"):
        dag_from_onnx(tmp_path / "junk.onnx")
    with pytest.raises(ConfigError, match="not a readable ONNX file"):
        dag_from_onnx(tmp_path)


def _graph_file(path, nodes, inputs, weights=()) -> None:
    """A hand-built ONNX graph (opset 13): what a hostile or odd exporter may write."""
    from onnx import TensorProto, helper, save

    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    graph = helper.make_graph(nodes, "g", inputs, [y], initializer=list(weights))
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))


def test_tensors_of_the_wrong_rank_and_odd_names_are_one_line(tmp_path) -> None:
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    x3 = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8])
    _graph_file(tmp_path / "pool1d.onnx",
                [helper.make_node("MaxPool", ["x"], ["y"], name="p", kernel_shape=[2])], [x3])
    with pytest.raises(ConfigError, match=r"node p.*y is 3-D \[1, 4, 7\]; MaxPool is imported "
                                          r"on 4-D"):
        dag_from_onnx(tmp_path / "pool1d.onnx")
    x2 = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    w3 = numpy_helper.from_array(np.zeros((4, 4, 2), np.float32), "w")  # a batch of 4
    _graph_file(tmp_path / "mm3.onnx", [helper.make_node("MatMul", ["x", "w"], ["y"], name="m")],
                [x2], [w3])
    with pytest.raises(ConfigError, match=r"weight w is 3-D \[4, 4, 2\]; MatMul takes a 2-D"):
        dag_from_onnx(tmp_path / "mm3.onnx")
    w2 = numpy_helper.from_array(np.zeros((4, 3), np.float32), "w")
    _graph_file(tmp_path / "slash.onnx", [helper.make_node("MatMul", ["x", "w"], ["y"], name="/")],
                [x2], [w2])
    (layer,) = dag_from_onnx(tmp_path / "slash.onnx").layers  # "/" names no layer: its output
    assert layer.name == "y" and (layer.in_features, layer.out_features) == (4, 3)
    _graph_file(tmp_path / "twice.onnx", [
        helper.make_node("MatMul", ["x", "w"], ["h"], name="m"),
        helper.make_node("MatMul", ["h", "v"], ["y"], name="m")],
        [x2], [w2, numpy_helper.from_array(np.zeros((3, 2), np.float32), "v")])
    with pytest.raises(ConfigError, match="a second layer named 'm'; names must be unique"):
        dag_from_onnx(tmp_path / "twice.onnx")
