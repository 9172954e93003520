"""torch's own attention modules as users export them: nn.MultiheadAttention (batch first
and sequence first, self- and cross-attention), nn.TransformerEncoderLayer,
nn.TransformerDecoderLayer with a causal mask and a small nn.Transformer, each exported by
both torch exporters. The TorchScript exporter splits the in-projection with a Reshape to a
computed target whose rank onnx's first inference leaves unknown (it was refused as 'shape
unknown'). Each import is checked against counts by hand from the module definitions, the
split emulation against onnxruntime, and what stays refused names the node and why."""

import warnings
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")
pytest.importorskip("onnxscript")
from torch import nn  # noqa: E402

from archipelago.errors import ConfigError  # noqa: E402
from archipelago.models.onnx_import import import_onnx  # noqa: E402
from tests.export_cache import once, run_folder  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore")
D, HEADS, FF, T, S, VOCAB = 16, 2, 32, 12, 10, 100  # width, heads, FFN, target/source tokens
EXPORTERS = ("legacy", "dynamo")


def _ids(tokens: int):
    return torch.randint(0, VOCAB, (1, tokens))


class Attention(nn.Module):
    """nn.MultiheadAttention alone: self-attention on x, or cross-attention of x on m."""

    def __init__(self, batch_first: bool) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(D, HEADS, batch_first=batch_first)

    def forward(self, x, *memory):
        kv = memory[0] if memory else x
        return self.attn(x, kv, kv)[0]


class Encoder(nn.Module):
    """The issue's network: token embedding, one encoder layer, the mean token."""

    def __init__(self, batch_first: bool = True) -> None:
        super().__init__()
        self.batch_first, self.embed = batch_first, nn.Embedding(VOCAB, D)
        self.layer = nn.TransformerEncoderLayer(D, HEADS, FF, dropout=0.0,
                                                batch_first=batch_first)

    def forward(self, ids):
        x = self.embed(ids) if self.batch_first else self.embed(ids).transpose(0, 1)
        return self.layer(x).mean(1 if self.batch_first else 0)


