"""torch.fx importer: a user's two-modality module becomes a DAG that computes the same."""

import pytest

torch = pytest.importorskip("torch")

from archipelago.errors import ConfigError  # noqa: E402
from archipelago.models.torch_import import dag_from_module  # noqa: E402
from archipelago.strategies.chef.emulate.dag_torch import module_weights, run_dag  # noqa: E402


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
