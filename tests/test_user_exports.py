"""Networks as users export them (issue 38 point 5): transformers' BERT, RoBERTa and
DistilBERT (with and without their attention mask), ConvNeXt and ViT, and ShuffleNet, Swin
(with and without shifted windows), DenseNet and LSTM blocks written from their papers
(tests/user_networks.py), exported with torch.onnx.export (dynamo and TorchScript) and
torch.export (.pt2). Each imports as the same layers from all three files (count, kinds,
multiply-accumulates per layer, parameters) and plans the same; the multiply-accumulates
are checked against counts by hand from the configurations; the ONNX files are split over
two processes and emulated against onnxruntime; BERT plans with chef and h2h from each."""

import json
import warnings
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("onnxscript")

from archipelago.errors import ConfigError
from archipelago.models.dag_summary import model_summary
from archipelago.models.onnx_import import dag_from_onnx, import_onnx
from archipelago.models.torch_export import dag_from_exported
from tests.cli_here import archi_here
from tests.export_cache import once, run_folder
from tests.user_networks import FORMATS, export_network

pytestmark = pytest.mark.filterwarnings("ignore")


@pytest.fixture(scope="session")
def exported(tmp_path_factory):
    """`exported(name, how)`: the network's file, exported once per run and shared between
    xdist workers (tests/export_cache.py)."""
    folder = run_folder(tmp_path_factory, "user_exports")

    def get(name: str, how: str) -> Path:
        return once(folder, f"{name}-{how}", lambda out: export_network(name, out, how))
    return get


def _dag(path: Path):
    return (dag_from_exported if path.suffix == ".pt2" else dag_from_onnx)(path)


def _layers(dag) -> list[tuple[str, int, int]]:
    """Each layer's kind, multiply-accumulates and stored elements, in a canonical order
    (names differ between the formats)."""
    return sorted((la.type, la.macs, la.weight_elements) for la in dag.layers)


# Multiply-accumulates by hand from the configurations in tests/user_networks.py.
T, H, FFN = 16, 32, 64  # tokens, hidden, intermediate; two layers, two heads
ENCODER_LAYER = 4 * T * H * H + 2 * T * H * FFN + 2 * T * T * H  # q k v o, FFN, scores+context
VIT_TOKENS = 17  # 4 x 4 patches of 8 x 8 and the class token
MACS = {
    # two layers, the pooler on the first token (BERT only), a 3-label classifier
    "bert": 2 * ENCODER_LAYER + H * H + H * 3,
    "distilbert": 2 * ENCODER_LAYER + H * H + H * 3,  # its pre_classifier is the pooler
    "roberta": 2 * ENCODER_LAYER + H * H + H * 3,  # its head's dense layer is the pooler
    # 4x4/4 stem to 12x12x8; block: 7x7 depthwise, 8->32->8; 2x2/2 down to 6x6x16; block;
    # a 10-class head
    "convnext": (8 * 3 * 16 * 144 + 8 * 49 * 144 + 2 * 144 * 8 * 32 + 16 * 8 * 4 * 36
                 + 16 * 49 * 36 + 2 * 36 * 16 * 64 + 16 * 10),
    "vit": (32 * 3 * 64 * 16 + 2 * (4 * VIT_TOKENS * H * H + 2 * VIT_TOKENS * H * FFN
                                    + 2 * VIT_TOKENS * VIT_TOKENS * H) + H * 10),
}
NETWORKS = ["bert", "roberta", "distilbert", "convnext", "vit", "shufflenet", "swin",
            "swin_shift", "densenet", "lstm"]


@pytest.mark.slow
@pytest.mark.parametrize("name", NETWORKS)
def test_one_network_imports_as_the_same_layers_from_onnx_and_pt2(name, exported):
    dags = {how: _dag(exported(name, how)) for how in FORMATS}
    layers = {how: _layers(dag) for how, dag in dags.items()}
    assert layers["dynamo"] == layers["legacy"] == layers["pt2"]
    summaries = [model_summary(dag) for dag in dags.values()]
    assert len({json.dumps({k: s[k] for k in ("layers", "layers_by_type", "macs",
                                                "parameters")}) for s in summaries}) == 1
    if name in MACS:
        assert summaries[0]["macs"] == MACS[name]


