"""Layer DAGs: validation of user files and the five built-in models of seeds/004 Table III."""

import pytest
import yaml

from archipelago.errors import ConfigError
from archipelago.models.dag import dag_from_dict, load_dag
from archipelago.models.dag_zoo import BUILTIN_DAGS, builtin_dag


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
                  "kernel": 1}]}, "no conv, fc, lstm layer: nothing for an accelerator"),
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
