"""The projects of a build run by hls4ml's C simulation (its g++-compiled bridge, no
vendor tools), one after another as the FPGAs would stream, and the fixed-point error
bound their outputs are checked against.

Error bound. ap_fixed<W,I> keeps F = W - I fraction bits and truncates (AP_TRN, the
default quantization mode of Vitis HLS's arbitrary-precision types, UG1399 "Arbitrary
Precision Fixed-Point Data Types"; hls4ml's docs, "Precision", use these types as written):
every conversion errs by less than q = 2^-F. With values x~ = x + ex and weights w~ = w + ew,
|ex| <= e, |ew| < q, the exact accumulator (config.py) gives a Conv/FC output error below
    (|x| + e) * q  +  |w| * e      summed over the layer's products,
plus q for its bias and q for truncating its result. ReLU and max pooling do not grow an
error bound, adds sum them (exact on one grid), average pooling adds 2q (its result and the
rounded reciprocal of the window). The model's inputs start at e = q. These are evaluated
by running the DAG's own layers (chef/emulate/dag_torch.run_layer) on the bounds with
|w| and q as weights, so the bound is per element of every output. The bound holds while
no value reaches 2^(I-1) (overflow wraps): `overflow` says where one does.
"""

import io
from concurrent.futures import ThreadPoolExecutor
from contextlib import redirect_stdout
from pathlib import Path

import numpy as np
import torch

from archipelago.models.dag import FC, Conv, ModelDAG, Pool
from archipelago.strategies.chef.emit.project import convert
from archipelago.strategies.chef.emit.stages import model_input, value_shape
from archipelago.strategies.chef.emulate.dag_torch import run_layer
from archipelago.strategies.chef.hls_precision import fixed_bits


def to_stream(x: np.ndarray) -> np.ndarray:
    """A (C, H, W) value as its stream (H x W pixels of C elements); flat values as they
    are."""
    return (x.transpose(1, 2, 0) if x.ndim == 3 else x).reshape(1, -1)


def from_stream(flat: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    if len(shape) == 3:
        c, h, w = shape
        return flat.reshape(h, w, c).transpose(2, 0, 1)
    return flat.reshape(shape)


def simulate(dag: ModelDAG, built, weights: dict[str, list[torch.Tensor]],
             inputs: dict[str, torch.Tensor], work: Path) -> dict[str, np.ndarray]:
    """Every project of `built` (build.Built) compiled under `work` and run in order, each
    fed the streams the earlier ones wrote; `inputs` are the model's (layer -> value, no
    batch). Returns every value a project wrote, in the DAG's shapes."""
    streams = {model_input(k): to_stream(v.numpy()) for k, v in inputs.items()}
    graphs = [convert(dag, spec, weights, work / folder).graph
              for folder, spec in zip(built.folders, built.specs, strict=True)]
    with redirect_stdout(io.StringIO()):  # g++ runs side by side, one per project
        with ThreadPoolExecutor(len(graphs)) as pool:
            list(pool.map(lambda graph: graph.compile(), graphs))
        for graph, spec in zip(graphs, built.specs, strict=True):
            args = [np.ascontiguousarray(streams[v], dtype=np.float32)
                    for v in spec.stage.inputs]
            out = graph.predict(args if len(args) > 1 else args[0])
            outs = out if isinstance(out, list) else [out]
            for value, got in zip(spec.stage.outputs, outs, strict=True):
                streams[value] = np.asarray(got, dtype=np.float64).reshape(1, -1)
    return {v: from_stream(s, value_shape(dag, v)) for v, s in streams.items()
            if not v.startswith("input:")}


def error_bounds(dag: ModelDAG, weights: dict[str, list[torch.Tensor]],
                 inputs: dict[str, torch.Tensor], precision: str
                 ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """Every layer's exact output (float64) and the bound on its fixed-point error."""
    width, integer = fixed_bits(precision)
    q = 2.0 ** -(width - integer)
    values: dict[str, torch.Tensor] = {}
    bounds: dict[str, torch.Tensor] = {}
    with torch.no_grad():
        for name in dag.order:
            layer = dag.by_name[name]
            if layer.deps:
                xs = [values[d] for d in layer.deps]
                es = [bounds[d] for d in layer.deps]
            else:
                xs = [inputs[name].double()]
                es = [torch.full_like(xs[0], q)]
            w = [t.double() for t in weights.get(name, [])]
            values[name] = run_layer(dag, name, xs, w)
            bounds[name] = _bound(dag, name, xs, es, w, q)
    return values, bounds


def _bound(dag: ModelDAG, name: str, xs: list[torch.Tensor], es: list[torch.Tensor],
           w: list[torch.Tensor], q: float) -> torch.Tensor:
    layer = dag.by_name[name]
    if isinstance(layer, Conv | FC):
        zero = torch.zeros_like(w[1])
        through_weights = run_layer(dag, name, [x.abs() + e for x, e in zip(xs, es, strict=True)],
                                    [torch.full_like(w[0], q), zero])
        through_inputs = run_layer(dag, name, es, [w[0].abs(), zero])
        return through_weights + through_inputs + 2 * q
    grown = run_layer(dag, name, es, w)  # max pool, add: the bounds pooled or summed
    if isinstance(layer, Pool) and layer.kind == "avg":
        return grown + 2 * q
    return grown


def fixed_point(dag: ModelDAG, weights: dict[str, list[torch.Tensor]],
                inputs: dict[str, torch.Tensor], precision: str) -> dict[str, torch.Tensor]:
    """Every layer's output in the project's arithmetic, computed by torch in float64:
    inputs, weights, biases and results truncated to the grid of q (AP_TRN), products and
    sums exact as in the wide accumulator (float64 holds them exactly: 2F fraction bits
    and at most 2I integer bits). Max pooling and adds stay on the grid; average pooling
    is not modelled (its reciprocal's rounding is the backend's)."""
    width, integer = fixed_bits(precision)
    q = 2.0 ** -(width - integer)

    def grid(t: torch.Tensor) -> torch.Tensor:
        return torch.floor(t.double() / q) * q

    values: dict[str, torch.Tensor] = {}
    with torch.no_grad():
        for name in dag.order:
            deps = dag.by_name[name].deps
            xs = [values[d] for d in deps] if deps else [grid(inputs[name])]
            values[name] = grid(run_layer(dag, name, xs, [grid(w) for w in
                                                           weights.get(name, [])]))
    return values


def overflow(values: dict[str, torch.Tensor], precision: str) -> list[str]:
    """The values whose magnitude reaches the precision's range (their bound is void)."""
    top = 2.0 ** (fixed_bits(precision)[1] - 1)
    return [v for v, x in values.items() if x.abs().max().item() >= top]