# Networks whose attention (torch's scaled_dot_product_attention under a boolean mask) runs
# a safe softmax: the dynamo exporter and torch.export keep its NaN guard (2 operations per
# score), the TorchScript exporter writes a plain Softmax, so its plan is a little faster.
SAFE_SOFTMAX = {"bert", "roberta", "distilbert", "vit"}


def _plans(name: str, strategy: str, exported) -> dict[str, dict]:
    plans = {}
    for how in FORMATS:
        out = archi_here("plan", str(exported(name, how)), "--cluster", "chef-cluster1",
                         "--strategy", strategy, "--json")
        assert out.returncode == 0, out.stderr
        plans[how] = json.loads(out.stdout)
    return plans


def _same_plan(plans: dict[str, dict], name: str) -> None:
    latency = {how: plan["latency_s"] for how, plan in plans.items()}
    assert latency["dynamo"] == latency["pt2"] > 0
    assert {plan["layers"] for plan in plans.values()} == {plans["pt2"]["layers"]}
    if name in SAFE_SOFTMAX:
        assert latency["legacy"] < latency["pt2"]
    else:
        assert latency["legacy"] == latency["pt2"]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["convnext", "vit", "shufflenet", "swin", "swin_shift"])
def test_vision_networks_plan_the_same_from_both_formats(name, exported):
    _same_plan(_plans(name, "chef", exported), name)


@pytest.mark.slow
@pytest.mark.parametrize("name,layers", [("bert", 31), ("roberta", 39), ("distilbert", 31)])
@pytest.mark.parametrize("strategy", ["chef", "h2h"])
def test_encoders_exported_three_ways_plan_alike(name, layers, strategy, exported):
    """RoBERTa's eight more layers compute its positions from the ids: ids != pad, their
    running sum, times the mask, the token types picked by position, the two lookups."""
    plans = _plans(name, strategy, exported)
    _same_plan(plans, name)
    assert plans["pt2"]["layers"] == layers


@pytest.mark.slow
@pytest.mark.parametrize("name,how", [("bert", "dynamo"), ("bert", "legacy"),
                                      ("roberta", "dynamo"), ("roberta", "legacy"),
                                      ("distilbert", "legacy"), ("convnext", "dynamo"),
                                      ("vit", "dynamo"), ("shufflenet", "legacy"),
                                      ("swin", "dynamo"), ("densenet", "legacy"),
                                      ("swin_hf", "legacy"), ("bert_masked", "dynamo"),
                                      ("bert_masked", "legacy"),
                                      ("roberta_masked", "dynamo"),
                                      ("distilbert_masked", "legacy"),
                                      ("bert_encoder_masked", "legacy"),
                                      ("swin_shift", "dynamo"), ("swin_shift", "legacy")])
