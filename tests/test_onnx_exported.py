"""Small torch networks written as users write them, exported by both torch exporters
(dynamo=True, dynamo=False), imported: layer types, fused operators and MACs/parameters
against counts by hand from the module definitions (not from the DAG code), and the
OnnxImport bookkeeping the emulation runs on (every node placed, values crossing only
along DAG edges)."""

import warnings

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")
pytest.importorskip("onnxscript")
from torch import nn  # noqa: E402

from archipelago.models.onnx_import import OnnxImport, import_onnx  # noqa: E402


class ResidualBlock(nn.Module):
    """A stem conv-BN-ReLU and one ResNet basic block on 8 x 8 maps, pooled into a
    classifier."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False),
                                  nn.BatchNorm2d(8), nn.ReLU(inplace=True))
        self.conv1 = nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(8)
        self.relu = nn.ReLU(inplace=True)
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        x = self.stem(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)) + x)
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(out, 1), 1))


class MobileBlock(nn.Module):
    """TF-style 'same' padding (ZeroPad2d then a stride-2 conv), a depthwise-separable
    block with ReLU6 and squeeze-and-excitation (hardsigmoid gate), a classifier."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.ZeroPad2d((0, 1, 0, 1)), nn.Conv2d(3, 16, 3, 2),
                                  nn.BatchNorm2d(16), nn.ReLU6())
        self.dw = nn.Sequential(nn.Conv2d(16, 16, 3, padding=1, groups=16, bias=False),
                                nn.BatchNorm2d(16), nn.ReLU6())
        self.se1, self.se2 = nn.Conv2d(16, 4, 1), nn.Conv2d(4, 16, 1)
        self.pw = nn.Sequential(nn.Conv2d(16, 24, 1, bias=False), nn.BatchNorm2d(24))
        self.fc = nn.Linear(24, 10)

    def forward(self, x):
        x = self.dw(self.stem(x))
        scale = nn.functional.adaptive_avg_pool2d(x, 1)
        x = x * nn.functional.hardsigmoid(self.se2(torch.relu(self.se1(scale))))
        x = self.pw(x)
        return self.fc(x.mean((2, 3)))