class MaskedStack(nn.Module):
    """Two pre-norm GELU encoder layers (nn.TransformerEncoder) on embedded ids plus a
    learned position table, torch's boolean key_padding_mask (True: padding) as a second
    input, a 3-way head on token 0."""

    def __init__(self) -> None:
        super().__init__()
        self.embed, self.position = nn.Embedding(VOCAB, D), nn.Parameter(torch.randn(1, T, D))
        layer = nn.TransformerEncoderLayer(D, HEADS, FF, dropout=0.0, activation="gelu",
                                           batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(D, 3)

    def forward(self, ids, padding):
        x = self.encoder(self.embed(ids) + self.position, src_key_padding_mask=padding)
        return self.head(x[:, 0])


class Decoder(nn.Module):
    """Embedded target and source, one decoder layer under a causal target mask (-inf
    above the diagonal: an initializer in the dynamo export, a Constant in the other)."""

    def __init__(self) -> None:
        super().__init__()
        self.source, self.target = nn.Embedding(VOCAB, D), nn.Embedding(VOCAB, D)
        self.layer = nn.TransformerDecoderLayer(D, HEADS, FF, dropout=0.0, batch_first=True)

    def forward(self, src, tgt):
        mask = nn.Transformer.generate_square_subsequent_mask(tgt.shape[1])
        return self.layer(self.target(tgt), self.source(src), tgt_mask=mask)


class Seq2Seq(nn.Module):
    """nn.Transformer with one encoder and one decoder layer, embedded ids in, logits out."""

    def __init__(self) -> None:
        super().__init__()
        self.source, self.target = nn.Embedding(VOCAB, D), nn.Embedding(VOCAB, D)
        self.transformer = nn.Transformer(D, HEADS, 1, 1, FF, dropout=0.0, batch_first=True)
        self.out = nn.Linear(D, VOCAB)

    def forward(self, src, tgt):
        return self.out(self.transformer(self.source(src), self.target(tgt)))


class RawDecoder(nn.Module):
    """A decoder layer given float tensors: its first residual adds the raw input."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.TransformerDecoderLayer(D, HEADS, FF, dropout=0.0, batch_first=True)

    def forward(self, tgt, memory):
        return self.layer(tgt, memory)


NETWORKS = {
    "mha_batch_first": lambda: (Attention(True), (torch.randn(1, T, D),)),
    "mha_seq_first": lambda: (Attention(False), (torch.randn(T, 1, D),)),
    "mha_cross": lambda: (Attention(True), (torch.randn(1, T, D), torch.randn(1, S, D))),
    "encoder": lambda: (Encoder(), (_ids(T),)),
    "encoder_seq_first": lambda: (Encoder(False), (_ids(T),)),
    "decoder": lambda: (Decoder(), (_ids(S), _ids(T))),
    "transformer": lambda: (Seq2Seq(), (_ids(S), _ids(T))),
    "masked_stack": lambda: (MaskedStack(), (_ids(T), torch.arange(T)[None] >= T - 3)),
    "raw_decoder": lambda: (RawDecoder(), (torch.randn(1, T, D), torch.randn(1, S, D))),
}


def _export(name: str, how: str, folder: Path) -> Path:
    torch.manual_seed(0)
    module, args = NETWORKS[name]()
    path = folder / f"{name}-{how}.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module.eval(), args, str(path), dynamo=how == "dynamo",
                          **({"verbose": False} if how == "dynamo" else {}))
    return path


@pytest.fixture(scope="session")
def exported(tmp_path_factory):
    """`exported(name, how)`: the network's ONNX file, exported once per run, shared by the
    xdist workers this module's tests are split between (tests/export_cache.py)."""
    folder = run_folder(tmp_path_factory, "torch_attention")
    return lambda name, how: once(folder, f"{name}-{how}",
                                  lambda out: _export(name, how, out))


# -- counts by hand from the module definitions (not from the DAG code) ------------------

def _attention(queries: int, keys: int) -> list[tuple[str, int, int]]:
    """(type, MACs, stored elements) of one nn.MultiheadAttention(D, HEADS): the packed
    in-projection (one D -> 3D Linear on self-attention; on cross-attention D -> D for the
    queries and D -> 2D for the keys and values), the split into q, k and v (one layer per
    part read), scores q k^T per head, their softmax, the context per head, the D -> D
    out-projection."""
    head = D // HEADS
    if queries == keys:
        projections = [("fc", queries * D * 3 * D, 3 * D * D + 3 * D)]
        parts = 3
    else:
        projections = [("fc", queries * D * D, D * D + D),
                       ("fc", keys * D * 2 * D, 2 * D * D + 2 * D)]
        parts = 2  # the queries' projection is its own layer: only k and v are split
    return [*projections, *[("elementwise", 0, 0)] * parts,
            ("matmul", HEADS * queries * keys * head, 0), ("elementwise", 0, 0),
            ("matmul", HEADS * queries * keys * head, 0),
            ("fc", queries * D * D, D * D + D)]


def _norm_and_add() -> list[tuple[str, int, int]]:
    """The residual Add and the LayerNorm (weight and bias) after each sublayer."""
    return [("add", 0, 0), ("elementwise", 0, 2 * D)]


def _ffn(tokens: int) -> list[tuple[str, int, int]]:
    return [("fc", tokens * D * FF, D * FF + FF), ("fc", tokens * FF * D, FF * D + D),
            *_norm_and_add()]


def _encoder_layer(tokens: int) -> list[tuple[str, int, int]]:
    return [*_attention(tokens, tokens), *_norm_and_add(), *_ffn(tokens)]


def _decoder_layer() -> list[tuple[str, int, int]]:
    return [*_attention(T, T), *_norm_and_add(), *_attention(T, S), *_norm_and_add(),
            *_ffn(T)]


EMBEDDING = ("elementwise", 0, VOCAB * D)  # the lookup: a Gather of the table
FINAL_NORM = ("elementwise", 0, 2 * D)
EXPECTED = {
    "mha_batch_first": _attention(T, T), "mha_seq_first": _attention(T, T),
    "mha_cross": _attention(T, S),
    "encoder": [EMBEDDING, *_encoder_layer(T), ("elementwise", 0, 0)],  # and the mean
    "encoder_seq_first": [EMBEDDING, *_encoder_layer(T), ("elementwise", 0, 0)],
    "decoder": [EMBEDDING, EMBEDDING, *_decoder_layer()],
    "transformer": [EMBEDDING, EMBEDDING, *_encoder_layer(S), FINAL_NORM, *_decoder_layer(),
                    FINAL_NORM, ("fc", T * D * VOCAB, D * VOCAB + VOCAB)],
}


# The padding mask's path: Where(mask, -inf, 0) on its (1, T) (the exporter's zeros stored:
# T elements), per layer the bias broadcast to the heads (Expand: the dynamo exporter's
# optimizer shares the two layers' one) and added to the scores; the pre-norm layers hold
# the post-norm ones' layers; token 0 picked (a Gather layer) for the head.
MASK_PATH = [("elementwise", 0, T), *[("elementwise", 0, 0)] * 4]
EXPECTED["masked_stack"] = [("elementwise", 0, VOCAB * D + T * D), *MASK_PATH,
                            *_encoder_layer(T), *_encoder_layer(T), ("elementwise", 0, 0),
                            ("fc", D * 3, D * 3 + 3)]


def _layers(dag) -> list[tuple[str, int, int]]:
    return sorted((la.type, la.macs, la.weight_elements) for la in dag.layers)


# Every network from the TorchScript exporter's file; from the dynamo exporter's (seconds
# each) the issue's encoder, sequence-first attention, the decoder's -inf mask initializer
# and nn.Transformer (the others import alike from it too).
CASES = [*((name, "legacy") for name in EXPECTED),
         *((name, "dynamo") for name in ("encoder", "mha_seq_first", "decoder", "transformer"))]


@pytest.mark.parametrize("name,how", CASES)
def test_torch_attention_imports_as_counted_by_hand(name, how, exported):
    model = NETWORKS[name]()[0]
    dag = import_onnx(exported(name, how)).dag
    assert _layers(dag) == sorted(EXPECTED[name])
    assert sum(la.weight_elements for la in dag.layers) == \
        sum(p.numel() for p in model.parameters()) + (T if name == "masked_stack" else 0)


@pytest.mark.parametrize("how", EXPORTERS)
def test_the_split_in_projection_feeds_the_heads(how, exported):
    """The packed D -> 3D projection is read by three splits; q and k (scaled) feed the
    scores of HEADS heads, the softmax and v the context, which the out-projection reads."""
    dag = import_onnx(exported("encoder", how)).dag
    packed = next(la for la in dag.layers if la.type == "fc" and la.out_features == 3 * D)
    splits = dag.successors[packed.name]
    assert [dag.by_name[s].shape for s in splits] == [(T, 1, D)] * 3
    scores, context = (la for la in dag.layers if la.type == "matmul")
    assert (scores.batch, scores.rows, scores.inner, scores.cols) == (HEADS, T, D // HEADS, T)
    assert (context.batch, context.rows, context.inner, context.cols) == \
        (HEADS, T, T, D // HEADS)
    assert set(scores.deps) | set(context.deps[1:]) == set(splits)
    assert dag.by_name[context.deps[0]].op == "Softmax"
    out = dag.successors[context.name]
    assert [(dag.by_name[o].type, dag.by_name[o].in_features) for o in out] == [("fc", D)]


@pytest.mark.parametrize("name,how", [("encoder", "legacy"), ("encoder", "dynamo"),
                                      ("mha_seq_first", "dynamo"), ("mha_cross", "legacy"),
                                      ("decoder", "dynamo"), ("decoder", "legacy"),
                                      ("transformer", "legacy"),
                                      ("masked_stack", "legacy")])
def test_split_over_two_processes_equals_onnxruntime(name, how, exported):
    """Layers alternate between two processes (values cross both ways); the causal mask's
    -inf reaches the scores as onnxruntime's does, and the padding mask (seeded True over
    the last quarter of the positions) too."""
    from archipelago.strategies.chef.emulate.onnx_run import RTOL, emulate_onnx

    path = exported(name, how)
    imported = import_onnx(path)
    order = list(imported.dag.order)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads (torch)
        report = emulate_onnx(path, imported, {n: i % 2 for i, n in enumerate(order)}, order,
                              ["fpga0", "fpga1"], seed=1)
    assert report["passed"], report["per_output"]
    assert report["max_rel_error"] < RTOL


def test_the_seeded_padding_mask_changes_the_output(exported):
    """Without the mask path the head would not depend on the padded keys: with no position
    padded onnxruntime's logits differ from the seeded run's."""
    import onnx

    from archipelago.strategies.chef.emulate.onnx_run import (
        onnxruntime_outputs,
        seeded_inputs,
    )

    path = exported("masked_stack", "legacy")
    inputs = seeded_inputs(onnx.load(str(path)), seed=1)
    name = next(n for n, v in inputs.items() if v.dtype == np.bool_)
    assert inputs[name].tolist() == [[False] * (T - 3) + [True] * 3]
    padded = onnxruntime_outputs(path, inputs)
    whole = onnxruntime_outputs(path, {**inputs, name: np.zeros_like(inputs[name])})
    assert not np.allclose(*(next(iter(out.values())) for out in (padded, whole)))


def test_the_causal_mask_is_kept_as_minus_infinity(exported):
    """The dynamo export's mask is an initializer holding -inf above the diagonal: read
    (a NaN or +inf weight is still refused, tests/test_onnx_hostile.py), and added to the
    scores inside their layer."""
    imported = import_onnx(exported("decoder", "dynamo"))
    masks = [v for v in imported.constants.values()
             if isinstance(v, np.ndarray) and v.size == T * T and np.isneginf(v).any()]
    assert masks and np.isneginf(masks[0].reshape(T, T)[np.triu_indices(T, 1)]).all()
    scores = [la for la in imported.dag.layers if la.type == "matmul" and la.cols == T]
    assert [la.fused for la in scores] == [("Add",)]


def test_a_residual_on_a_raw_input_is_refused_naming_node_and_input(exported):
    """A DAG layer reads one model input or other layers' outputs: the decoder's first
    residual (tgt plus its self-attention) is refused at its Add, naming the input (the
    dynamo export's line names its node_add and the input tgt alike)."""
    with pytest.raises(ConfigError, match=r"field 'node /layer/Add \(Add\)': mixes the "
                                          r"model input \S+ with layer outputs; .* a "
                                          r"residual or join on a raw input is not imported$"):
        import_onnx(exported("raw_decoder", "legacy"))


def test_the_issue_encoder_plans_and_emulates_from_the_command_line(exported):
    """`archi plan` and `archi emulate` on the issue's TorchScript export: planned over its
    16 layers, split over chef's FPGA processes, equal to onnxruntime's output."""
    import json

    from tests.cli_here import archi_here

    path = str(exported("encoder", "legacy"))
    plan = archi_here("plan", path, "--cluster", "chef-cluster1", "--strategy", "chef",
                      "--json")
    assert plan.returncode == 0, plan.stderr
    assert json.loads(plan.stdout)["layers"] == len(EXPECTED["encoder"]) == 16
    out = archi_here("emulate", path, "--cluster", "chef-cluster1", "--strategy", "chef",
                     "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["passed"] and report["agrees"] and report["processes"] > 1


@pytest.mark.parametrize("name", ["encoder", "mha_cross", "transformer"])
def test_torch_export_files_hold_the_counted_work_and_heads(name, tmp_path):
    """The same modules saved by torch.export (.pt2; torch_import writes q, k and v as
    three FCs, so the layers differ from the ONNX files' but the totals do not): the
    encoder's attention calls scaled_dot_product_attention (no bmm: its heads were taken
    as 1, a (1, T, T) softmax), cross-attention splits its packed weight (an
    operator.getitem in the region: an AttributeError)."""
    from archipelago.models.torch_export import dag_from_exported

    torch.manual_seed(0)
    module, args = NETWORKS[name]()
    path = tmp_path / f"{name}.pt2"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.export.save(torch.export.export(module.eval(), args), path)
    dag = dag_from_exported(path)
    assert sum(la.macs for la in dag.layers) == sum(macs for _, macs, _ in EXPECTED[name])
    assert sum(la.weight_elements for la in dag.layers) == \
        sum(p.numel() for p in module.parameters())
    assert {la.batch for la in dag.layers if la.type == "matmul"} == {HEADS}
    assert {la.shape[0] for la in dag.layers if getattr(la, "op", "") == "Softmax"} == {HEADS}
