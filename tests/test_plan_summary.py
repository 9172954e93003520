"""`archi plan` of a layer DAG prints the model's summary (issue 24 point 5): layers by type,
parameters, MACs, and every operator the importer folded or fused, in the table and in
--json's `model_summary`."""

import json

import yaml

from archipelago.models.dag_summary import model_summary, summary_lines
from archipelago.models.dag_zoo import builtin_dag
from tests.cli_here import archi_here
from tests.test_chef_vs_h2h import vgg19_chain

archi = archi_here  # what `plan` prints: in this process (tests/cli_here.py)


def test_casua_surf_counted_by_hand():
    """Three ResNet-18 res1-res3 streams with an SE gate each, the shared res4/res5 on the
    fused 384-channel map and a 1x1 classifier (dag_zoo.casua_surf; tests/test_dag.py
    counts one stream's MACs, 251,080,704)."""
    stream = 64 * 3 * 7 * 7 * 56 * 56 + 4 * 64 * 64 * 9 * 28 * 28 + \
        (128 * 64 * 9 + 128 * 64 + 3 * 128 * 128 * 9) * 14 * 14 + 128 * 128 * 14 * 14
    res4 = (256 * 384 * 9 + 256 * 384 + 3 * 256 * 256 * 9) * 7 * 7  # 14 -> 7
    res5 = (512 * 256 * 9 + 512 * 256 + 3 * 512 * 512 * 9) * 4 * 4  # 7 -> 4, padded 3x3/2
    weights = (64 * 3 * 49 + 64 + 4 * (64 * 64 * 9 + 64) + 128 * 64 * 9 + 128
               + 3 * (128 * 128 * 9 + 128) + 128 * 64 + 128 + 128 * 128 + 128)
    summary = model_summary(builtin_dag("casua-surf"))
    assert summary == {
        "layers": 65,
        # 44 convs (Table III); an add per basic block (4 per stream, 4 shared); per stream
        # a max pool, then the concat (a 1x1 pool) and the global average pool
        "layers_by_type": {"add": 3 * 4 + 4, "conv": 44, "pool": 3 + 2},
        "parameters": 3 * weights + 11_144_960 + 2 * 512 + 2,
        "macs": 3 * stream + res4 + res5 + 2 * 512,
        "folded": {}, "fused": {}}
    assert summary["macs"] == 1_022_333_952


def test_vgg19_matches_its_model_card():
    summary = model_summary(vgg19_chain())
    # torchvision's vgg19 card: 143,667,240 parameters, 19.63 GFLOPS (multiply-adds)
    assert (summary["parameters"], round(summary["macs"] / 1e7)) == (143_667_240, 1963)
    assert summary["layers_by_type"] == {"conv": 16, "fc": 3, "pool": 5}


HAND_BUILT = {
    "name": "imported", "folded": {"Constant": 3, "Identity": 1},
    "layers": [
        {"name": "conv1", "type": "conv", "in_ch": 3, "out_ch": 8, "kernel": 3,
         "out_rows": 8, "out_cols": 8, "padding": 1,
         "fused": ["BatchNormalization", "Relu"]},
        {"name": "conv2", "type": "conv", "deps": ["conv1"], "in_ch": 8, "out_ch": 8,
         "kernel": 3, "out_rows": 8, "out_cols": 8, "padding": 1,
         "fused": ["BatchNormalization", "Relu"]},
        {"name": "sig", "type": "elementwise", "op": "Sigmoid", "deps": ["conv2"],
         "shape": [512]},
        {"name": "fc", "type": "fc", "deps": ["sig"], "in_features": 512,
         "out_features": 10, "fused": ["Softmax"]},
    ]}


def test_plan_names_what_was_folded_and_fused(tmp_path):
    path = tmp_path / "imported.yaml"
    path.write_text(yaml.safe_dump(HAND_BUILT))
    out = archi("plan", str(path), "--cluster", "hacc", "--strategy", "h2h", "--json")
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)["model_summary"]
    assert summary == {
        "layers": 4, "layers_by_type": {"conv": 2, "elementwise": 1, "fc": 1},
        "parameters": (8 * 3 * 9 + 8) + (8 * 8 * 9 + 8) + (512 * 10 + 10),
        "macs": 8 * 3 * 9 * 64 + 8 * 8 * 9 * 64 + 512 * 10,
        "folded": {"Constant": 3, "Identity": 1},
        "fused": {"BatchNormalization": 2, "Relu": 2, "Softmax": 1}}
    table = archi("plan", str(path), "--cluster", "hacc", "--strategy", "chef")
    assert table.returncode == 0, table.stderr
    text = " ".join(table.stdout.split())  # rich wraps long lines at the terminal's width
    for line in summary_lines(summary):
        assert line in text
    assert ("folded: Constant 3, Identity 1; fused: BatchNormalization 2, Relu 2, "
            "Softmax 1") in text
    assert "model: 4 layers (conv 2, elementwise 1, fc 1), 0.01 M parameters, 0.000 GMAC" \
        in text
