"""CHEF and H2H plans as hls4ml projects (issue 37): `archi build --strategy chef|h2h`.

    stages    the plan cut into one sub-network per FPGA (per visit), and its streams
    torch_net each sub-network as a torch.fx module hls4ml's PyTorch front end converts
    config     hls4ml's configuration: precision, reuse factor from the IP, part, io_stream
    project   the conversion and the written project
    manifest  manifest.json: IPs per FPGA, layer mapping, schedule, DRAM budget, links
    csim      the projects compiled with hls4ml's C simulation and chained, for the tests

torch and hls4ml are imported only here, never by `import archipelago`.

This module is the writers hook: one hls4ml project per FPGA (per visit, stages.py) of a
scheduled DAG, and `manifest.json` (manifest.py), all inside `--out`.

The projects are converted from torch modules built from the DAG's layers (torch_net.py),
whichever front end the model came through (zoo, layer-DAG YAML, torch module, .pt2 or
ONNX file): a plan holds the layer DAG, not the file, and the weights are the seeded ones
the emulator uses (chef/emulate/dag_torch.py, seed `SEED`), so `archi emulate` and the
projects compute the same network. Backend Vitis, io_stream, ap_fixed<16,6> unless
`--hls-precision` says otherwise (config.py); Vitis HLS itself is not run.
"""

from dataclasses import dataclass
from importlib.metadata import version
from importlib.util import find_spec
from typing import Any

from archipelago.emit.output_dir import OutputDir
from archipelago.errors import ArchipelagoError
from archipelago.strategies.chef.emit.config import BACKEND, IO_TYPE, accumulator
from archipelago.strategies.chef.emit.manifest import manifest
from archipelago.strategies.chef.emit.stages import Stage, stages

SEED = 0  # the weights' seed, as `archi emulate`'s default


@dataclass(frozen=True)
class Built:
    """The projects of a plan: each stage, its folder and top function, and the
    converter's specification (project.StageSpec)."""

    stages: list[Stage]
    folders: list[str]
    specs: list[Any]


def part_of(plan, fpga: int) -> str:
    node = plan.cluster.nodes[fpga]
    if node.device.part is None:
        raise ArchipelagoError(f"FPGA '{node.name}' ({node.device.key}) has no part number "
                               "in the hardware catalog; hls4ml needs one to write its "
                               "project (add `part:` to the device)")
    return node.device.part


def project_specs(plan, precision: str | None = None) -> Built:
    """The stages of `plan` and what each project is made from (in `precision`, else the
    plan's `hls_precision`); refuses a layer hls4ml cannot take, and a board without a
    part number, before anything is written."""
    missing = [m for m in ("torch", "hls4ml") if find_spec(m) is None]
    if missing:
        raise ArchipelagoError(f"building hls4ml projects needs {' and '.join(missing)}: "
                               "pip install 'archipelago[emulate,hls]'")
    from archipelago.strategies.chef.emit.project import StageSpec

    precision = precision or plan.hls_precision
    accumulator(precision)  # refuses a malformed precision
    from archipelago.strategies.chef.emit.torch_net import check_buildable  # imports torch

    check_buildable(plan.dag)
    cut = stages(plan.dag, plan.placement())
    acc_of = dict(zip(plan.tables.names, plan.schedule.mapping, strict=True))
    visits: dict[int, int] = {}
    for stage in cut:
        visits[stage.fpga] = visits.get(stage.fpga, 0) + 1
    folders, specs = [], []
    for stage in cut:
        node = plan.cluster.nodes[stage.fpga].name
        folder = node if visits[stage.fpga] == 1 else f"{node}-visit{stage.visit}"
        multipliers = {n: plan.deployment.accs[acc_of[n]].ip.macs_per_cycle
                       for n in stage.layers}
        folders.append(folder)
        specs.append(StageSpec(stage, f"fpga{stage.fpga}_v{stage.visit}",
                               part_of(plan, stage.fpga), precision, multipliers))
    return Built(cut, folders, specs)


def seeded_weights(dag, seed: int = SEED) -> dict[str, list[Any]]:
    from archipelago.strategies.chef.emulate.dag_torch import layer_weights

    return {name: layer_weights(dag, name, seed) for name in dag.order}


def write_build(plan, out: str, force: bool = False) -> dict[str, Any]:
    """The plan kind's writers hook: every project, then the manifest."""
    from archipelago.strategies.chef.emit.project import write_project

    built = project_specs(plan)
    weights = seeded_weights(plan.dag)
    reuse: list[dict[str, int]] = []
    with OutputDir(out, force) as target:
        for folder, spec in zip(built.folders, built.specs, strict=True):
            final = target.path(folder)

            def fill(staged, spec=spec, final=final) -> None:
                reuse.append(write_project(plan.dag, spec, weights, staged, final).reuse)

            target.write_tree(folder, fill)
        record = manifest(plan, built, reuse, {"hls4ml": version("hls4ml"), "backend":
                                               BACKEND, "io_type": IO_TYPE,
                                               "seed": SEED})
        target.write_json("manifest.json", record)
    projects = [{"folder": f, "fpga": plan.cluster.nodes[s.fpga].name, "layers": len(s.layers)}
                for f, s in zip(built.folders, built.stages, strict=True)]
    return {"model": plan.dag.name, "cluster": plan.cluster.name, "strategy": plan.strategy,
            "out": str(target.root), "projects": projects,
            "idle": [f["fpga"] for f in record["fpgas"] if f["idle"]],
            "part": {f["fpga"]: f["part"] for f in record["fpgas"]},
            "files": target.written}