def test_onnx_export_split_over_two_processes_equals_onnxruntime(name, how, exported):
    """BERT's token ids are seeded within its vocabulary, its attention mask is a padding
    mask (the last quarter zeros: BertModel's last hidden state is compared at every
    position, the padded ones computed as onnxruntime computes them); the dynamo
    exporter's NaN guard after each softmax runs inside the softmax layer."""
    from archipelago.strategies.chef.emulate.onnx_run import RTOL, emulate_onnx

    path = exported(name, how)
    imported = import_onnx(path)
    order = list(imported.dag.order)
    placement = {n: i % 2 for i, n in enumerate(order)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads (torch)
        report = emulate_onnx(path, imported, placement, order, ["fpga0", "fpga1"], seed=1)
    assert report["passed"], report["per_output"]
    assert report["max_rel_error"] < RTOL


@pytest.mark.slow
def test_transformers_swin_plans_from_its_torchscript_export(exported):
    """Two stages of one block: patch embedding, per block a LayerNorm-attention-LayerNorm
    MLP, the patch merging between, the head on the tokens' mean (AdaptiveAvgPool1d)."""
    dag = _dag(exported("swin_hf", "legacy"))
    ops = [la.op for la in dag.layers if la.type == "elementwise"]
    assert ops.count("ReduceMean") == 1 and ops.count("Softmax") == 2
    assert len([la for la in dag.layers if la.type == "matmul"]) == 4
    out = archi_here("plan", str(exported("swin_hf", "legacy")), "--cluster",
                     "chef-cluster1", "--strategy", "chef", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["layers"] == len(dag.layers)


@pytest.mark.slow
def test_bert_layers_are_its_embedding_lookup_attention_and_pooled_token(exported):
    dag = _dag(exported("bert", "legacy"))
    by_op = sorted(la.op for la in dag.layers if la.type == "elementwise")
    # the word lookup (token types and positions are constants added to it), five
    # LayerNorms, two softmaxes, the pooler's first token
    assert by_op == ["Gather", "Gather", *["LayerNormalization"] * 5, "Softmax", "Softmax"]
    lookup = next(la for la in dag.layers if la.type == "elementwise" and not la.deps)
    assert lookup.op == "Gather" and lookup.params == 100 * H + 2 * T * H
    assert dag.inputs[lookup.name] == (T,)
    scores = [la for la in dag.layers if la.type == "matmul"]
    assert sorted((m.batch, m.rows, m.inner, m.cols) for m in scores) == \
        [(2, T, 16, T)] * 2 + [(2, T, T, 16)] * 2


@pytest.mark.slow
def test_convnext_channels_first_norm_takes_the_conv_layout(exported):
    """The stem's LayerNorm runs on the channels-last map; the depthwise conv after it
    reads 8 channels of 12 x 12, not 12 channels."""
    for how in ("legacy", "pt2"):
        dag = _dag(exported("convnext", how))
        norms = [la for la in dag.layers if getattr(la, "op", "") == "LayerNormalization"]
        assert (8, 12, 12) in {la.shape for la in norms}


@pytest.mark.slow
def test_a_7x7_conv_over_a_7x7_map_costs_what_the_linear_costs(exported):
    dags = {as_: _dag(exported(f"vgg_{as_}", "legacy")) for as_ in ("conv", "linear")}
    assert _layers(dags["conv"]) == _layers(dags["linear"])
    head = next(la for la in dags["conv"].layers if la.name == "fc1_Conv")
    assert (head.type, head.in_features, head.out_features) == ("fc", 8 * 7 * 7, 32)
    latencies = {archi_here("plan", str(exported(f"vgg_{as_}", how)), "--cluster",
                            "chef-cluster1", "--strategy", "chef", "--json").stdout
                 for as_ in ("conv", "linear") for how in ("legacy", "pt2")}
    assert len({json.loads(out)["latency_s"] for out in latencies}) == 1


UNMASKED_LAYERS = {"bert": 31, "roberta": 39, "distilbert": 31}


def _mask_path(dag) -> list[tuple[str, tuple[int, ...], int]]:
    return sorted((la.op, la.shape, la.ops_per_element) for la in dag.layers
                  if la.type == "elementwise" and la.op in ("And", "Where", "Add"))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["bert", "roberta", "distilbert"])
def test_encoders_given_their_attention_mask_add_the_mask_path(name, exported):
    """transformers ANDs the (1, 16) padding mask, indexed by its aranges (a permutation:
    no layer), with the constant (query, key) mask: an And on 16 x 16 elements. .pt2 and
    the TorchScript exporter then make it a bias per attention call (Where(mask, 0, min))
    and add it to the two heads' scores; the dynamo exporter's optimizer shares the two
    identical Where nodes, which fuse into the And. The MACs are the unmasked network's."""
    dags = {how: _dag(exported(f"{name}_masked", how)) for how in FORMATS}
    assert _layers(dags["legacy"]) == _layers(dags["pt2"])
    assert _mask_path(dags["legacy"]) == _mask_path(dags["pt2"]) == \
        [("Add", (2, T, T), 1)] * 2 + [("And", (1, T, T), 1)] + [("Where", (1, T, T), 1)] * 2
    assert _mask_path(dags["dynamo"]) == [("Add", (2, T, T), 1)] * 2 + [("And", (1, T, T), 2)]
    assert [len(dags[how].layers) for how in FORMATS] == \
        [UNMASKED_LAYERS[name] + 3, UNMASKED_LAYERS[name] + 5, UNMASKED_LAYERS[name] + 5]
    assert {model_summary(dag)["macs"] for dag in dags.values()} == {MACS[name]}
    if name == "bert":  # exported with a dynamic token axis: sized by its example inputs
        assert _layers(_dag(exported("bert_masked", "pt2_dynamic"))) == _layers(dags["pt2"])
    for dag in dags.values():  # the And is a first layer, reading the (16,) mask
        assert dag.inputs[next(la.name for la in dag.layers
                               if getattr(la, "op", "") == "And")] == (T,)


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["chef", "h2h"])
def test_bert_given_its_attention_mask_plans_from_three_exports(strategy, exported):
    """The TorchScript export and .pt2 hold the same layers and plan the same; the dynamo
    export's one Where fewer is never slower."""
    plans = _plans("bert_masked", strategy, exported)
    latency = {how: plan["latency_s"] for how, plan in plans.items()}
    assert latency["legacy"] == latency["pt2"] >= latency["dynamo"] > 0
    assert [plans[how]["layers"] for how in FORMATS] == [34, 36, 36]


