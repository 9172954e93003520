"""CHEF and H2H splits as hls4ml projects (issue 37): each FPGA's project compiled by
hls4ml's C simulation (g++) and the projects chained as the FPGAs stream. Checked against
two independent references: torch's float network (the module itself for the CIFAR-10
tutorial net), within the fixed-point error bound of ap_fixed<16,6> (csim.py), and the
same network in ap_fixed<16,6> arithmetic emulated by torch in float64, bit for bit."""

import json

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

torch = pytest.importorskip("torch")
pytest.importorskip("hls4ml")
pytestmark = pytest.mark.filterwarnings("ignore")

from archipelago.cli import app  # noqa: E402
from archipelago.errors import ArchipelagoError, ConfigError  # noqa: E402
from archipelago.families import resolve  # noqa: E402
from archipelago.models.dag import dag_from_dict  # noqa: E402
from archipelago.models.torch_import import dag_from_module  # noqa: E402
from archipelago.strategies.chef.emit import Built, project_specs, seeded_weights  # noqa: E402
from archipelago.strategies.chef.emit.csim import (  # noqa: E402
    error_bounds,
    fixed_point,
    overflow,
    simulate,
)
from archipelago.strategies.chef.emit.manifest import plan_record, read_manifest  # noqa: E402
from archipelago.strategies.chef.emit.project import StageSpec  # noqa: E402
from archipelago.strategies.chef.emit.stages import stages  # noqa: E402
from archipelago.strategies.chef.emulate.dag_torch import model_inputs, run_dag  # noqa: E402
from archipelago.strategies.chef.hls_precision import DEFAULT_PRECISION as PRECISION  # noqa: E402
from archipelago.strategies.registry import get_strategy  # noqa: E402
from tests.test_torch_import import module_weights  # noqa: E402
from tests.test_torch_networks import Net  # noqa: E402

LSB = 2.0 ** -10  # ap_fixed<16,6>: 10 fraction bits

CONV = {"type": "conv", "in_ch": 8, "out_ch": 8, "kernel": 3, "padding": 1, "out_rows": 8,
        "out_cols": 8}
RESIDUAL = {"name": "residual", "inputs": {"c1": [4, 8, 8]}, "layers": [
    {**CONV, "name": "c1", "in_ch": 4},
    {**CONV, "name": "c2", "deps": ["c1"]},
    {**CONV, "name": "c3", "relu": False, "deps": ["c2"]},
    {"name": "add", "type": "add", "shape": [8, 8, 8], "deps": ["c1", "c3"]},
    {"name": "pool", "type": "pool", "channels": 8, "kernel": 2, "stride": 2, "padding": 1,
     "out_rows": 5, "out_cols": 5, "deps": ["add"]},  # padded, after the add's ReLU
    {"name": "fc", "type": "fc", "in_features": 200, "out_features": 10, "deps": ["pool"]}]}
TWO_MODALITIES = {"name": "two-modality", "inputs": {"ca": [3, 8, 8], "fb": [16]}, "layers": [
    {**CONV, "name": "ca", "modality": "image", "in_ch": 3, "out_ch": 4},
    {"name": "pa", "modality": "image", "type": "pool", "channels": 4, "kernel": 2,
     "stride": 2, "out_rows": 4, "out_cols": 4, "deps": ["ca"]},
    {"name": "fb", "modality": "signal", "type": "fc", "in_features": 16,
     "out_features": 32, "relu": True},
    {"name": "join", "type": "fc", "in_features": 96, "out_features": 10,
     "deps": ["pa", "fb"]}]}


def _plan(dag, cluster: str, strategy: str):
    chosen = get_strategy(strategy)
    return chosen.plan(dag, resolve("cluster", cluster), None, chosen.workload({}, "build"))


def _check(dag, built, weights, inputs, reference, work) -> dict[str, float]:
    """Run the chained C simulations; every value a project writes must equal the
    fixed-point emulation bit for bit, and the float reference within the error bound."""
    got = simulate(dag, built, weights, inputs, work)
    exact = fixed_point(dag, weights, inputs, PRECISION)
    values, bounds = error_bounds(dag, weights, inputs, PRECISION)
    assert not overflow(values, PRECISION)
    worst = {}
    for value, out in got.items():
        np.testing.assert_array_equal(out, exact[value].numpy(), err_msg=value)
        error = np.abs(out - reference[value])
        assert (error <= bounds[value].numpy() + 1e-6).all(), value
        worst[value] = float(error.max())
    assert worst  # some project wrote a value
    return worst


