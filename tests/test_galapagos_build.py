"""`archi build` files: parsed back the way the Galapagos middleware parses them, they give
the plan's graph again; the writer stays inside --out and never overwrites by accident."""

import json
from pathlib import Path

import pytest

from archipelago.api import build, make_plan
from archipelago.errors import ArchipelagoError
from archipelago.strategies.galapagos.emit import write_build
from archipelago.strategies.galapagos.gmi import HOST
from tests.cli_here import archi_here
from tests.galapagos_readback import read_build
from tests.test_galapagos_emulate import tiny_ibert_config


@pytest.fixture(scope="module")
def paper_build(tmp_path_factory):
    plan = make_plan("ibert-base", "72xsidewinder", "galapagos")
    out = tmp_path_factory.mktemp("build")
    return plan, out, write_build(plan, out)


def test_files_parse_back_to_the_same_graph(paper_build) -> None:
    plan, out, _ = paper_build
    graph = read_build(out)
    kernels = {n: node for n, node in plan.nodes.items() if n != HOST}
    assert graph.ids == {n: (node.cluster, node.kernel_id) for n, node in kernels.items()}
    assert graph.placement == {n: plan.fpgas[node.fpga].ip for n, node in kernels.items()}
    assert graph.streams == {(s.src, s.dst, s.row_bytes) for s in plan.streams}


def test_xml_has_the_fields_the_middleware_reads(paper_build) -> None:
    import xmltodict

    _, out, _ = paper_build
    graph = read_build(out)
    for entry in graph.logical.values():
        assert {"num", "rep", "clk", "aresetn", "s_axis", "m_axis"} <= set(entry)
        assert entry["s_axis"] == {"scope": "global", "name": "in_r"}
    nodes = xmltodict.parse((out / "cluster_004" / "map.xml").read_text())["cluster"]["node"]
    assert len(nodes) == 6
    for node in nodes:
        assert {"type", "board", "comm", "kernel", "mac", "ip"} <= set(node)
        assert (node["type"], node["board"], node["comm"]) == ("hw", "sidewinder", "udp")


def test_cluster_and_layer_descriptions(paper_build) -> None:
    _, out, summary = paper_build
    clusters = json.loads((out / "cluster_description.json").read_text())["clusters"]
    assert [c["encoders"] for c in clusters] == [[i] for i in range(12)]
    assert all(c["kernels"] == 39 and c["gateway"]["kernel"] == 0 for c in clusters)
    layers = json.loads((out / "layer_description.json").read_text())
    q = next(k for k in layers["kernels"] if k["name"] == "L0.q")
    assert q["parallelism"]["tiles"] * q["parallelism"]["pes"] == 768
    assert q["destinations"] == [[0, 33]]
    assert layers["stream_fields"][:3] == ["src", "dst", "bytes_per_row"]
    assert ["L0.q", "L0.q.heads.scatter", 768, False, False, False] in layers["streams"]
    routing = json.loads((out / "routing" / "cluster_000.json").read_text())
    assert routing["entries"] == 39 + 11 and routing["bytes"] == 4 * 50
    assert summary["fpgas_needed"] == 72 and len(summary["files"]) == 2 + 3 * 12 + 1


def test_single_fpga_clusters_still_parse(tmp_path: Path) -> None:
    """One node per map file: xmltodict gives a dict, not a list, as in the middleware."""
    config = tmp_path / "config.json"
    config.write_text(json.dumps(tiny_ibert_config()))
    plan = make_plan(str(config), "2xsidewinder", "galapagos")
    assert all(len(c.fpgas) == 1 for c in plan.clusters)
    write_build(plan, tmp_path / "out")
    graph = read_build(tmp_path / "out")
    assert set(graph.placement) == {n for n in plan.nodes if n != HOST}


def test_refuses_a_non_empty_directory_unless_forced(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("user data")
    with pytest.raises(ArchipelagoError, match="is not empty; pass --force"):
        build("ibert-base", "72xsidewinder", "galapagos", str(tmp_path))
    build("ibert-base", "72xsidewinder", "galapagos", str(tmp_path), force=True)
    assert (tmp_path / "keep.txt").read_text() == "user data"
    assert (tmp_path / "cluster_011" / "logical.xml").exists()


def test_never_writes_outside_the_directory(tmp_path: Path) -> None:
    """A symlink planted in --out cannot redirect a forced build elsewhere."""
    outside = tmp_path / "outside"
    outside.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    (out / "routing").symlink_to(outside, target_is_directory=True)
    with pytest.raises(ArchipelagoError, match="outside"):
        build("ibert-base", "72xsidewinder", "galapagos", str(out), force=True)
    assert list(outside.iterdir()) == []


def test_cli_build_and_its_one_line_errors(tmp_path: Path) -> None:
    run = ["build", "ibert-base", "--cluster", "72xsidewinder", "--strategy", "galapagos",
           "--out", str(tmp_path), "--json"]
    done = archi_here(*run)  # in this process: no interpreter start-up per run
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["clusters"] == 12
    again = archi_here(*run)
    assert again.returncode == 2 and "Traceback" not in again.stderr
    assert again.stderr.strip().splitlines() == [
        f"error: --out {tmp_path.resolve()} is not empty; pass --force to overwrite the files "
        "of a previous build"]
    gpu = archi_here("build", "gpt2-345m", "--cluster", "1xa100", "--strategy", "gpu-eager",
                     "--out", str(tmp_path / "x"))
    assert gpu.returncode == 2 and "has no build files" in gpu.stderr
    assert "lora-f" in gpu.stderr.split("strategies with build files:")[1]


def test_no_build_for_fewer_fpgas_than_the_plan_needs(tmp_path: Path) -> None:
    """Files for 48 FPGAs on a 36-FPGA cluster would describe hardware that is not there."""
    out = tmp_path / "out"
    with pytest.raises(ArchipelagoError, match="needs 48 sidewinder FPGAs; the cluster has 36"):
        build("ibert-base", "36xsidewinder", "galapagos", str(out))
    assert not out.exists() or not any(out.iterdir())
