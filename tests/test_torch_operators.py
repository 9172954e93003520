"""torch import of single operators as users write them: which operators fuse into the
layer before them and which stay layers of their own, the one-line errors for calls it cannot
trace or does not support, and the windows (kernels, strides, padding, pooling) layers keep.
torch.fx and torch.export must give the same DAG."""

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional
# torch.export warns that nn.LSTM assigns its flat weights during export.
pytestmark = pytest.mark.filterwarnings("ignore")

from archipelago.errors import ConfigError  # noqa: E402
from archipelago.models.torch_import import dag_from_module  # noqa: E402
from tests.torch_dag import both  # noqa: E402


def test_activation_read_twice_is_its_own_layer_and_batchnorm_after_it_too() -> None:
    """The fusion rule: only an operator that alone consumes a layer's output fuses."""
    class Twice(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv, self.bn = nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)
            self.other = nn.Conv2d(3, 4, 3)

        def forward(self, x):
            y = self.conv(x)
            z = self.bn(F.relu(self.other(x)))  # BatchNorm after a ReLU cannot fold
            return torch.sigmoid(y) + y + z

    dag = both(Twice(), torch.randn(1, 3, 8, 8))
    assert dag.by_name["sigmoid"].deps == ("conv",) and dag.by_name["conv"].fused == ()
    assert dag.by_name["other"].relu and dag.by_name["bn"].op == "BatchNormalization"


