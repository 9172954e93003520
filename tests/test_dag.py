"""Layer DAGs: validation of user files and the five built-in models of seeds/004 Table III."""

import pytest
import yaml

from archipelago.errors import ConfigError
from archipelago.models.dag import dag_from_dict, load_dag
from archipelago.models.dag_zoo import BUILTIN_DAGS, builtin_dag, casua_surf


def _conv(name, deps=(), in_ch=3, out_ch=4, size=8):
    return {"name": name, "type": "conv", "deps": list(deps), "in_ch": in_ch,
            "out_ch": out_ch, "out_rows": size, "out_cols": size, "kernel": 3, "padding": 1}


def test_builtin_layer_counts_match_table_iii():
    counts = {name: builtin_dag(name).compute_layers for name in BUILTIN_DAGS}
    assert counts == {"vlocnet": 141, "casua-surf": 44, "vfs": 48, "facebag": 51,
                      "cnn-lstm": 20}
    types = {name: sorted({la.type for la in builtin_dag(name).layers if la.is_compute})
             for name in BUILTIN_DAGS}
    assert types["casua-surf"] == ["conv"] and types["cnn-lstm"] == ["conv", "lstm"]
    assert types["vfs"] == ["conv", "fc"]


def test_cross_modality_dependencies_exist():
    dag = builtin_dag("vlocnet")
    fuse = dag.by_name["glob_fuse"]
    assert {dag.by_name[d].modality for d in fuse.deps} == {"glob", "odo"}


def _stream_macs(dag, modality: str) -> int:
    return sum(la.macs for la in dag.layers if la.modality == modality and la.is_compute)


def test_casua_surf_stream_counted_by_hand():
    """[27]'s 112 x 112 face crop through ResNet-18 res1-res3 (He et al. Table 1) + SE gate."""
    conv1 = 64 * 3 * 7 * 7 * 56 * 56  # 7x7/2 -> 56 x 56; the 3x3/2 max pool -> 28 x 28
    res2 = 4 * 64 * 64 * 9 * 28 * 28
    res3 = (128 * 64 * 9 + 128 * 64 + 3 * 128 * 128 * 9) * 14 * 14  # /2 conv, 1x1 shortcut
    se = 128 * 128 * 14 * 14
    dag = builtin_dag("casua-surf")
    assert dag.inputs["rgb_conv1"] == (3, 112, 112)
    assert _stream_macs(dag, "rgb") == conv1 + res2 + res3 + se == 251_080_704
    assert dag.by_name["fused_res5_1b"].out_shape == (512, 4, 4)
    # every map of a stream doubles per side at a 224 crop
    assert _stream_macs(casua_surf(224), "depth") == 4 * 251_080_704


def test_facebag_patch_stream_counted_by_hand():
    """One 48 x 48 patch per modality ([28]'s authors' code), full resolution to res2."""
    conv1 = 64 * 3 * 9 * 48 * 48
    res2 = 6 * 64 * 64 * 9 * 48 * 48
    res3 = (128 * 64 * 9 + 128 * 64 + 3 * 128 * 128 * 9) * 24 * 24
    aux = 128 * 2
    dag = builtin_dag("facebag")
    assert dag.inputs["ir_conv1"] == (3, 48, 48)
    assert _stream_macs(dag, "ir") == conv1 + res2 + res3 + aux == 815_579_392


def test_face_models_share_one_fused_tail():
    """res4 (384 -> 256) and res5 (256 -> 512) of two basic blocks each, biases included:
    the weights CASUA-SURF streams from DRAM whatever its crop (dag_zoo.casua_surf)."""
    res4 = 256 * 384 * 9 + 3 * 256 * 256 * 9 + 256 * 384 + 5 * 256
    res5 = 512 * 256 * 9 + 3 * 512 * 512 * 9 + 512 * 256 + 5 * 512
    for name in ("casua-surf", "facebag"):
        layers = builtin_dag(name).layers
        tail = sum(la.weight_elements for la in layers
                   if la.name.startswith(("fused_res4", "fused_res5")))
        assert tail == res4 + res5 == 11_144_960
    total = sum(la.weight_elements for la in builtin_dag("casua-surf").layers)
    assert 13_150_000 < total < 13_250_000  # "11.1 M of the 13.2 M weights"


def test_conv_counts_by_hand():
    dag = dag_from_dict({"name": "t", "layers": [_conv("a"), _conv("b", ["a"], 4, 6)]}, "t")
    b = dag.by_name["b"]
    assert b.macs == 6 * 4 * 9 * 8 * 8 and b.weight_elements == 6 * 4 * 9 + 6
    assert dag.in_elements(b) == 4 * 8 * 8 and dag.levels == (("a",), ("b",))