@pytest.mark.slow
def test_the_emulation_feeds_a_padding_mask_that_changes_the_output(exported):
    """Without the mask path the logits would not depend on the padded positions: with
    every position kept onnxruntime's logits differ from the padded run's."""
    import numpy as np
    import onnx

    from archipelago.strategies.chef.emulate.onnx_run import (
        onnxruntime_outputs,
        seeded_inputs,
    )

    path = exported("bert_masked", "legacy")
    inputs = seeded_inputs(onnx.load(str(path)), seed=1)
    mask = inputs["attention_mask.1"]
    assert mask.tolist() == [[1] * 12 + [0] * 4]
    padded = onnxruntime_outputs(path, inputs)
    whole = onnxruntime_outputs(path, {**inputs, "attention_mask.1": np.ones_like(mask)})
    assert not np.allclose(*(next(iter(out.values())) for out in (padded, whole)))


@pytest.mark.slow
def test_shifted_windows_roll_the_map_as_one_layer_each_way(exported):
    """The block rolls the 8 x 8 x 16 map by (-2, -2) before the windows and by (2, 2)
    after them: two Roll layers copying each element once per axis, from the exporters'
    Slice, Slice, Concat per axis as from aten.roll; the rest is the unshifted block's
    (its window mask a constant added to the scores)."""
    unshifted = len(_dag(exported("swin", "pt2")).layers)
    for how in FORMATS:
        dag = _dag(exported("swin_shift", how))
        rolls = [la for la in dag.layers if getattr(la, "op", "") == "Roll"]
        assert [(la.shape, la.ops_per_element) for la in rolls] == [((8, 8, 16), 2)] * 2
        assert len(dag.layers) == unshifted + 2


@pytest.mark.slow
@pytest.mark.parametrize("name", ["bert_masked", "swin_shift"])
def test_pt2_mask_and_roll_layers_emulate_split_as_unsplit(name, exported):
    """`archi emulate model.pt2` runs the DAG on seeded values: the And, Where and Roll
    layers run on two processes as on one, finite (the Where's mask is float32's lowest,
    not -inf)."""
    from archipelago.strategies.chef.emulate.run import emulate_dag

    dag = _dag(exported(name, "pt2"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads (torch)
        report = emulate_dag(dag, {n: i % 2 for i, n in enumerate(dag.order)},
                             list(dag.order), ["fpga0", "fpga1"], seed=1)
    assert report["outputs_equal"] and report["max_abs_diff"] == 0.0


def test_an_operator_not_understood_is_refused_naming_the_node(tmp_path):
    import torch

    class Flipped(torch.nn.Module):
        """A flip is not imported."""

        def __init__(self) -> None:
            super().__init__()
            self.fc = torch.nn.Linear(4, 4)

        def forward(self, x):
            return self.fc(torch.flip(self.fc(x), (1,)))

    path = tmp_path / "flipped.pt2"
    torch.export.save(torch.export.export(Flipped(), (torch.randn(1, 4),)), path)
    with pytest.raises(ConfigError, match=r"field 'flip': function flip\.default is not "
                                          r"supported$"):
        dag_from_exported(path)
