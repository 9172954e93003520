"""Execute a layer DAG with torch, layer by layer (batch 1), with seeded or given weights.

The same function runs a layer in the unsplit reference and on an emulated FPGA, so the
two can only differ in what data reaches a layer, which is what the emulation checks.
A layer's weights come from a generator seeded by (seed, layer position), so each FPGA
process creates exactly the weights of its own layers and nothing else.
"""

import math

import torch
import torch.nn.functional as F

from archipelago.models.dag import FC, LSTM, Add, Conv, Elementwise, MatMul, ModelDAG, Pool
from archipelago.strategies.chef.emulate.elementwise import elementwise


def layer_weights(dag: ModelDAG, name: str, seed: int) -> list[torch.Tensor]:
    layer = dag.by_name[name]
    gen = torch.Generator().manual_seed(seed * 1_000_003 + dag.order.index(name))

    def rand(*shape: int, fan_in: int) -> torch.Tensor:
        return (torch.rand(*shape, generator=gen) * 2 - 1) / fan_in ** 0.5

    if isinstance(layer, Conv):
        rows, cols = layer.window
        per_group = layer.in_ch // layer.groups
        fan = per_group * rows * cols
        return [rand(layer.out_ch, per_group, rows, cols, fan_in=fan),
                rand(layer.out_ch, fan_in=fan)]
    if isinstance(layer, FC):
        return [rand(layer.out_features, layer.in_features, fan_in=layer.in_features),
                rand(layer.out_features, fan_in=layer.in_features)]
    if isinstance(layer, LSTM):  # per direction, torch.nn.LSTM's / GRU's tensors
        h, e, g = layer.hidden, layer.embed, layer.gates
        return [t for _ in range(layer.directions)
                for t in (rand(g * h, e, fan_in=h), rand(g * h, h, fan_in=h),
                          rand(g * h, fan_in=h), rand(g * h, fan_in=h))]
    if isinstance(layer, Elementwise) and layer.params:
        return [rand(layer.params, fan_in=1)]
    if isinstance(layer, MatMul) and _stored_operand(dag, layer):
        return [rand(_stored_operand(dag, layer), fan_in=layer.inner)]
    return []


def _operands(layer: MatMul) -> tuple[int, int]:
    return (layer.batch * layer.rows * layer.inner, layer.batch * layer.inner * layer.cols)


def _stored_operand(dag: ModelDAG, layer: MatMul) -> int:
    """Elements of the operand no dependency computes (0: they compute both): a MatMul
    reading one computed operand multiplies it with a value the DAG does not hold, seeded
    here like a weight."""
    sizes = [dag.by_name[d].out_elements for d in layer.deps]
    left, right = _operands(layer)
    if len(sizes) == 1 and sizes[0] in (left, right) and sizes[0] != left + right:
        return right if sizes[0] == left else left
    return 0


def model_inputs(dag: ModelDAG, seed: int) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return {la.name: torch.randn(*dag.input_shape(la), generator=gen)
            for la in dag.layers if not la.deps}


def run_layer(dag: ModelDAG, name: str, inputs: list[torch.Tensor],
              weights: list[torch.Tensor]) -> torch.Tensor:
    layer = dag.by_name[name]
    if isinstance(layer, Add):  # inputs of the same elements, in whatever layout
        out = inputs[0].reshape(layer.shape)
        for other in inputs[1:]:
            out = out + other.reshape(layer.shape)
        return torch.relu(out) if layer.relu else out
    if isinstance(layer, Elementwise):
        return elementwise(layer, inputs, weights[0] if weights else None)
    if isinstance(layer, MatMul):
        return _matmul(layer, inputs, weights)
    if isinstance(layer, Conv | Pool) and all(x.dim() == 3 for x in inputs):
        x = torch.cat(inputs, 0) if len(inputs) > 1 else inputs[0]
    else:
        x = torch.cat([t.flatten() for t in inputs]) if len(inputs) > 1 else inputs[0].flatten()
    if isinstance(layer, Conv):
        out = F.conv2d(_pad(x, layer, 0.0)[None], weights[0], weights[1], layer.strides,
                       groups=layer.groups)[0]
        return torch.relu(out) if layer.relu else out
    if isinstance(layer, Pool):
        if layer.kind == "max":
            return F.max_pool2d(_pad(x, layer, -math.inf)[None], layer.window,
                                layer.strides)[0]
        return F.avg_pool2d(_pad(x, layer, 0.0)[None], layer.window, layer.strides)[0]
    if isinstance(layer, FC):  # the same weights for each of `rows` rows
        rows = x.reshape(layer.rows, layer.in_features) if layer.rows > 1 else x
        # a convolution imported as an FC (layer_forms) keeps its (out, C, K, K) weight:
        # flattened, each filter is the row its dot product with the flattened map reads
        out = F.linear(rows, weights[0].reshape(layer.out_features, layer.in_features),
                       weights[1])
        return torch.relu(out) if layer.relu else out
    assert isinstance(layer, LSTM)
    seq = x.reshape(layer.cells, layer.embed)
    cell = _lstm if layer.cell == "lstm" else _gru
    outs = [cell(seq.flip(0) if d else seq, *weights[4 * d:4 * d + 4])
            for d in range(layer.directions)]
    return torch.cat([outs[0], outs[1].flip(0)], 1) if layer.directions == 2 else outs[0]


