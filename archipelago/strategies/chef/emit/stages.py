"""A scheduled DAG cut into the sub-networks each FPGA runs, one hls4ml project each.

A project is a function of its input streams: it cannot wait, half-way, for a value that
another FPGA computes from one of its own outputs (FPGA a -> b -> a). So the layers of an
FPGA are grouped by *visit*: a layer's visit is at least the largest of its dependencies'
visits, one more for a dependency on another FPGA, and is taken as late as its readers
allow (sinks as early as possible), so a layer joins the project of the layers it feeds.
Every stream between projects then goes from a smaller visit to a larger one, and the
projects run one after another in visit order (`Stage.key`). Most plans visit each FPGA
once: one project per FPGA.

A value is a layer's output, named by the layer; a model input is `input:LAYER` (the
external input of a layer without dependencies). Plain data only: no torch, no hls4ml.
"""

from dataclasses import dataclass

from archipelago.models.dag import ModelDAG

INPUT = "input:"


@dataclass(frozen=True)
class Stage:
    """One hls4ml project: the layers of `fpga` in visit `visit`, in the DAG's order, the
    values it reads (streams in, in order) and the values it writes (streams out)."""

    fpga: int
    visit: int
    layers: tuple[str, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]

    @property
    def key(self) -> tuple[int, int]:
        return self.visit, self.fpga


def model_input(layer: str) -> str:
    return INPUT + layer


def value_shape(dag: ModelDAG, value: str) -> tuple[int, ...]:
    """The shape of a value without the batch: a layer's output, or a model input."""
    if value.startswith(INPUT):
        return tuple(dag.input_shape(dag.by_name[value[len(INPUT):]]))
    return tuple(dag.by_name[value].out_shape)


def layer_inputs(dag: ModelDAG, name: str) -> tuple[str, ...]:
    """The values a layer reads, in the order it concatenates or adds them."""
    deps = dag.by_name[name].deps
    return deps if deps else (model_input(name),)


def stages(dag: ModelDAG, placement: dict[str, int]) -> list[Stage]:
    """The projects of a placement (layer -> FPGA index), in the order they run."""
    visit: dict[str, int] = {}
    for name in dag.order:  # as soon as its inputs allow
        here = placement[name]
        visit[name] = max((visit[d] + (placement[d] != here) for d in dag.by_name[name].deps),
                          default=0)
    for name in reversed(dag.order):  # as late as its readers allow (a modality's first
        here = placement[name]        # layers join the project of the layer they feed)
        visit[name] = min((visit[s] - (placement[s] != here) for s in dag.successors[name]),
                          default=visit[name])
    groups: dict[tuple[int, int], list[str]] = {}
    for name in dag.order:
        groups.setdefault((visit[name], placement[name]), []).append(name)
    readers: dict[str, set[tuple[int, int]]] = {}
    for key, names in groups.items():
        for name in names:
            for value in layer_inputs(dag, name):
                readers.setdefault(value, set()).add(key)
    out = []
    for (v, fpga), names in sorted(groups.items()):
        mine = set(names)
        reads = _unique(value for n in names for value in layer_inputs(dag, n)
                        if value not in mine)
        writes = tuple(n for n in names if readers.get(n, set()) - {(v, fpga)}
                       or not dag.successors[n])
        out.append(Stage(fpga, v, tuple(names), reads, writes))
    return out


def _unique(values) -> tuple[str, ...]:
    return tuple(dict.fromkeys(values))


def producer(stages_: list[Stage]) -> dict[str, int]:
    """Value -> index (in `stages_`) of the project writing it."""
    return {value: i for i, s in enumerate(stages_) for value in s.outputs}
