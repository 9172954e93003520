"""`manifest.json` of an hls4ml build: what to deploy where, read back as typed data.

    fpgas     per FPGA: board, part, clock, its IP instances (the plan's deployment), its
              projects, its DRAM budget (bytes the plan keeps there, of its capacity), and
              `idle` when the plan gives it no layer
    projects  per project: folder, top function, FPGA, visit, layers, input and output
              streams (value, shape, element layout, where from / to) and each Conv/FC
              layer's IP instance, multipliers and hls4ml reuse factor
    mapping   the plan's schedule: layer -> accelerator, FPGA, start, end, transfer (s)
    links     per ordered FPGA pair: the values streamed and their bytes at the precision

`read_manifest` validates a file; `plan_record(plan)` is the part of a plan the manifest
must reproduce (a test compares the two).
"""

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from archipelago.errors import ConfigError
from archipelago.models.dag_layers import product
from archipelago.safe_read import load_json
from archipelago.strategies.chef.emit.config import accumulator
from archipelago.strategies.chef.emit.stages import INPUT, value_shape
from archipelago.strategies.chef.hls_precision import fixed_bits
from archipelago.strategies.chef.simulate import dram_use

FORMAT = "archipelago-hls/1"
LAYOUT = "channels-last: a (C, H, W) value streams as H x W pixels of C elements"
HOST = "host"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Stream(_Strict):
    value: str
    shape: tuple[int, ...]
    peers: tuple[str, ...]  # the projects (or the host) it comes from or goes to


class Project(_Strict):
    folder: str
    top: str
    fpga: str
    visit: int
    layers: tuple[str, ...]
    inputs: tuple[Stream, ...]
    outputs: tuple[Stream, ...]
    reuse: dict[str, dict[str, Any]]


class Fpga(_Strict):
    fpga: str
    device: str
    part: str | None
    idle: bool
    projects: tuple[str, ...]
    dram_bytes: int
    dram_capacity_bytes: int
    deployment: dict[str, Any]


class Link(_Strict):
    source: str
    target: str
    values: tuple[str, ...]
    bytes: int


class Manifest(_Strict):
    format: str
    model: str
    cluster: str
    strategy: str
    latency_s: float
    precision: str
    accumulator: str
    layout: str
    tool: dict[str, Any]
    fpgas: tuple[Fpga, ...]
    projects: tuple[Project, ...]
    mapping: tuple[dict[str, Any], ...]
    links: tuple[Link, ...]

    def plan_record(self) -> dict[str, Any]:
        """The plan's figures as the manifest holds them (compare `plan_record(plan)`)."""
        return {"model": self.model, "cluster": self.cluster, "strategy": self.strategy,
                "latency_s": self.latency_s, "mapping": list(self.mapping),
                "deployment": [f.deployment for f in self.fpgas],
                "dram_bytes": [f.dram_bytes for f in self.fpgas]}


def plan_record(plan) -> dict[str, Any]:
    record = plan.to_dict()
    return {"model": record["model"], "cluster": record["cluster"],
            "strategy": record["strategy"], "latency_s": record["latency_s"],
            "mapping": record["mapping"], "deployment": record["deployment"],
            "dram_bytes": dram_use(plan.tables, list(plan.schedule.mapping))}


def manifest(plan, built, reuse: list[dict[str, int]], tool: dict[str, Any]
             ) -> dict[str, Any]:
    """The manifest of `built` (build.Built) with each project's reuse factors."""
    dag, nodes = plan.dag, plan.cluster.nodes
    precision = built.specs[0].precision
    writer = {v: f for f, s in zip(built.folders, built.stages, strict=True)
              for v in s.outputs}
    readers: dict[str, list[str]] = {}
    for folder, stage in zip(built.folders, built.stages, strict=True):
        for value in stage.inputs:
            readers.setdefault(value, []).append(folder)
    acc_of = dict(zip(plan.tables.names, plan.schedule.mapping, strict=True))
    projects = []
    for folder, spec, rf in zip(built.folders, built.specs, reuse, strict=True):
        stage = spec.stage
        projects.append({
            "folder": folder, "top": spec.name, "fpga": nodes[stage.fpga].name,
            "visit": stage.visit, "layers": list(stage.layers),
            "inputs": [_stream(dag, v, [writer.get(v, HOST)]) for v in stage.inputs],
            "outputs": [_stream(dag, v, readers.get(v) or [HOST]) for v in stage.outputs],
            "reuse": {layer: {"accelerator": f"acc{acc_of[layer]}",
                              "ip": plan.deployment.accs[acc_of[layer]].ip.name,
                              "multipliers": spec.multipliers[layer], "reuse_factor": f}
                      for layer, f in rf.items()}})
    record = plan_record(plan)
    fpgas = [{"fpga": node.name, "device": node.device.key, "part": node.device.part,
              "idle": not any(s.fpga == i for s in built.stages),
              "projects": [f for f, s in zip(built.folders, built.stages, strict=True)
                           if s.fpga == i],
              "dram_bytes": record["dram_bytes"][i], "dram_capacity_bytes": node.dram_bytes,
              "deployment": record["deployment"][i]} for i, node in enumerate(nodes)]
    return {"format": FORMAT, "model": dag.name, "cluster": plan.cluster.name,
            "strategy": plan.strategy, "latency_s": record["latency_s"],
            "precision": precision, "accumulator": accumulator(precision), "layout": LAYOUT,
            "tool": tool, "fpgas": fpgas, "projects": projects,
            "mapping": record["mapping"], "links": _links(plan, built, precision)}


def _stream(dag, value: str, peers: list[str]) -> dict[str, Any]:
    return {"value": value, "shape": list(value_shape(dag, value)), "peers": peers}


def _links(plan, built, precision: str) -> list[dict[str, Any]]:
    """Values crossing FPGAs, per (from, to) pair, each counted once per pair."""
    nodes, width = plan.cluster.nodes, fixed_bits(precision)[0]
    home = {v: s.fpga for s in built.stages for v in s.outputs}
    pairs: dict[tuple[int, int], list[str]] = {}
    for stage in built.stages:
        for value in stage.inputs:
            if not value.startswith(INPUT) and home[value] != stage.fpga:
                pair = pairs.setdefault((home[value], stage.fpga), [])
                pair += [value] * (value not in pair)
    return [{"source": nodes[a].name, "target": nodes[b].name, "values": values,
             "bytes": sum(product(value_shape(plan.dag, v)) for v in values) * width // 8}
            for (a, b), values in sorted(pairs.items())]


def read_manifest(path: Path) -> Manifest:
    """A build's manifest, validated; a malformed one is refused naming the field."""
    data = load_json(path, "manifest")
    try:
        found = Manifest.model_validate(data)
    except ValidationError as err:
        raise ConfigError.from_validation(str(path), err) from None
    if found.format != FORMAT:
        raise ConfigError(str(path), "format", f"{found.format!r} is not {FORMAT!r}")
    return found