def _pad(x: torch.Tensor, layer: Conv | Pool, value: float) -> torch.Tensor:
    """The layer's (top, left, bottom, right) borders around a (C, H, W) map; an average
    pool counts the zeros (torch's count_include_pad)."""
    top, left, bottom, right = layer.borders
    return F.pad(x, (left, right, top, bottom), value=value)


def _lstm(seq: torch.Tensor, w_ih, w_hh, b_ih, b_hh) -> torch.Tensor:
    """torch.nn.LSTM's cell (gates i, f, g, o), one cell after another."""
    hidden = w_hh.shape[1]
    h, c = torch.zeros(hidden), torch.zeros(hidden)
    outs = []
    for x in seq:
        i, f, g, o = (F.linear(x, w_ih, b_ih) + F.linear(h, w_hh, b_hh)).chunk(4)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
        outs.append(h)
    return torch.stack(outs)


def _gru(seq: torch.Tensor, w_ih, w_hh, b_ih, b_hh) -> torch.Tensor:
    """torch.nn.GRU's cell (gates r, z, n; the reset gate scales the recurrent product)."""
    h = torch.zeros(w_hh.shape[1])
    outs = []
    for x in seq:
        xr, xz, xn = F.linear(x, w_ih, b_ih).chunk(3)
        hr, hz, hn = F.linear(h, w_hh, b_hh).chunk(3)
        r, z = torch.sigmoid(xr + hr), torch.sigmoid(xz + hz)
        h = (1 - z) * torch.tanh(xn + r * hn) + z * h
        outs.append(h)
    return torch.stack(outs)


def _matmul(layer: MatMul, inputs: list[torch.Tensor],
            weights: list[torch.Tensor]) -> torch.Tensor:
    """(batch, rows, inner) @ (batch, inner, cols): the operands from two dependencies
    (in either order), one holding both (left first), or one and a seeded operand."""
    left = _operands(layer)[0]
    flat = [t.flatten() for t in inputs] + [w.flatten() for w in weights]
    if len(flat) == 1:
        flat = [flat[0][:left], flat[0][left:]]
    if flat[0].numel() != left:
        flat.reverse()
    a = flat[0].reshape(layer.batch, layer.rows, layer.inner)
    b = flat[1].reshape(layer.batch, layer.inner, layer.cols)
    return torch.bmm(a, b).reshape(layer.out_shape)


def run_dag(dag: ModelDAG, inputs: dict[str, torch.Tensor],
            weights: dict[str, list[torch.Tensor]]) -> dict[str, torch.Tensor]:
    """Every layer's output, unsplit, in wave order."""
    values: dict[str, torch.Tensor] = {}
    with torch.no_grad():
        for name in dag.order:
            layer = dag.by_name[name]
            args = [values[d] for d in layer.deps] if layer.deps else [inputs[name]]
            values[name] = run_layer(dag, name, args, weights.get(name, []))
    return values


def sinks(dag: ModelDAG) -> list[str]:
    return [n for n in dag.order if not dag.successors[n]]
