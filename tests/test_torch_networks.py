"""torch import of networks as users write them: the PyTorch CIFAR-10 tutorial's `Net`
(verbatim: it calls one `self.pool` twice), a MobileNetV2 block with squeeze-and-excitation,
a vision-transformer block and a stacked bidirectional LSTM. MACs and parameters are
counted by hand (and against torch's own parameter count); torch.fx and torch.export
(`archi plan model.pt2`) must give the same DAG."""

import json
import math
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional
# torch.export warns that nn.LSTM assigns its flat weights during export; the legacy ONNX
# exporter warns about its own deprecation.
pytestmark = pytest.mark.filterwarnings("ignore")

from archipelago.errors import ConfigError  # noqa: E402
from archipelago.families import resolve  # noqa: E402
from archipelago.models.dag import ModelDAG  # noqa: E402
from archipelago.models.torch_import import dag_from_module  # noqa: E402
from archipelago.strategies.chef.emulate.dag_torch import run_dag  # noqa: E402
from tests.test_torch_import import module_weights  # noqa: E402


class Net(nn.Module):
    """pytorch.org, "Training a Classifier" (CIFAR-10 tutorial), as published."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = torch.flatten(x, 1)  # flatten all dimensions except batch
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        x = self.fc3(x)
        return x


class SqueezeExcite(nn.Module):
    def __init__(self, channels: int, squeezed: int) -> None:
        super().__init__()
        self.reduce = nn.Conv2d(channels, squeezed, 1)
        self.expand = nn.Conv2d(squeezed, channels, 1)

    def forward(self, x):
        s = F.adaptive_avg_pool2d(x, 1)
        return x * torch.sigmoid(self.expand(F.silu(self.reduce(s))))


class InvertedResidual(nn.Module):
    """MobileNetV2's block (1x1 expand, 3x3 depthwise, 1x1 project, each with BatchNorm,
    ReLU6 after the first two), squeeze-and-excitation as MobileNetV3 adds it, residual."""

    def __init__(self, channels: int, expand: int = 6) -> None:
        super().__init__()
        hidden = channels * expand
        self.conv = nn.Sequential(
            nn.Conv2d(channels, hidden, 1, bias=False), nn.BatchNorm2d(hidden),
            nn.ReLU6(inplace=True),
            nn.Conv2d(hidden, hidden, 3, 1, 1, groups=hidden, bias=False),
            nn.BatchNorm2d(hidden), nn.ReLU6(inplace=True),
            nn.Conv2d(hidden, channels, 1, bias=False), nn.BatchNorm2d(channels))
        self.se = SqueezeExcite(channels, 4)

    def forward(self, x):
        return x + self.se(self.conv(x))


class MobileNetish(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16),
                                  nn.ReLU6(inplace=True))
        self.block = InvertedResidual(16)
        self.head = nn.Conv2d(16, 32, (1, 3), padding=(0, 1))
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(32, 10))

    def forward(self, x):
        x = F.hardswish(self.head(self.block(self.stem(x))))
        return self.classifier(x.mean((2, 3)))


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.query, self.key = nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.value, self.proj = nn.Linear(dim, dim), nn.Linear(dim, dim)

    def forward(self, x):
        B, N, C = x.shape
        q = self.query(x).view(B, N, self.heads, self.head_dim).transpose(1, 2)
        k = self.key(x).view(B, N, self.heads, self.head_dim).transpose(1, 2)
        v = self.value(x).view(B, N, self.heads, self.head_dim).transpose(1, 2)
        attn = (q @ k.transpose(-2, -1)) / math.sqrt(self.head_dim)
        attn = attn.softmax(dim=-1)
        return self.proj((attn @ v).transpose(1, 2).reshape(B, N, C))


class ViTBlock(nn.Module):
    """Patch embedding plus one pre-norm encoder block (ViT-B/16's layout, small)."""

    def __init__(self, dim: int = 32, heads: int = 4, patch: int = 4, image: int = 16):
        super().__init__()
        self.patch_embed = nn.Conv2d(3, dim, patch, patch)
        self.pos_embed = nn.Parameter(torch.zeros(1, (image // patch) ** 2, dim))
        self.norm1, self.attn = nn.LayerNorm(dim), Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim)
        self.fc1, self.fc2 = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, img):
        x = self.patch_embed(img).flatten(2).transpose(1, 2) + self.pos_embed
        x = x + self.attn(self.norm1(x))
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class BiLSTM(nn.Module):
    """The Intel NMT encoder's shape: a bidirectional LSTM stack over (T, E) embeddings."""

    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(10, 16, num_layers=2, bidirectional=True)
        self.gru = nn.GRU(32, 8)

    def forward(self, x):
        h, _ = self.lstm(x)
        return self.gru(h)[0]


def _both(module: nn.Module, example: torch.Tensor) -> ModelDAG:
    """The DAG torch.fx traces, checked equal to torch.export's."""
    module.eval()
    traced, _ = dag_from_module(module, (example,), "net")
    exported, _ = dag_from_module(torch.export.export(module, (example,)).module(),
                                  (example,), "net")
    assert exported == traced
    return traced


def _params(dag: ModelDAG) -> int:
    return sum(layer.weight_elements for layer in dag.layers)


def test_cifar10_tutorial_net_reuses_its_pool_and_plans(tmp_path) -> None:
    net = Net().eval()
    image = torch.randn(1, 3, 32, 32)
    dag = _both(net, image)
    assert [la.name for la in dag.layers] == ["conv1", "pool", "conv2", "pool_1", "fc1",
                                              "fc2", "fc3"]
    _, params = dag_from_module(net, (image,))
    out = run_dag(dag, {"conv1": image[0]}, module_weights(net, params))["fc3"]
    with torch.no_grad():  # the DAG, run layer by layer, computes what the module does
        torch.testing.assert_close(out, net(image)[0], rtol=1e-5, atol=1e-6)
    assert dag.by_name["pool_1"].deps == ("conv2",) and dag.by_name["conv2"].deps == ("pool",)
    # conv1 6x3x5x5 over 28x28, conv2 16x6x5x5 over 10x10, fc 400x120, 120x84, 84x10
    assert sum(la.macs for la in dag.layers) == (6 * 3 * 25 * 28 * 28 + 16 * 6 * 25 * 10 * 10
                                                + 400 * 120 + 120 * 84 + 84 * 10) == 651_720
    assert _params(dag) == sum(p.numel() for p in net.parameters()) == 62_006
    assert all(dag.by_name[n].relu for n in ("conv1", "conv2", "fc1", "fc2"))
    path = tmp_path / "cifar_net.pt2"
    torch.export.save(torch.export.export(net, (image,)), str(path))
    assert resolve("model", str(path)).layers == dag.layers
    for strategy in ("chef", "h2h"):
        out = subprocess.run([sys.executable, "-m", "archipelago", "plan", str(path),
                              "--cluster", "hacc", "--strategy", strategy, "--json"],
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        planned = {row["layer"] for row in json.loads(out.stdout)["mapping"]}
        assert planned == {la.name for la in dag.layers}


def test_mobilenet_block_folds_batchnorm_and_keeps_depthwise_groups() -> None:
    dag = _both(MobileNetish(), torch.randn(1, 3, 16, 16))
    types = [la.type for la in dag.layers]
    assert types.count("conv") == 7 and types.count("elementwise") == 1
    depthwise = dag.by_name["block_conv_3"]
    assert depthwise.groups == depthwise.in_ch == depthwise.out_ch == 96
    assert depthwise.fused == ("block_conv_4", "block_conv_5")  # its BatchNorm and ReLU6
    assert dag.by_name["block_conv_6"].fused == ("block_conv_7",)  # BatchNorm, no ReLU6
    gate = dag.by_name["mul"]  # squeeze-and-excitation: the map times its channel gate
    assert gate.op == "Mul" and gate.deps == ("block_conv_6", "block_se_expand")
    assert dag.by_name["block_se_expand"].fused == ("sigmoid",)
    assert dag.by_name["add"].deps == ("stem_0", "mul")
    head = dag.by_name["head"]
    assert (head.window, head.borders, head.fused) == ((1, 3), (0, 1, 0, 1), ("hardswish",))
    assert dag.by_name["mean"].window == (8, 8)
    # stem 16x3x3x3, expand 96x16, depthwise 96x1x3x3, project 16x96, SE 4x16 and 16x4,
    # head 32x16x1x3, all over 8x8 (SE over 1x1), classifier 32x10
    assert sum(la.macs for la in dag.layers) == (16 * 27 * 64 + 96 * 16 * 64 + 96 * 9 * 64
                                                + 16 * 96 * 64 + 4 * 16 + 16 * 4
                                                + 32 * 16 * 3 * 64 + 32 * 10)


def test_vit_block_imports_token_wise_linears_and_attention_products() -> None:
    dag = _both(ViTBlock(), torch.randn(1, 3, 16, 16))
    tokens, dim, heads = 16, 32, 4
    scores, context = dag.by_name["matmul"], dag.by_name["matmul_1"]
    assert (scores.batch, scores.rows, scores.inner, scores.cols) == (heads, tokens, 8, tokens)
    assert (context.batch, context.rows, context.inner, context.cols) == (heads, tokens,
                                                                          tokens, 8)
    assert scores.deps == ("attn_query", "attn_key")
    assert context.deps == ("div", "attn_value")
    # the 1/sqrt(d) scale is its own layer (a MatMul fuses nothing), Softmax fuses into it
    assert dag.by_name["div"].fused == ("softmax",)
    norm = dag.by_name["norm1"]
    assert norm.params == 2 * dim and norm.op == "LayerNormalization"
    assert dag.by_name["fc1"].rows == tokens and dag.by_name["fc1"].fused == ("gelu",)
    assert dag.by_name["add"].deps == ("patch_embed", "attn_proj")  # the residual
    assert sum(la.macs for la in dag.layers) == (
        dim * 3 * 16 * tokens  # patch embedding: 4x4x3 patches
        + 4 * tokens * dim * dim  # query, key, value, projection
        + 2 * heads * tokens * tokens * 8  # scores and context
        + 2 * tokens * dim * 4 * dim)  # MLP


def test_multihead_attention_module_expands_into_its_computation() -> None:
    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc, self.norm = nn.Linear(32, 32), nn.LayerNorm(32)
            self.attn = nn.MultiheadAttention(32, 4, batch_first=True)

        def forward(self, x):
            x = self.fc(x)
            y = self.norm(x)
            return x + self.attn(y, y, y)[0]

    module = Block()
    dag = _both(module, torch.randn(1, 6, 32))
    assert [la.name for la in dag.layers][2:] == [
        "attn_q", "attn_k", "attn_v", "attn_scores", "attn_softmax", "attn_context",
        "attn_out", "add"]
    assert _params(dag) == sum(p.numel() for p in module.parameters())


def test_bidirectional_lstm_stack_on_a_sequence_input() -> None:
    module = BiLSTM()
    dag = _both(module, torch.randn(7, 10))  # (T, E): torch's unbatched sequence
    first, second, gru = dag.layers
    assert (first.name, first.directions, first.embed, first.cells) == ("lstm", 2, 10, 7)
    assert (second.name, second.deps, second.embed) == ("lstm_l1", ("lstm",), 32)
    assert (gru.cell, gru.embed, gru.hidden) == ("gru", 32, 8)
    assert dag.inputs == {"lstm": (7, 10)}
    # 2 directions x 7 steps x 4 gates x 16 hidden x (input + hidden); GRU: 3 gates
    assert [la.macs for la in dag.layers] == [2 * 7 * 4 * 16 * 26, 2 * 7 * 4 * 16 * 48,
                                              7 * 3 * 8 * 40]
    assert _params(dag) == sum(p.numel() for p in module.parameters())


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

    dag = _both(Twice(), torch.randn(1, 3, 8, 8))
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


@pytest.mark.parametrize(("module", "example"), [
    (Net(), torch.randn(1, 3, 32, 32)), (MobileNetish(), torch.randn(1, 3, 16, 16)),
    (ViTBlock(), torch.randn(1, 3, 16, 16)), (BiLSTM(), torch.randn(7, 10))],
    ids=["cifar-net", "mobilenet-block", "vit-block", "bilstm"])
def test_onnx_export_of_the_same_module_agrees(tmp_path, module, example) -> None:
    """Layer count and MACs equal those of the module's ONNX export, where the ONNX
    importer reads that export (skipped where it does not yet)."""
    pytest.importorskip("onnx")
    from archipelago.models.onnx_import import dag_from_onnx

    traced, _ = dag_from_module(module.eval(), (example,), "net")
    path = tmp_path / "net.onnx"
    torch.onnx.export(module, (example,), str(path), dynamo=False)
    try:
        imported = dag_from_onnx(path)
    except ConfigError as err:
        pytest.skip(f"the ONNX importer does not read this export yet: {err}")
    assert len(imported.layers) == len(traced.layers)
    assert sum(la.macs for la in imported.layers) == sum(la.macs for la in traced.layers)


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
    op, expected = _POINTWISE[written]
    example = torch.randn(1, 3, 8, 8)
    alone, _ = dag_from_module(_Applied(op, False).eval(), (example,))
    twice = _both(_Applied(op, True), example)
    if expected is None:
        assert [la.name for la in alone.layers] == [la.name for la in twice.layers] == ["conv"]
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
    dag = _both(module, example)
    wide, same = dag.by_name["wide"], dag.by_name["same"]
    assert (wide.window, wide.strides, wide.borders) == ((3, 5), (1, 2), (1, 2, 1, 2))
    assert same.borders == (1, 1, 2, 2)
    padded = F.conv2d(F.pad(example, (1, 2, 1, 2)), module.same.weight, module.same.bias)
    torch.testing.assert_close(padded, module.same(example))
    pool = dag.by_name["max_pool"]  # 10x8 -> ceil: 5x4, one more row and column of pad
    assert (pool.out_rows, pool.out_cols, pool.borders) == (5, 4, (0, 0, 1, 1))
    assert dag.by_name["adaptive_avg_pool"].deps == ("max_pool", "avg_pool")
    assert dag.by_name["adaptive_avg_pool"].window == (1, 2)  # 5x4 to 5x2
