"""Networks as users export them: transformers' encoders and vision models with tiny
configurations and seeded weights, and blocks written from their papers for the operators
transformers' models do not exercise (a ShuffleNet-v2 unit's chunk and channel shuffle,
Swin's window attention with its relative position bias gathered by index, a DenseNet
block's concatenations, an LSTM classifier keeping its last step, a VGG classifier written
as a 7x7 convolution). Each is exported three ways: torch.onnx.export with the dynamo
exporter and the TorchScript one, and torch.export saved as .pt2."""

import warnings
from pathlib import Path

import torch
from torch import nn

TOKENS, IMAGE = 16, 32


def _transformers():
    import transformers

    return transformers


def bert() -> tuple[nn.Module, tuple]:
    t = _transformers()
    config = t.BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2,
                          num_attention_heads=2, intermediate_size=64,
                          max_position_embeddings=64, num_labels=3)
    return t.BertForSequenceClassification(config), (torch.randint(0, 100, (1, TOKENS)),)


class LastHidden(nn.Module):
    """BERT's encoder returning its last hidden state (every position), the ids and the
    mask passed by name."""

    def __init__(self) -> None:
        super().__init__()
        self.bert = bert()[0].bert

    def forward(self, ids, mask):
        return self.bert(input_ids=ids, attention_mask=mask).last_hidden_state


def roberta() -> tuple[nn.Module, tuple]:
    """RoBERTa computes its positions from the ids (padding tokens keep position 1)."""
    t = _transformers()
    config = t.RobertaConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2,
                             num_attention_heads=2, intermediate_size=64,
                             max_position_embeddings=64, num_labels=3)
    return t.RobertaForSequenceClassification(config), \
        (torch.randint(0, 100, (1, TOKENS)),)


def distilbert() -> tuple[nn.Module, tuple]:
    t = _transformers()
    config = t.DistilBertConfig(vocab_size=100, dim=32, n_layers=2, n_heads=2, hidden_dim=64,
                                max_position_embeddings=64, num_labels=3)
    return t.DistilBertForSequenceClassification(config), \
        (torch.randint(0, 100, (1, TOKENS)),)


def masked(network) -> tuple[nn.Module, tuple]:
    """An encoder given its attention mask as a second input, as users export encoders
    (the example mask all ones; the emulation feeds a padding mask)."""
    module, (ids,) = network()
    return module, (ids, torch.ones(1, TOKENS, dtype=torch.long))


def convnext() -> tuple[nn.Module, tuple]:
    """Image 48 so that the 12 x 12 map after the stem differs from its 8 channels."""
    t = _transformers()
    config = t.ConvNextConfig(num_stages=2, hidden_sizes=[8, 16], depths=[1, 1],
                              num_labels=10)
    return t.ConvNextForImageClassification(config), (torch.randn(1, 3, 48, 48),)


def vit() -> tuple[nn.Module, tuple]:
    t = _transformers()
    config = t.ViTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=64, image_size=IMAGE, patch_size=8, num_labels=10)
    return t.ViTForImageClassification(config), (torch.randn(1, 3, IMAGE, IMAGE),)


def swin_hf() -> tuple[nn.Module, tuple]:
    """transformers' Swin: only the TorchScript exporter takes it (its window padding
    reads a size as data, which torch.export and the dynamo exporter refuse to guard on);
    the hand-written SwinBlock below covers both formats."""
    t = _transformers()
    config = t.SwinConfig(image_size=IMAGE, patch_size=4, embed_dim=16, depths=[1, 1],
                          num_heads=[2, 2], window_size=4, num_labels=10)
    return t.SwinForImageClassification(config), (torch.randn(1, 3, IMAGE, IMAGE),)


def _conv_bn(cin: int, cout: int, kernel: int, stride: int = 1, groups: int = 1,
             relu: bool = True) -> nn.Sequential:
    layers = [nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups, bias=False),
              nn.BatchNorm2d(cout)]
    return nn.Sequential(*layers, *([nn.ReLU(inplace=True)] if relu else []))


