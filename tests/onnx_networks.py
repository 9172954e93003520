"""Small torch networks written the way users write them, one of each shape the issue
names (a residual CNN with BatchNorm, a MobileNetV2-style depthwise CNN with
squeeze-and-excitation, a vision-transformer block, a bidirectional LSTM), and their export
to ONNX with torch.onnx.export (the legacy TorchScript exporter or the dynamo one)."""

import warnings
from pathlib import Path

import torch
from torch import nn


class BasicBlock(nn.Module):
    """torchvision's ResNet basic block: two 3x3 conv-BN, a strided 1x1 shortcut."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.down = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                   nn.BatchNorm2d(cout))
                     if stride != 1 or cin != cout else nn.Identity())

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + self.down(x))


class ResidualCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 7, 2, 3, bias=False), nn.BatchNorm2d(8),
                                  nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1))
        self.layer1 = BasicBlock(8, 8, 1)
        self.layer2 = BasicBlock(8, 16, 2)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = self.layer2(self.layer1(self.stem(x)))
        return self.fc(torch.flatten(self.pool(x), 1))


class SqueezeExcite(nn.Module):
    def __init__(self, channels: int, squeezed: int) -> None:
        super().__init__()
        self.fc1 = nn.Conv2d(channels, squeezed, 1)
        self.fc2 = nn.Conv2d(squeezed, channels, 1)

    def forward(self, x):
        scale = nn.functional.adaptive_avg_pool2d(x, 1)
        scale = nn.functional.hardsigmoid(self.fc2(torch.relu(self.fc1(scale))))
        return x * scale


class InvertedResidual(nn.Module):
    """MobileNetV2's block (1x1 expand, 3x3 depthwise, 1x1 project, ReLU6) with
    MobileNetV3's squeeze-and-excitation."""

    def __init__(self, cin: int, cout: int, stride: int, expand: int) -> None:
        super().__init__()
        hidden = cin * expand
        self.use_res = stride == 1 and cin == cout
        self.block = nn.Sequential(
            nn.Conv2d(cin, hidden, 1, bias=False), nn.BatchNorm2d(hidden), nn.ReLU6(),
            nn.Conv2d(hidden, hidden, 3, stride, 1, groups=hidden, bias=False),
            nn.BatchNorm2d(hidden), nn.ReLU6(), SqueezeExcite(hidden, max(hidden // 4, 4)),
            nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        return x + self.block(x) if self.use_res else self.block(x)


class DepthwiseCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8),
                                  nn.Hardswish())
        self.blocks = nn.Sequential(InvertedResidual(8, 8, 1, 2), InvertedResidual(8, 12, 2, 3))
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.2),
                                  nn.Linear(12, 10))

    def forward(self, x):
        return self.head(self.blocks(self.stem(x)))


class ViTBlock(nn.Module):
    """A patch embedding, a class token, position embeddings and one pre-norm encoder
    block (torch's own MultiheadAttention, a GELU MLP), as ViT-B/16 stacks twelve."""

    def __init__(self, dim: int = 16, heads: int = 2, patch: int = 4, image: int = 8) -> None:
        super().__init__()
        self.embed = nn.Conv2d(3, dim, patch, patch)
        tokens = (image // patch) ** 2 + 1
        self.cls = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, tokens, dim) * 0.02)
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))
        self.head = nn.Linear(dim, 10)

    def forward(self, x):
        x = self.embed(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        y = self.norm1(x)
        x = x + self.attn(y, y, y, need_weights=False)[0]
        x = x + self.mlp(self.norm2(x))
        return self.head(x[:, 0])


class BiLSTM(nn.Module):
    """A two-layer bidirectional LSTM encoder (the Intel NMT paper's encoder is
    bidirectional) classifying from its last step; `rnn=nn.GRU` makes it a GRU's."""

    def __init__(self, embed: int = 6, hidden: int = 5, rnn: type = nn.LSTM) -> None:
        super().__init__()
        self.lstm = rnn(embed, hidden, num_layers=2, bidirectional=True, batch_first=True)
        self.fc = nn.Linear(2 * hidden, 4)

    def forward(self, x):
        out, _ = self.lstm(x)
        return self.fc(out[:, -1])


NETWORKS = {"residual_cnn": (ResidualCNN, (1, 3, 16, 16)),
            "depthwise_cnn": (DepthwiseCNN, (1, 3, 16, 16)),
            "vit_block": (ViTBlock, (1, 3, 8, 8)),
            "bilstm": (BiLSTM, (1, 7, 6)),
            "bigru": (lambda: BiLSTM(rnn=nn.GRU), (1, 7, 6))}


def export(name: str, path: Path, dynamo: bool, fold: bool = True, seed: int = 0,
           opset: int | None = None) -> Path:
    """`name`'s network with seeded weights (BatchNorm statistics made non-trivial, as a
    trained network's are), in eval mode, exported to `path`; `fold=False` (legacy
    exporter) keeps BatchNormalization nodes and reads weights through Identity nodes, as
    timm's exports do; an `opset` before 17 (legacy exporter) writes LayerNormalization
    and GELU as their decompositions (ReduceMean, Sub, Pow, Sqrt, Div; Erf)."""
    cls, shape = NETWORKS[name]
    torch.manual_seed(seed)
    module = cls().eval()
    for sub in module.modules():
        if isinstance(sub, nn.BatchNorm2d):
            sub.running_mean.uniform_(-0.5, 0.5)
            sub.running_var.uniform_(0.5, 2.0)
            sub.weight.data.uniform_(0.5, 1.5)
            sub.bias.data.uniform_(-0.2, 0.2)
    kwargs = ({"dynamo": True, "verbose": False} if dynamo
              else {"dynamo": False, "do_constant_folding": fold})
    if opset is not None:
        kwargs["opset_version"] = opset
    with warnings.catch_warnings():  # the exporters' advice on tracing and batch sizes
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (torch.randn(*shape),), str(path), input_names=["input"],
                          output_names=["output"], **kwargs)
    return path
