"""The onnx package's nine "light" model graphs (onnx/backend/test/data/light: Caffe2
model-zoo networks whose weights ConstantOfShape nodes build), imported as shipped, and
the MACs of resnet50 and vgg19 against their published figures.

What is counted: multiply-adds of Conv and FC (Gemm) layers; BatchNormalization is folded
into its conv (no MACs), pooling, ReLU, Add, LRN and Softmax are no multiply-adds. The
published figures count the same (torchvision's model table says "GFLOPS" for these
multiply-adds; He et al. say "FLOPs (multiply-adds)").
"""

from pathlib import Path

import pytest

onnx = pytest.importorskip("onnx")

from archipelago.models.onnx_import import import_onnx  # noqa: E402

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
MODELS = sorted(p.stem.removeprefix("light_") for p in LIGHT.glob("light_*.onnx"))
pytestmark = pytest.mark.skipif(len(MODELS) != 9, reason="onnx's light test models absent")


def _imported(name: str):
    return import_onnx(LIGHT / f"light_{name}.onnx")


def _macs(dag) -> int:
    return sum(getattr(layer, "macs", 0) for layer in dag.layers)


@pytest.mark.parametrize("name", MODELS)
def test_each_light_model_imports_as_shipped(name) -> None:
    """Weights from ConstantOfShape (folded, counted), every data node in a layer; the
    nodes a layer runs read only constants, the values it receives and its own."""
    imported = _imported(name)
    dag = imported.dag
    assert dag.folded["ConstantOfShape"] > 0 and dag.compute_layers > 0
    graph = onnx.load(str(LIGHT / f"light_{name}.onnx")).graph
    placed = {i for nodes in imported.layer_nodes.values() for i in nodes}
    assert len(graph.node) - len(placed) == sum(dag.folded.values())
    for layer in dag.layers:
        known = set(imported.layer_inputs[layer.name]) | set(imported.constants)
        for index in imported.layer_nodes[layer.name]:
            node = graph.node[index]
            assert all(not n or n in known for n in node.input), (layer.name, node.name)
            known.update(node.output)


def test_resnet50_macs_are_the_published_figure() -> None:
    """This resnet50 strides its downsampling bottlenecks in the 3x3 conv (ResNet v1.5, as
    torchvision's): 4.09 GMACs and 25,557,032 parameters in torchvision's model table
    (ResNet50_Weights.IMAGENET1K_V1: "GFLOPS 4.09", "params 25.6M", the exact count from
    its state dict). He et al. 2016 Table 1 gives 3.8 x 10^9 multiply-adds for v1, the
    stride in the first 1x1 conv: moving it back saves 3/4 of each of those three 1x1
    convs, by hand 3 x 3/4 x 128*256*56*56 (=256*512*28*28 = 512*1024*14*14), leaving
    3.858 x 10^9, the paper's 3.8 to its two digits."""
    dag = _imported("resnet50").dag
    convs = [la for la in dag.layers if la.type == "conv"]
    assert len(convs) == 53 and sum(la.type == "fc" for la in dag.layers) == 1
    strided = [(la.window, la.stride) for la in convs if la.stride == 2]
    assert strided == [((7, 7), 2)] + [((3, 3), 2), ((1, 1), 2)] * 3
    macs = _macs(dag)
    assert round(macs / 1e9, 2) == 4.09
    v1 = macs - 3 * 3 * 128 * 256 * 56 * 56 // 4
    assert int(v1 / 1e8) == 38 and round(v1 / 1e9, 3) == 3.858
    # BN's scale and shift per channel (torchvision's count) against the one bias per
    # output channel a folded BN leaves on its conv here
    params = sum(la.weight_elements for la in dag.layers)
    assert params + sum(la.out_ch for la in convs) == 25_557_032


def test_vgg19_macs_are_the_published_figure() -> None:
    """torchvision's VGG19_Weights.IMAGENET1K_V1: "GFLOPS 19.63", 143,667,240 parameters
    (Simonyan & Zisserman 2015, Table 2: 144 million for configuration E)."""
    dag = _imported("vgg19").dag
    assert round(_macs(dag) / 1e9, 2) == 19.63
    assert sum(la.weight_elements for la in dag.layers) == 143_667_240
    # by hand: 16 3x3 convs of VGG-E's widths at 224, 112, 56, 28, 14 and three FCs
    widths = [(3, 64, 224), (64, 64, 224), (64, 128, 112), (128, 128, 112),
              (128, 256, 56)] + [(256, 256, 56)] * 3 + [(256, 512, 28)] + \
        [(512, 512, 28)] * 3 + [(512, 512, 14)] * 4
    by_hand = sum(cin * cout * 9 * size * size for cin, cout, size in widths) + \
        512 * 7 * 7 * 4096 + 4096 * 4096 + 4096 * 1000
    assert _macs(dag) == by_hand


@pytest.mark.parametrize("cluster", ["hacc", "chef-cluster1"])
@pytest.mark.parametrize("name", MODELS)
def test_each_light_model_plans_with_chef_and_h2h(name, cluster) -> None:
    """Issue 24's bar: every light model, as shipped, plans with chef and with its H2H
    baseline on both clusters; every layer lands on an FPGA, and chef, which also starts
    from H2H's deployment, is never the slower of the two."""
    from archipelago.hardware.cluster import resolve_cluster
    from archipelago.strategies.chef.plan import ChefConfig
    from archipelago.strategies.chef.planners import plan_chef, plan_h2h

    dag = _imported(name).dag
    machines = resolve_cluster(cluster)
    chef = plan_chef(dag, machines, ChefConfig())
    h2h = plan_h2h(dag, machines, ChefConfig())
    for plan in (chef, h2h):
        assert set(plan.placement()) == {layer.name for layer in dag.layers}
        assert plan.latency_s > 0
    assert chef.latency_s <= h2h.latency_s * (1 + 1e-12)