def test_cifar_tutorial_net_on_two_fpgas_reproduces_the_torch_module(tmp_path) -> None:
    net = Net().eval()
    image = torch.randn(1, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    dag, params = dag_from_module(net, (image,))
    plan = _plan(dag, "hacc", "chef")
    built = project_specs(plan)
    assert [(s.fpga, s.layers) for s in built.stages] == [
        (0, ("conv1", "pool", "conv2", "pool_1")), (1, ("fc1", "fc2", "fc3"))]
    # the stream between the boards is pool_1's 16 x 5 x 5 map, flattened on the U250
    assert built.stages[1].inputs == ("pool_1",)
    with torch.no_grad():
        reference = {"fc3": net(image)[0].double().numpy()}
    weights = module_weights(net, params)
    ref_all = run_dag(dag, {"conv1": image[0]}, weights)  # the unsplit DAG = the module
    reference["pool_1"] = ref_all["pool_1"].double().numpy()
    worst = _check(dag, built, weights, {"conv1": image[0]}, reference, tmp_path)
    assert worst["fc3"] < 0.1  # the figure the note reports


def test_residual_block_visiting_an_fpga_twice(tmp_path) -> None:
    """c1, c2 on FPGA 0; c3 and the residual add on FPGA 1, which reads c1 from FPGA 0
    (c1 also feeds c2 there: an output hls4ml would not take as one unasked); fc back on
    FPGA 0 as a second project."""
    dag = dag_from_dict(RESIDUAL, "test")
    placement = {"c1": 0, "c2": 0, "c3": 1, "add": 1, "pool": 1, "fc": 0}
    cut = stages(dag, placement)
    assert [(s.fpga, s.visit, s.inputs, s.outputs) for s in cut] == [
        (0, 0, ("input:c1",), ("c1", "c2")), (1, 1, ("c2", "c1"), ("pool",)),
        (0, 2, ("pool",), ("fc",))]
    specs = [StageSpec(s, f"p{i}", "xcu280-fsvh2892-2L-e", PRECISION, dict.fromkeys(
        s.layers, 128)) for i, s in enumerate(cut)]
    built = Built(cut, ["a", "b", "c"], specs)
    weights, inputs = seeded_weights(dag), model_inputs(dag, 0)
    reference = {k: v.double().numpy() for k, v in run_dag(dag, inputs, weights).items()}
    _check(dag, built, weights, inputs, reference, tmp_path)


def test_two_modalities_joined_across_fpgas(tmp_path) -> None:
    dag = dag_from_dict(TWO_MODALITIES, "test")
    plan = _plan(dag, "hacc", "h2h")
    built = project_specs(plan)
    assert {s.layers for s in built.stages} == {("ca", "pa"), ("fb", "join")}
    weights, inputs = seeded_weights(dag), model_inputs(dag, 0)
    reference = {k: v.double().numpy() for k, v in run_dag(dag, inputs, weights).items()}
    _check(dag, built, weights, inputs, reference, tmp_path)


@pytest.mark.parametrize("strategy", ["chef", "h2h"])
def test_build_writes_projects_and_a_manifest_of_the_plan(tmp_path, strategy,
                                                          monkeypatch) -> None:
    here = tmp_path / "cwd"
    here.mkdir()
    monkeypatch.chdir(here)  # nothing may land outside --out, the working directory either
    model = tmp_path / "residual.yaml"
    model.write_text(yaml.safe_dump(RESIDUAL))
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["build", str(model), "--cluster", "hacc",
                                      "--strategy", strategy, "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    manifest = read_manifest(out / "manifest.json")
    plan = _plan(dag_from_dict(RESIDUAL, "test"), "hacc", strategy)
    assert manifest.plan_record() == json.loads(json.dumps(plan_record(plan)))
    folders = {p.folder for p in manifest.projects}
    assert folders == {p["folder"] for p in summary["projects"]}
    for project in manifest.projects:
        top = out / project.folder
        assert (top / "firmware" / f"{project.top}.cpp").is_file()
        config = (top / "hls4ml_config.yml").read_text()
        part = next(f.part for f in manifest.fpgas if f.fpga == project.fpga)
        assert f"Part: {part}" in config and "IOType: io_stream" in config
        for layer, entry in project.reuse.items():  # the IP's multipliers bound the layer's
            layer_ = plan.dag.by_name[layer]
            n_in = (layer_.in_ch * 9 if layer_.type == "conv" else layer_.in_features)
            n_out = layer_.out_ch if layer_.type == "conv" else layer_.out_features
            assert n_in * n_out / entry["reuse_factor"] <= entry["multipliers"]
            assert f"ReuseFactor: {entry['reuse_factor']}" in config
    placed = {m["fpga"] for m in plan_record(plan)["mapping"]}
    assert {f.fpga for f in manifest.fpgas if not f.idle} == placed
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) \
        == sorted(summary["files"])
    assert not any(here.iterdir())


def test_planning_a_dag_imports_neither_torch_nor_hls4ml() -> None:
    """The engine config validates --hls-precision (chef/emit/config.py) without either."""
    import subprocess
    import sys

    code = ("import sys; from archipelago.api import make_plan; "
            "make_plan('facebag', 'hacc', 'chef', {'hls_precision': 'ap_fixed<18,8>'}); "
            "assert not {'torch', 'hls4ml'} & set(sys.modules), 'imported'")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr


def test_manifest_read_back_refuses_a_changed_field(tmp_path) -> None:
    model = tmp_path / "two.yaml"
    model.write_text(yaml.safe_dump(TWO_MODALITIES))
    out = tmp_path / "out"
    assert CliRunner().invoke(app, ["build", str(model), "--cluster", "hacc", "--strategy",
                                    "h2h", "--out", str(out)]).exit_code == 0
    data = json.loads((out / "manifest.json").read_text())
    links = data["links"]  # pa's 4 x 4 x 4 map, 16-bit elements, u250 -> u280
    assert links == [{"source": "u250", "target": "u280", "values": ["pa"], "bytes": 128}]
    data["mapping"][0]["fpga"] = "elsewhere"
    (out / "manifest.json").write_text(json.dumps(data))
    plan = _plan(dag_from_dict(TWO_MODALITIES, "test"), "hacc", "h2h")
    assert read_manifest(out / "manifest.json").plan_record() != plan_record(plan)
    data["projects"][0]["surprise"] = 1
    (out / "manifest.json").write_text(json.dumps(data))
    with pytest.raises(ConfigError, match=r"projects\.0\.surprise"):
        read_manifest(out / "manifest.json")


def test_the_precision_option_reaches_every_project_and_bad_ones_are_refused(tmp_path
                                                                            ) -> None:
    model = tmp_path / "two.yaml"
    model.write_text(yaml.safe_dump(TWO_MODALITIES))
    base = ["build", str(model), "--cluster", "hacc", "--strategy", "chef", "--out"]
    wide = CliRunner().invoke(app, [*base, str(tmp_path / "a"), "--hls-precision",
                                    "ap_fixed<24,8>"])
    assert wide.exit_code == 0, wide.output
    manifest = read_manifest(tmp_path / "a" / "manifest.json")
    assert (manifest.precision, manifest.accumulator) == ("ap_fixed<24,8>", "ap_fixed<48,16>")
    for project in manifest.projects:
        config = (tmp_path / "a" / project.folder / "hls4ml_config.yml").read_text()
        assert "ap_fixed<16,6>" not in config and "weight: ap_fixed<24,8>" in config
    for bad in ("ap_fixed<16,16>", "float"):
        refused = CliRunner().invoke(app, [*base, str(tmp_path / "b"), "--hls-precision", bad])
        assert refused.exit_code == 2 and "hls_precision" in refused.output, refused.output
        assert "Traceback" not in refused.output and not (tmp_path / "b").exists()
    planned = CliRunner().invoke(app, ["plan", str(model), "--cluster", "hacc",
                                       "--hls-precision", "ap_fixed<24,8>"])
    assert planned.exit_code == 2


def test_a_layer_hls4ml_lacks_is_refused_in_one_line(tmp_path) -> None:
    model = tmp_path / "seq.yaml"
    model.write_text(yaml.safe_dump({"name": "seq", "layers": [
        {"name": "rnn", "type": "lstm", "embed": 8, "hidden": 8, "cells": 4},
        {"name": "head", "type": "fc", "in_features": 32, "out_features": 2,
         "deps": ["rnn"]}]}))
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["build", str(model), "--cluster", "hacc",
                                      "--strategy", "chef", "--out", str(out)])
    assert result.exit_code == 2
    assert result.output.count("\n") <= 2 and "Traceback" not in result.output
    assert "layer 'rnn'" in result.output and "operator lstm" in result.output
    assert not out.exists()


def test_a_board_without_a_part_number_is_refused() -> None:
    plan = _plan(dag_from_dict(TWO_MODALITIES, "test"), "hacc", "h2h")
    bare = plan.cluster.nodes[0].device.model_copy(update={"part": None})
    nodes = (plan.cluster.nodes[0].model_copy(update={"device": bare}),
             *plan.cluster.nodes[1:])
    from dataclasses import replace

    stripped = replace(plan, cluster=plan.cluster.model_copy(update={"nodes": nodes}))
    with pytest.raises(ArchipelagoError, match="no part number"):
        project_specs(stripped)
