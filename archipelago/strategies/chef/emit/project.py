"""One `Stage` of a plan as an hls4ml project: its torch module converted by hls4ml's
PyTorch front end (hls4ml 1.3, backend Vitis, io_stream), with the stage's outputs as the
project's outputs.

hls4ml takes as outputs the layers no other layer reads; a stage also streams out values
its own later layers read (a residual's first conv, read by the next FPGA's add), so the
outputs are given to hls4ml's graph builder by name: the torch.fx nodes the module returns.
"""

import io
from contextlib import redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from archipelago.models.dag import ModelDAG
from archipelago.strategies.chef.emit.config import BACKEND, IO_TYPE, hls_config
from archipelago.strategies.chef.emit.stages import Stage, value_shape
from archipelago.strategies.chef.emit.torch_net import module_names, stage_module


@dataclass(frozen=True)
class StageSpec:
    """What a project is made from: the stage, its weights, precision, part, and the
    multipliers of the IP each of its layers runs on."""

    stage: Stage
    name: str
    part: str
    precision: str
    multipliers: dict[str, int]


@dataclass(frozen=True)
class Converted:
    graph: Any  # hls4ml.model.graph.ModelGraph
    reuse: dict[str, int]  # layer -> its reuse factor
    net: torch.fx.GraphModule


def output_nodes(net: torch.fx.GraphModule) -> list[str]:
    """The torch.fx node names `net` returns, which hls4ml names its layers by."""
    returned = next(n for n in net.graph.nodes if n.op == "output").args[0]
    return [node.name for node in returned]


def convert(dag: ModelDAG, spec: StageSpec, weights: dict[str, list[torch.Tensor]],
            folder: Path) -> Converted:
    """The stage as an hls4ml model whose project is written to `folder`."""
    from hls4ml.converters.pytorch_to_hls import parse_pytorch_model
    from hls4ml.model.graph import ModelGraph
    from hls4ml.utils.config import create_config

    net = stage_module(dag, spec.stage, weights)
    shapes = [value_shape(dag, v) for v in spec.stage.inputs]
    idents = module_names(spec.stage.layers)
    by_module = {idents[layer]: m for layer, m in spec.multipliers.items()}
    layer_config, reuse = hls_config(net, shapes, spec.precision, by_module)
    config = create_config(output_dir=str(folder), project_name=spec.name, backend=BACKEND,
                           part=spec.part, io_type=IO_TYPE)
    config.update(PytorchModel=net, InputData=None, OutputPredictions=None,
                  InputShape=layer_config["InputShape"],
                  HLSConfig={"Model": layer_config["Model"],
                             "LayerName": layer_config["LayerName"]})
    with redirect_stdout(io.StringIO()):  # hls4ml prints its topology: not `--json`'s
        layers, inputs, _ = parse_pytorch_model(config)
        graph = ModelGraph.from_layer_list(config, layers, inputs, output_nodes(net))
    names = {ident: layer for layer, ident in idents.items()}
    return Converted(graph, {names[m]: rf for m, rf in reuse.items()}, net)


def write_project(dag: ModelDAG, spec: StageSpec, weights: dict[str, list[torch.Tensor]],
                  folder: Path, final: Path) -> Converted:
    """Write the project into `folder`, its configuration naming `final` (where the build
    moves it) as its directory."""
    converted = convert(dag, spec, weights, folder)
    with redirect_stdout(io.StringIO()):
        converted.graph.write()
    config = folder / "hls4ml_config.yml"
    config.write_text(config.read_text().replace(str(folder), str(final)))
    return converted
