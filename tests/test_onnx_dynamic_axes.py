"""ONNX files exported as users often export them, with dynamic axes (a symbolic batch and
sequence): refused in one line naming the input, the axis and its symbol, with onnxruntime's
own command that fixes it; run as the line says, the fixed file imports as the same layers
as a static export of the same network."""

import subprocess
import sys
import warnings
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnxruntime")
from torch import nn  # noqa: E402

from archipelago.errors import ConfigError  # noqa: E402
from archipelago.models.onnx_import import dag_from_onnx  # noqa: E402
from tests.test_onnx_exported import ResidualBlock  # noqa: E402


class TokenMLP(nn.Module):
    """Token embeddings through a two-layer MLP, mean-pooled over the sequence."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(100, 16)
        self.mlp = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 16))

    def forward(self, ids):
        return self.mlp(self.embed(ids)).mean(1)


def _export(module: nn.Module, example: torch.Tensor, path: Path,
            axes: dict[int, str] | None) -> Path:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module.eval(), (example,), str(path), input_names=["x"],
                          output_names=["y"], dynamo=False,
                          dynamic_axes=None if axes is None else {"x": axes, "y": {0: axes[0]}})
    return path


def _fixed(path: Path, sizes: dict[str, int]) -> Path:
    """`path` with each symbol given its size by the command the refusal names."""
    for symbol, size in sizes.items():
        out = path.with_name(f"{path.stem}-{symbol}.onnx")
        subprocess.run([sys.executable, "-m", "onnxruntime.tools.make_dynamic_shape_fixed",
                        "--dim_param", symbol, "--dim_value", str(size), str(path), str(out)],
                       check=True, capture_output=True)
        path = out
    return path


def _layers(path: Path) -> list[dict]:
    return [la.model_dump() for la in dag_from_onnx(path).layers]


@pytest.mark.parametrize(("network", "example", "axes"), [
    (ResidualBlock, torch.randn(1, 3, 8, 8), {0: "batch"}),
    (TokenMLP, torch.randint(0, 100, (1, 12)), {0: "batch", 1: "sequence"}),
])
def test_dynamic_axes_are_refused_then_import_as_the_static_export_once_fixed(
        tmp_path, network, example, axes):
    torch.manual_seed(0)
    module = network()
    dynamic = _export(module, example, tmp_path / "dynamic.onnx", axes)
    static = _export(module, example, tmp_path / "static.onnx", None)
    with pytest.raises(ConfigError) as refused:
        dag_from_onnx(dynamic)
    line = str(refused.value)
    assert "\n" not in line and "input x" in line
    assert "dimension 0 is symbolic ('batch')" in line
    assert ("python -m onnxruntime.tools.make_dynamic_shape_fixed --dim_param batch "
            "--dim_value N IN.onnx OUT.onnx") in line
    sizes = {symbol: example.shape[axis] for axis, symbol in axes.items()}
    assert _layers(_fixed(dynamic, sizes)) == _layers(static)