class EncoderBlock(nn.Module):
    """A token embedding and one pre-norm ViT encoder block with hand-written two-head
    attention (q @ k^T * scale, softmax, @ v) and a GELU MLP, classifying token 0."""

    def __init__(self, dim: int = 16, heads: int = 2) -> None:
        super().__init__()
        self.heads = heads
        self.embed = nn.Linear(12, dim)
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))
        self.head = nn.Linear(dim, 10)

    def forward(self, x):
        x = self.embed(x)
        batch, tokens, dim = x.shape
        q, k, v = self.qkv(self.norm1(x)).reshape(
            batch, tokens, 3, self.heads, dim // self.heads).permute(2, 0, 3, 1, 4)
        attn = (q @ k.transpose(-2, -1)) * (dim // self.heads) ** -0.5
        y = (attn.softmax(dim=-1) @ v).transpose(1, 2).reshape(batch, tokens, dim)
        x = x + self.proj(y)
        x = x + self.mlp(self.norm2(x))
        return self.head(x[:, 0])


class Recurrent(nn.Module):
    """A two-layer bidirectional LSTM (or GRU) over 7 steps, classifying its last step."""

    def __init__(self, rnn: type = nn.LSTM) -> None:
        super().__init__()
        self.rnn = rnn(6, 5, num_layers=2, bidirectional=True, batch_first=True)
        self.fc = nn.Linear(10, 4)

    def forward(self, x):
        out, _ = self.rnn(x)
        return self.fc(out[:, -1])


def _export(module: nn.Module, shape: tuple[int, ...], path, dynamo: bool,
            fold: bool = True) -> OnnxImport:
    torch.manual_seed(0)
    module = module.eval()
    kwargs = {"dynamo": True} if dynamo else {"dynamo": False, "do_constant_folding": fold}
    with warnings.catch_warnings():  # the exporters' advice on tracing
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (torch.randn(*shape),), str(path), **kwargs)
    return import_onnx(path)


EXPORTERS = [pytest.param(True, id="dynamo"), pytest.param(False, id="torchscript")]


def _macs(imported: OnnxImport) -> int:
    return sum(getattr(layer, "macs", 0) for layer in imported.dag.layers)


def _params(imported: OnnxImport) -> int:
    return sum(layer.weight_elements for layer in imported.dag.layers)


def _types(imported: OnnxImport) -> dict[str, int]:
    counts: dict[str, int] = {}
    for layer in imported.dag.layers:
        counts[layer.type] = counts.get(layer.type, 0) + 1
    return counts


def _check_bookkeeping(imported: OnnxImport, path) -> None:
    """Every node that reads data is in a layer (shared only by pass-throughs), every
    value a layer reads is a graph input or an output of one of its dependencies, and the
    graph outputs are layers' outputs."""
    import onnx

    model = onnx.load(str(path))
    owners: dict[int, list[str]] = {}
    for name, nodes in imported.layer_nodes.items():
        for index in nodes:
            owners.setdefault(index, []).append(name)
    shared_ok = {"Reshape", "Transpose", "Flatten", "Squeeze", "Unsqueeze", "Identity",
                 "Dropout", "Concat", "Cast", "Pad", "Split"}
    for index, names in owners.items():
        assert len(names) == 1 or model.graph.node[index].op_type in shared_ok, names
    computed = {v for values in imported.layer_outputs.values() for v in values}
    for node_index, node in enumerate(model.graph.node):
        if node_index not in owners:  # folded: every input a constant
            assert all(not n or n in imported.constants for n in node.input
                       if node.op_type not in ("Shape", "Size")), node.op_type
    inputs = {i.name for i in model.graph.input} - imported.constants.keys()
    for layer in imported.dag.layers:
        deps_out = {v for d in layer.deps for v in imported.layer_outputs[d]}
        for value in imported.layer_inputs[layer.name]:
            assert value in inputs or value in deps_out, (layer.name, value)
    assert {o.name for o in model.graph.output} <= computed


@pytest.mark.parametrize("dynamo", EXPORTERS)
def test_residual_block_with_batchnorm(tmp_path, dynamo) -> None:
    imported = _export(ResidualBlock(), (1, 3, 8, 8), tmp_path / "res.onnx", dynamo)
    stem, conv1, conv2 = 8 * 3 * 9 * 64, 8 * 8 * 9 * 64, 8 * 8 * 9 * 64
    assert _macs(imported) == stem + conv1 + conv2 + 8 * 4
    # conv weights plus the bias a folded BatchNorm leaves, the classifier's weights
    assert _params(imported) == (8 * 27 + 8) + 2 * (8 * 72 + 8) + (8 * 4 + 4)
    assert _types(imported) == {"conv": 3, "add": 1, "pool": 1, "fc": 1}
    add = next(la for la in imported.dag.layers if la.type == "add")
    assert add.relu and add.fused == ("Relu",)
    _check_bookkeeping(imported, tmp_path / "res.onnx")


def test_batchnorm_nodes_fold_into_their_convs(tmp_path) -> None:
    """Without the exporter's own folding the file keeps its BatchNormalization nodes:
    each folds into the conv before it, recorded in `fused`."""
    imported = _export(ResidualBlock(), (1, 3, 8, 8), tmp_path / "bn.onnx", False, False)
    convs = [la for la in imported.dag.layers if la.type == "conv"]
    assert [la.fused for la in convs] == [("BatchNormalization", "Relu"),
                                          ("BatchNormalization", "Relu"),
                                          ("BatchNormalization",)]
    assert _macs(imported) == 8 * 3 * 9 * 64 + 2 * 8 * 8 * 9 * 64 + 8 * 4


@pytest.mark.parametrize("dynamo", EXPORTERS)
def test_depthwise_separable_block_with_relu6_and_se(tmp_path, dynamo) -> None:
    imported = _export(MobileBlock(), (1, 3, 16, 16), tmp_path / "mb.onnx", dynamo)
    layers = imported.dag.by_name
    stem, dw, pw = [la for la in imported.dag.layers if la.type == "conv"]
    # the SE's 1x1 convolutions over the 1x1 map: the Linears they compute (layer_forms.py)
    se1, se2, _ = [la for la in imported.dag.layers if la.type == "fc"]
    assert (se1.in_features, se1.out_features, se2.in_features, se2.out_features) == \
        (16, 4, 4, 16)
    assert stem.borders == (0, 0, 1, 1) and (stem.out_rows, stem.stride) == (8, 2)
    assert dw.groups == 16 and dw.in_ch == dw.out_ch == 16
    assert pw.window == (1, 1) and (pw.in_ch, pw.out_ch, pw.groups) == (16, 24, 1)
    assert "Clip" in stem.fused and "Clip" in dw.fused and "Relu" in se1.fused
    assert "HardSigmoid" in se2.fused
    gate = [la for la in imported.dag.layers if la.type == "elementwise"]
    assert [(la.op, la.shape) for la in gate] == [("Mul", (16, 8, 8))]
    assert set(gate[0].deps) == {dw.name, se2.name}
    macs = (16 * 27 * 64) + (16 * 9 * 64) + (16 * 4 + 4 * 16) + (24 * 16 * 64) + 24 * 10
    assert _macs(imported) == macs
    assert _params(imported) == (16 * 27 + 16) + (16 * 9 + 16) + (4 * 16 + 4) + \
        (16 * 4 + 16) + (24 * 16 + 24) + (24 * 10 + 10)
    assert [la.kind for la in imported.dag.layers if la.type == "pool"] == ["avg", "avg"]
    assert all(layers[d] for la in imported.dag.layers for d in la.deps)
    _check_bookkeeping(imported, tmp_path / "mb.onnx")


@pytest.mark.parametrize("dynamo", [*EXPORTERS, pytest.param(None, id="torchscript-opset17")])
def test_vit_encoder_block(tmp_path, dynamo) -> None:
    """Opset 17 from the TorchScript exporter writes GELU as its erf formula; every export
    gives the same layers: FCs per token, MatMul for q k^T and attention @ v."""
    path = tmp_path / "vit.onnx"
    if dynamo is None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(EncoderBlock().eval(), (torch.randn(1, 5, 12),), str(path),
                              dynamo=False, opset_version=17)
        imported = import_onnx(path)
    else:
        imported = _export(EncoderBlock(), (1, 5, 12), path, dynamo)
    tokens, dim, heads = 5, 16, 2
    fcs = [(la.rows, la.in_features, la.out_features) for la in imported.dag.layers
           if la.type == "fc"]
    assert fcs == [(5, 12, 16), (5, 16, 48), (5, 16, 16), (5, 16, 32), (5, 32, 16),
                   (1, 16, 10)]
    matmuls = [(la.batch, la.rows, la.inner, la.cols) for la in imported.dag.layers
               if la.type == "matmul"]
    assert matmuls == [(heads, tokens, 8, tokens), (heads, tokens, tokens, 8)]
    macs = tokens * (12 * dim + dim * 3 * dim + dim * dim + 2 * dim * 2 * dim) + \
        2 * heads * tokens * tokens * (dim // heads) + dim * 10
    assert _macs(imported) == macs
    ops = [la.op for la in imported.dag.layers if la.type == "elementwise"]
    assert ops.count("LayerNormalization") == 2 and ops.count("Softmax") == 1
    assert any("Gelu" in la.fused for la in imported.dag.layers if la.type == "fc")
    assert _types(imported)["add"] == 2
    _check_bookkeeping(imported, path)


@pytest.mark.parametrize("rnn", [nn.LSTM, nn.GRU], ids=["lstm", "gru"])
@pytest.mark.parametrize("dynamo", EXPORTERS)
def test_bidirectional_two_layer_recurrent(tmp_path, dynamo, rnn) -> None:
    imported = _export(Recurrent(rnn), (1, 7, 6), tmp_path / "rnn.onnx", dynamo)
    first, second = [la for la in imported.dag.layers if la.type == "lstm"]
    gates = 4 if rnn is nn.LSTM else 3
    assert (first.embed, first.hidden, first.cells, first.directions) == (6, 5, 7, 2)
    assert (second.embed, second.deps) == (10, (first.name,))
    assert first.cell == second.cell == ("lstm" if rnn is nn.LSTM else "gru")
    # per direction and step: gates x hidden x (input + hidden) multiply-adds
    macs = 2 * 7 * gates * 5 * (6 + 5) + 2 * 7 * gates * 5 * (10 + 5) + 10 * 4
    assert _macs(imported) == macs
    assert _params(imported) == 2 * gates * 5 * (6 + 5 + 2) + 2 * gates * 5 * (10 + 5 + 2) + 44
    assert imported.dag.inputs == {first.name: (7, 6)}
    last = next(la for la in imported.dag.layers if la.type == "elementwise")
    assert (last.op, last.shape, last.deps) == ("Gather", (10,), (second.name,))
    _check_bookkeeping(imported, tmp_path / "rnn.onnx")


@pytest.mark.parametrize("shape", [(100, 1, 80), (100, 80)], ids=["T,1,E", "T,E"])
def test_an_lstm_reading_the_model_input(tmp_path, shape) -> None:
    """An LSTM as the first layer, fed (T, 1, E) or an unbatched (T, E): 100 steps of 80
    features (it was refused: 'expects 8000 input features, its input gives 100')."""
    imported = _export(nn.LSTM(80, 32), shape, tmp_path / "lstm.onnx", False)
    (layer,) = imported.dag.layers
    assert (layer.cells, layer.embed, layer.hidden) == (100, 80, 32)
    assert imported.dag.inputs == {layer.name: (100, 80)}
    assert layer.macs == 100 * 4 * 32 * (80 + 32)
