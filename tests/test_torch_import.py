"""torch.fx importer: a user's two-modality module becomes a DAG that computes the same;
the same module saved with torch.export (`archi plan model.pt2`) becomes the same DAG."""

import pytest

torch = pytest.importorskip("torch")

from archipelago.errors import ConfigError  # noqa: E402
from archipelago.families import resolve  # noqa: E402
from archipelago.models.torch_export import dag_from_exported  # noqa: E402
from archipelago.models.torch_import import dag_from_module  # noqa: E402
from archipelago.strategies.chef.emulate.dag_torch import run_dag  # noqa: E402


def module_weights(module, params: dict[str, str]) -> dict[str, list[torch.Tensor]]:
    """Weights of an imported module, in layer_weights' order (absent biases as zeros)."""
    out = {}
    for layer, path in params.items():
        sub = module.get_submodule(path)
        if isinstance(sub, torch.nn.LSTM):
            out[layer] = [sub.weight_ih_l0, sub.weight_hh_l0, sub.bias_ih_l0, sub.bias_hh_l0]
        else:
            bias = sub.bias if sub.bias is not None else torch.zeros(sub.weight.shape[0])
            out[layer] = [sub.weight, bias]
    return {k: [t.detach() for t in v] for k, v in out.items()}


class TwoModalitiesSafe(torch.nn.Module):
    """Two modalities, a residual add, channel concat, an LSTM over the joined map and a
    fused head reading both the sequence and a pooled summary."""

    def __init__(self) -> None:
        super().__init__()
        nn = torch.nn
        self.img1 = nn.Conv2d(3, 8, 3, padding=1)
        self.img2 = nn.Conv2d(8, 8, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.aud = nn.Conv2d(1, 4, 3, stride=2, padding=1)
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.seq = nn.LSTM(32, 12, batch_first=True)
        self.head = nn.Linear(6 * 12 + 12, 5)

    def forward(self, image, audio):
        x = torch.relu(self.img1(image))
        x = torch.relu(self.img2(x) + x)
        x = self.pool(x)
        a = self.aud(audio).relu()
        joined = torch.cat([x, a], dim=1)  # 12 x 4 x 4 = 6 cells x 32
        g = self.gap(joined).flatten(1)
        s, _ = self.seq(joined.reshape(1, 6, 32))
        return self.head(torch.cat([s.flatten(1), g], dim=1))


def test_unsupported_operations_are_named():
    class Bad(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 4, 3, groups=1, dilation=2)

        def forward(self, x):
            return self.conv(x)

    with pytest.raises(ConfigError, match=r"conv.*dilated"):
        dag_from_module(Bad(), (torch.randn(1, 3, 8, 8),))


def test_imported_dag_matches_the_module():
    torch.manual_seed(0)
    module = TwoModalitiesSafe().eval()
    image, audio = torch.randn(1, 3, 8, 8), torch.randn(1, 1, 8, 8)
    dag, params = dag_from_module(module, (image, audio), "two")
    types = [la.type for la in dag.layers]
    assert types.count("conv") == 3 and types.count("lstm") == 1 and "add" in types
    assert len(dag.by_name["seq"].deps) == 2  # the concatenation of both modalities
    assert dag.by_name["img2"].relu is False and dag.by_name["add"].relu is True
    inputs = {"img1": image[0], "aud": audio[0]}
    out = run_dag(dag, inputs, module_weights(module, params))[dag.order[-1]]
    with torch.no_grad():
        expected = module(image, audio)[0]
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-6)


# torch.export warns that nn.LSTM assigns its flat weights during export (torch's own code).
@pytest.mark.filterwarnings("ignore:The tensor attributes")
def test_exported_program_imports_to_the_traced_dag(tmp_path):
    """torch.export records ATen operators, not modules: a second path through the importer
    that must give the module-level trace's DAG, names and all."""
    module = TwoModalitiesSafe().eval()
    inputs = (torch.randn(1, 3, 8, 8), torch.randn(1, 1, 8, 8))
    traced, _ = dag_from_module(module, inputs, "two")
    path = tmp_path / "two.pt2"
    torch.export.save(torch.export.export(module, inputs), str(path))
    assert dag_from_exported(path) == traced
    assert resolve("model", str(path)) == traced  # what `archi plan two.pt2` plans


def test_exported_program_errors_name_the_file(tmp_path):
    class Dilated(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 4, 3, dilation=2)

        def forward(self, x):
            return self.conv(x)

    path = tmp_path / "d.pt2"
    torch.export.save(torch.export.export(Dilated(), (torch.randn(1, 3, 9, 9),)), str(path))
    with pytest.raises(ConfigError, match=r"d\.pt2: field 'conv2d': .*dilated"):
        dag_from_exported(path)
    (tmp_path / "junk.pt2").write_bytes(b"not a zip")
    with pytest.raises(ConfigError, match=r"junk\.pt2: field 'pt2'"):
        dag_from_exported(tmp_path / "junk.pt2")
