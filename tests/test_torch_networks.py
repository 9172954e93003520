"""torch import of networks as users write them: the PyTorch CIFAR-10 tutorial's `Net`
(verbatim: it calls one `self.pool` twice), a MobileNetV2 block with squeeze-and-excitation,
a vision-transformer block and a stacked bidirectional LSTM. MACs and parameters are
counted by hand (and against torch's own parameter count); torch.fx and torch.export
(`archi plan model.pt2`) must give the same DAG."""

import json
import math

import pytest
from typer.testing import CliRunner

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional
# torch.export warns that nn.LSTM assigns its flat weights during export; the legacy ONNX
# exporter warns about its own deprecation.
pytestmark = pytest.mark.filterwarnings("ignore")

from archipelago.cli import app  # noqa: E402
from archipelago.errors import ConfigError  # noqa: E402
from archipelago.families import resolve  # noqa: E402
from archipelago.models.dag import ModelDAG  # noqa: E402
from archipelago.models.torch_import import dag_from_module  # noqa: E402
from archipelago.strategies.chef.emulate.dag_torch import run_dag  # noqa: E402
from tests.test_torch_import import module_weights  # noqa: E402
from tests.torch_dag import both  # noqa: E402


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


def _params(dag: ModelDAG) -> int:
    return sum(layer.weight_elements for layer in dag.layers)


def test_cifar10_tutorial_net_reuses_its_pool_and_plans(tmp_path) -> None:
    net = Net().eval()
    image = torch.randn(1, 3, 32, 32)
    dag = both(net, image)
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
        out = CliRunner().invoke(app, ["plan", str(path), "--cluster", "hacc",
                                       "--strategy", strategy, "--json"])
        assert out.exit_code == 0, out.output
        planned = {row["layer"] for row in json.loads(out.stdout)["mapping"]}
        assert planned == {la.name for la in dag.layers}


def test_mobilenet_block_folds_batchnorm_and_keeps_depthwise_groups() -> None:
    dag = both(MobileNetish(), torch.randn(1, 3, 16, 16))
    types = [la.type for la in dag.layers]
    # the SE's 1x1 convolutions over the pooled 1x1 map are the Linears they compute
    # (models/layer_forms.py)
    assert types.count("conv") == 5 and types.count("elementwise") == 1
    assert {(la.in_features, la.out_features) for la in dag.layers if la.type == "fc"} == \
        {(16, 4), (4, 16), (32, 10)}
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
    dag = both(ViTBlock(), torch.randn(1, 3, 16, 16))
    tokens, dim, heads = 16, 32, 4
    scores, context = dag.by_name["matmul"], dag.by_name["matmul_1"]
    assert (scores.batch, scores.rows, scores.inner, scores.cols) == (heads, tokens, 8, tokens)
    assert (context.batch, context.rows, context.inner, context.cols) == (heads, tokens,
                                                                          tokens, 8)
    assert scores.deps == ("attn_query", "attn_key")
    assert context.deps == ("softmax", "attn_value")
    # the 1/sqrt(d) scale fuses into the scores; Softmax is its own layer (as from ONNX)
    assert scores.fused == ("div",) and dag.by_name["softmax"].op == "Softmax"
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
    dag = both(module, torch.randn(1, 6, 32))
    assert [la.name for la in dag.layers][2:] == [
        "attn_q", "attn_k", "attn_v", "attn_scores", "attn_softmax", "attn_context",
        "attn_out", "add"]
    assert _params(dag) == sum(p.numel() for p in module.parameters())


def test_bidirectional_lstm_stack_on_a_sequence_input() -> None:
    module = BiLSTM()
    dag = both(module, torch.randn(7, 10))  # (T, E): torch's unbatched sequence
    first, second, gru = dag.layers
    assert (first.name, first.directions, first.embed, first.cells) == ("lstm", 2, 10, 7)
    assert (second.name, second.deps, second.embed) == ("lstm_l1", ("lstm",), 32)
    assert (gru.cell, gru.embed, gru.hidden) == ("gru", 32, 8)
    assert dag.inputs == {"lstm": (7, 10)}
    # 2 directions x 7 steps x 4 gates x 16 hidden x (input + hidden); GRU: 3 gates
    assert [la.macs for la in dag.layers] == [2 * 7 * 4 * 16 * 26, 2 * 7 * 4 * 16 * 48,
                                              7 * 3 * 8 * 40]
    assert _params(dag) == sum(p.numel() for p in module.parameters())


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