def test_untraceable_and_unsupported_calls_are_one_line() -> None:
    class Branchy(nn.Module):
        def forward(self, x):
            if x.sum() > 0:
                return x
            return -x

    with pytest.raises(ConfigError) as err:
        dag_from_module(Branchy(), (torch.randn(1, 3),))
    assert "\n" not in str(err.value)
    assert "torch.fx cannot trace" in str(err.value) and "if x.sum() > 0" in str(err.value)

    class State(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lstm = nn.LSTM(4, 8)

        def forward(self, x):
            return self.lstm(x)[1][0]

    with pytest.raises(ConfigError, match=r"'getitem': module lstm \(LSTM\): its output 1 "
                       r"\(an LSTM's final state"):
        dag_from_module(State(), (torch.randn(5, 4),))

    class Cumulative(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x):
            return torch.cumsum(self.fc(x), 1)

    with pytest.raises(ConfigError, match="function cumsum is not supported"):
        dag_from_module(Cumulative(), (torch.randn(1, 4),))


# Each operator as users write it -> (the Elementwise op it becomes, its ops per element),
# or None for a reshape that passes values through.
_POINTWISE = {
    "F.relu": (F.relu, ("Relu", 1)), "torch.relu": (torch.relu, ("Relu", 1)),
    "x.relu": (lambda x: x.relu(), ("Relu", 1)), "F.relu6": (F.relu6, ("Clip", 2)),
    "nn.ReLU6": (nn.ReLU6(), ("Clip", 2)), "F.hardtanh": (F.hardtanh, ("Clip", 2)),
    "F.silu": (F.silu, ("SiLU", 5)), "nn.SiLU": (nn.SiLU(), ("SiLU", 5)),
    "torch.sigmoid": (torch.sigmoid, ("Sigmoid", 4)), "nn.Sigmoid": (nn.Sigmoid(),
                                                                      ("Sigmoid", 4)),
    "F.hardswish": (F.hardswish, ("HardSwish", 5)),
    "nn.Hardswish": (nn.Hardswish(), ("HardSwish", 5)),
    "F.hardsigmoid": (F.hardsigmoid, ("HardSigmoid", 4)), "F.gelu": (F.gelu, ("Gelu", 5)),
    "nn.GELU": (nn.GELU(), ("Gelu", 5)), "torch.tanh": (torch.tanh, ("Tanh", 1)),
    "F.softmax": (lambda x: F.softmax(x, dim=1), ("Softmax", 5)),
    "nn.Softmax": (nn.Softmax(dim=1), ("Softmax", 5)),
    "nn.LocalResponseNorm": (nn.LocalResponseNorm(3), ("LRN", 10)),
    "x * 0.5": (lambda x: x * 0.5, ("Mul", 1)),
    "torch.flatten": (lambda x: torch.flatten(x, 1), None),
    "x.view": (lambda x: x.view(1, -1), None), "x.permute": (lambda x: x.permute(0, 2, 3, 1),
                                                             None),
    "x.transpose": (lambda x: x.transpose(2, 3), None),
    "F.dropout": (lambda x: F.dropout(x, 0.1, training=False), None),
    "nn.Dropout": (nn.Dropout(), None), "nn.Identity": (nn.Identity(), None),
    "nn.Flatten": (nn.Flatten(), None),
}


class _Applied(nn.Module):
    """conv -> op, the conv's output returned too when `twice` (so the op cannot fuse)."""

    def __init__(self, op, twice: bool) -> None:
        super().__init__()
        self.conv, self.twice = nn.Conv2d(3, 4, 3, padding=1), twice
        self.op = op if isinstance(op, nn.Module) else None
        self.fn = op

    def forward(self, x):
        y = self.conv(x)
        z = self.op(y) if self.op is not None else self.fn(y)
        return (z, y) if self.twice else z


@pytest.mark.parametrize("written", sorted(_POINTWISE))
def test_each_pointwise_operator_fuses_when_alone_else_is_its_own_layer(written) -> None:
    """(Softmax excepted: its own layer, fused or not.)"""
    op, expected = _POINTWISE[written]
    example = torch.randn(1, 3, 8, 8)
    alone, _ = dag_from_module(_Applied(op, False).eval(), (example,))
    twice = both(_Applied(op, True), example)
    if expected is None:
        assert [la.name for la in alone.layers] == [la.name for la in twice.layers] == ["conv"]
        return
    if expected[0] == "Softmax":  # a reduction over a row: its own layer always (as ONNX's)
        assert [la.type for la in alone.layers] == ["conv", "elementwise"]
        assert alone.layers[1].op == "Softmax" and alone.by_name["conv"].fused == ()
        return
    assert len(alone.layers) == 1 and len(alone.by_name["conv"].fused) == 1
    assert alone.by_name["conv"].relu == (expected[0] == "Relu")
    conv, layer = twice.layers
    assert conv.fused == () and layer.deps == ("conv",)
    assert (layer.op, layer.ops_per_element, layer.shape) == (*expected, (4, 8, 8))


def test_windows_keep_their_shapes_and_borders() -> None:
    """Non-square kernels and strides, padding tuples, 'same' padding of an even kernel
    (torch pads the extra row and column at the bottom and right), ceil_mode pooling,
    adaptive pooling to a divisor and channel concatenation."""
    class Windows(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.wide = nn.Conv2d(3, 8, (3, 5), stride=(1, 2), padding=(1, 2))
            self.same = nn.Conv2d(3, 8, 4, padding="same")

        def forward(self, x):
            a = F.max_pool2d(self.wide(x), 3, 2, ceil_mode=True)
            b = F.avg_pool2d(self.same(x), (2, 4), (2, 4))
            return F.adaptive_avg_pool2d(torch.cat([a, b], dim=1), (5, 2))

    module = Windows().eval()
    example = torch.randn(1, 3, 10, 16)
    dag = both(module, example)
    wide, same = dag.by_name["wide"], dag.by_name["same"]
    assert (wide.window, wide.strides, wide.borders) == ((3, 5), (1, 2), (1, 2, 1, 2))
    assert same.borders == (1, 1, 2, 2)
    padded = F.conv2d(F.pad(example, (1, 2, 1, 2)), module.same.weight, module.same.bias)
    torch.testing.assert_close(padded, module.same(example))
    pool = dag.by_name["max_pool"]  # 10x8 -> ceil: 5x4, one more row and column of pad
    assert (pool.out_rows, pool.out_cols, pool.borders) == (5, 4, (0, 0, 1, 1))
    assert dag.by_name["adaptive_avg_pool"].deps == ("max_pool", "avg_pool")
    assert dag.by_name["adaptive_avg_pool"].window == (1, 2)  # 5x4 to 5x2