class ShuffleUnit(nn.Module):
    """ShuffleNet V2's unit (Ma et al. 2018, Fig. 3c/d): stride 1 splits the channels in
    two (chunk), one half through 1x1, 3x3 depthwise, 1x1; stride 2 runs the whole input
    through that branch and a depthwise-then-1x1 one; the halves are concatenated and the
    channels shuffled (reshape to groups, transpose, flatten)."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.stride, half = stride, cout // 2
        self.shortcut = nn.Sequential(_conv_bn(cin, cin, 3, stride, cin, relu=False),
                                      _conv_bn(cin, half, 1)) if stride > 1 else None
        inner = cin if stride > 1 else half
        self.branch = nn.Sequential(_conv_bn(inner, half, 1),
                                    _conv_bn(half, half, 3, stride, half, relu=False),
                                    _conv_bn(half, half, 1))

    def forward(self, x):
        if self.shortcut is None:
            left, right = x.chunk(2, dim=1)
            out = torch.cat((left, self.branch(right)), dim=1)
        else:
            out = torch.cat((self.shortcut(x), self.branch(x)), dim=1)
        batch, channels, rows, cols = out.shape
        out = out.view(batch, 2, channels // 2, rows, cols).transpose(1, 2).contiguous()
        return out.view(batch, channels, rows, cols)


class ShuffleNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = _conv_bn(3, 8, 3, 2)
        self.units = nn.Sequential(ShuffleUnit(8, 16, 2), ShuffleUnit(16, 16, 1))
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        return self.fc(self.units(self.stem(x)).mean((2, 3)))


class WindowAttention(nn.Module):
    """Swin's window attention (Liu et al. 2021, §3.2): multi-head self-attention inside
    each window with a learned bias per relative position, the table indexed by a constant
    index of every (query, key) pair."""

    def __init__(self, dim: int, heads: int, window: int) -> None:
        super().__init__()
        self.heads, self.window, self.scale = heads, window, (dim // heads) ** -0.5
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.table = nn.Parameter(torch.randn((2 * window - 1) ** 2, heads) * 0.02)
        rows, cols = torch.meshgrid(torch.arange(window), torch.arange(window),
                                    indexing="ij")
        coords = torch.stack((rows.flatten(), cols.flatten()))
        relative = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0) + window - 1
        self.register_buffer("index", relative[..., 0] * (2 * window - 1) + relative[..., 1])

    def forward(self, x, mask=None):  # (windows, tokens, dim); mask (windows, tokens, tokens)
        windows, tokens, dim = x.shape
        q, k, v = self.qkv(x).reshape(windows, tokens, 3, self.heads,
                                      dim // self.heads).permute(2, 0, 3, 1, 4)
        scores = (q * self.scale) @ k.transpose(-2, -1)
        bias = self.table[self.index.view(-1)].view(tokens, tokens, -1).permute(2, 0, 1)
        scores = scores + bias.unsqueeze(0)
        weights = (scores if mask is None else scores + mask.unsqueeze(1)).softmax(-1)
        return self.proj((weights @ v).transpose(1, 2).reshape(windows, tokens, dim))


class SwinBlock(nn.Module):
    """A patch embedding, one Swin block on channels-last maps (windows partitioned by
    reshape and permute, attention, the windows merged back, an MLP, both residual) and a
    classifier on the mean token, as timm's Swin writes them. With a `shift`, the shifted
    windows (Liu et al. 2021, §3.2, "efficient batch computation"): the map rolled by
    -shift on both axes before the partition, attention masked where a window joins
    regions the roll brought together (-100 between tokens of different regions), the
    merged map rolled back."""

    def __init__(self, dim: int = 16, heads: int = 2, window: int = 4, shift: int = 0,
                 size: int = IMAGE // 4) -> None:
        super().__init__()
        self.window, self.shift = window, shift
        if shift:
            region = torch.zeros(size, size)
            for i, rows in enumerate((slice(0, -window), slice(-window, -shift),
                                      slice(-shift, None))):
                for j, cols in enumerate((slice(0, -window), slice(-window, -shift),
                                          slice(-shift, None))):
                    region[rows, cols] = 3 * i + j
            ids = region.view(size // window, window, size // window, window).permute(
                0, 2, 1, 3).reshape(-1, window * window)
            self.register_buffer("mask", (ids[:, None, :] != ids[:, :, None]) * -100.0)
        self.embed = nn.Conv2d(3, dim, 4, 4)
        self.norm1, self.norm2, self.norm = nn.LayerNorm(dim), nn.LayerNorm(dim), \
            nn.LayerNorm(dim)
        self.attn = WindowAttention(dim, heads, window)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))
        self.head = nn.Linear(dim, 10)

    def forward(self, x):
        x = self.embed(x).permute(0, 2, 3, 1)  # (1, H, W, C)
        batch, rows, cols, dim = x.shape
        w, s = self.window, self.shift
        normed = self.norm1(x)
        if s:
            normed = torch.roll(normed, (-s, -s), (1, 2))
        windows = normed.view(batch, rows // w, w, cols // w, w, dim).permute(
            0, 1, 3, 2, 4, 5).reshape(-1, w * w, dim)
        merged = self.attn(windows, self.mask if s else None).view(
            batch, rows // w, cols // w, w, w, dim).permute(0, 1, 3, 2, 4, 5).reshape(
            batch, rows, cols, dim)
        x = x + (torch.roll(merged, (s, s), (1, 2)) if s else merged)
        x = x + self.mlp(self.norm2(x))
        return self.head(self.norm(x).mean((1, 2)))


class DenseBlock(nn.Module):
    """DenseNet's dense block (Huang et al. 2017, §3): each BN-ReLU-conv layer reads the
    concatenation of every map before it; a transition (BN-ReLU, 1x1 conv, average pool)
    and a classifier follow."""

    def __init__(self, channels: int = 8, growth: int = 4, layers: int = 3) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, channels, 3, padding=1, bias=False)
        self.layers = nn.ModuleList(
            nn.Sequential(nn.BatchNorm2d(channels + i * growth), nn.ReLU(),
                          nn.Conv2d(channels + i * growth, growth, 3, padding=1, bias=False))
            for i in range(layers))
        width = channels + layers * growth
        self.transition = nn.Sequential(nn.BatchNorm2d(width), nn.ReLU(),
                                        nn.Conv2d(width, 8, 1, bias=False), nn.AvgPool2d(2))
        self.fc = nn.Linear(8, 10)

    def forward(self, x):
        features = [self.stem(x)]
        for layer in self.layers:
            features.append(layer(torch.cat(features, 1)))
        out = self.transition(torch.cat(features, 1))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(out, 1), 1))


class LastStepLSTM(nn.Module):
    """An LSTM classifier keeping the last step's output (out[:, -1])."""

    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(6, 8, batch_first=True)
        self.fc = nn.Linear(8, 3)

    def forward(self, x):
        out, _ = self.lstm(x)
        return self.fc(out[:, -1])