def test_cycle_is_one_line_error():
    layers = [_conv("a", ["b"], 4), _conv("b", ["a"], 4)]
    with pytest.raises(ConfigError, match="cycle through a, b") as err:
        dag_from_dict({"name": "t", "layers": layers}, "m.yaml")
    assert "\n" not in str(err.value) and str(err.value).startswith("m.yaml")


def test_dangling_dependency_names_layer():
    with pytest.raises(ConfigError, match=r"layers.b.deps.*'zz'"):
        dag_from_dict({"name": "t", "layers": [_conv("a"), _conv("b", ["zz"], 4)]}, "m.yaml")


def test_shape_mismatch_names_numbers():
    with pytest.raises(ConfigError, match="expects 5 input channels, its input gives 4"):
        dag_from_dict({"name": "t", "layers": [_conv("a"), _conv("b", ["a"], 5)]}, "m.yaml")


def test_unknown_layer_type_rejected():
    with pytest.raises(ConfigError, match=r"layers\.0"):
        dag_from_dict({"name": "t", "layers": [{"name": "a", "type": "gru"}]}, "m.yaml")


def test_yaml_round_trip(tmp_path):
    dag = builtin_dag("cnn-lstm")
    path = tmp_path / "cnn.yaml"
    path.write_text(yaml.safe_dump(dag.model_dump(mode="json")))
    assert load_dag(path) == dag


@pytest.mark.parametrize(("data", "message"), [
    ({"layers": [{"name": "p", "type": "pool", "channels": 1, "out_rows": 1, "out_cols": 1,
                  "kernel": 1}]}, "no conv, fc, lstm, matmul layer: nothing for an accelerator"),
    ({"layers": [{"name": "a", "type": "conv", "out_ch": 1, "in_ch": 1, "out_rows": 1,
                  "out_cols": 1, "kernel": 3, "padding": 100}]},
     "padding 100 around a 3-wide kernel leaves an input of -197x-197 for a 1x1 output"),
    ({"layers": [_conv("a")], "inputs": {"zz": [3, 8, 8]}},
     r"inputs\.zz': names no layer without dependencies \(those: a\)"),
    ({"layers": [_conv("a")], "inputs": {"a": []}}, "an input shape needs a dimension"),
    ({"layers": [_conv("a")], "inputs": {"a": [3]}}, "takes a feature map, its input gives"),
])
def test_nonsense_a_dag_file_may_hold_is_one_line(data: dict, message: str) -> None:
    """Each plans today with exit 0 or a traceback (a DAG without a compute layer)."""
    with pytest.raises(ConfigError, match=message) as err:
        dag_from_dict({"name": "t", **data}, "m.yaml")
    assert "\n" not in str(err.value)


def test_token_wise_fc_and_reshaped_operands() -> None:
    """An FC on each of `rows` tokens costs rows x in x out; a residual add, an
    element-wise product and a matrix product check element counts, since importers pass
    reshapes through ((C, H, W) maps viewed as (H*W, C) tokens)."""
    dag = dag_from_dict({"name": "t", "layers": [
        _conv("patch", out_ch=8, size=2),  # (8, 2, 2): 4 tokens of 8
        {"name": "q", "type": "fc", "deps": ["patch"], "rows": 4, "in_features": 8,
         "out_features": 8},
        {"name": "k", "type": "fc", "deps": ["patch"], "rows": 4, "in_features": 8,
         "out_features": 8},
        {"name": "scores", "type": "matmul", "deps": ["q", "k"], "batch": 2, "rows": 4,
         "inner": 4, "cols": 4},
        {"name": "gate", "type": "fc", "deps": ["scores"], "in_features": 32,
         "out_features": 8},
        {"name": "scaled", "type": "elementwise", "op": "mul", "deps": ["q", "gate"],
         "shape": [4, 8]},
        {"name": "res", "type": "add", "deps": ["patch", "scaled"], "shape": [4, 8]}]}, "t")
    assert dag.by_name["q"].macs == 4 * 8 * 8 and dag.by_name["q"].out_shape == (4, 8)
    assert dag.by_name["scores"].macs == 2 * 4 * 4 * 4
    bad = {"name": "scores", "type": "matmul", "deps": ["q", "k"], "batch": 2, "rows": 4,
           "inner": 8, "cols": 4}
    with pytest.raises(ConfigError, match=r"multiplies 2 x \(4x8 @ 8x4\) = 128 operand "
                       "elements, its inputs give 64"):
        dag_from_dict({"name": "t", "layers": [*dag.model_dump()["layers"][:3], bad]}, "t")
    wrong = {"name": "e", "type": "elementwise", "op": "mul", "deps": ["q", "k"],
             "shape": [4, 4]}
    with pytest.raises(ConfigError, match="neither join nor broadcast"):
        dag_from_dict({"name": "t", "layers": [*dag.model_dump()["layers"][:3], wrong]}, "t")