class VGGHead(nn.Module):
    """A VGG tail with its first classifier layer written as a 7x7 convolution over the
    7x7 map (timm's VGG, ConvMlp) or as a Linear on the flattened map (torchvision's)."""

    def __init__(self, as_conv: bool) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(),
                                      nn.MaxPool2d(2))
        self.as_conv = as_conv
        self.fc1 = nn.Conv2d(8, 32, 7) if as_conv else nn.Linear(8 * 7 * 7, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x):
        x = self.features(x)
        x = torch.relu(self.fc1(x)).flatten(1) if self.as_conv else \
            torch.relu(self.fc1(x.flatten(1)))
        return self.fc2(x)


NETWORKS = {
    "bert": bert, "roberta": roberta, "distilbert": distilbert,
    **{f"{name}_masked": lambda n=network: masked(n)
       for name, network in (("bert", bert), ("roberta", roberta), ("distilbert", distilbert),
                             ("bert_encoder", lambda: (LastHidden(), bert()[1])))},
    "convnext": convnext, "vit": vit, "swin_hf": swin_hf,
    "shufflenet": lambda: (ShuffleNet(), (torch.randn(1, 3, IMAGE, IMAGE),)),
    "swin": lambda: (SwinBlock(), (torch.randn(1, 3, IMAGE, IMAGE),)),
    "swin_shift": lambda: (SwinBlock(shift=2), (torch.randn(1, 3, IMAGE, IMAGE),)),
    "densenet": lambda: (DenseBlock(), (torch.randn(1, 3, 16, 16),)),
    "lstm": lambda: (LastStepLSTM(), (torch.randn(1, 5, 6),)),
    "vgg_conv": lambda: (VGGHead(True), (torch.randn(1, 3, 14, 14),)),
    "vgg_linear": lambda: (VGGHead(False), (torch.randn(1, 3, 14, 14),)),
}
FORMATS = ("dynamo", "legacy", "pt2")


def export_network(name: str, folder: Path, how: str) -> Path:
    """`name` with seeded weights in eval mode, exported `how` (FORMATS, or "pt2_dynamic":
    torch.export with the token axis dynamic) into `folder`."""
    torch.manual_seed(0)
    module, args = NETWORKS[name]()
    module.eval()
    path = folder / f"{name}-{how}.{'onnx' if how in ('dynamo', 'legacy') else 'pt2'}"
    with warnings.catch_warnings():  # the exporters' advice on tracing and batch sizes
        warnings.simplefilter("ignore")
        if how in ("pt2", "pt2_dynamic"):  # dynamic: the token axis of every input
            tokens = torch.export.Dim("tokens", min=2, max=64)
            dynamic = tuple({1: tokens} for _ in args) if how == "pt2_dynamic" else None
            torch.export.save(torch.export.export(module, args, dynamic_shapes=dynamic),
                              path)
        else:
            torch.onnx.export(module, args, str(path), dynamo=how == "dynamo",
                              input_names=["input"],
                              **({"verbose": False} if how == "dynamo" else {}))
    return path
