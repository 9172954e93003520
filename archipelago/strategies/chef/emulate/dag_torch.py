"""Execute a layer DAG with torch, layer by layer (batch 1), with seeded or given weights.

The same function runs a layer in the unsplit reference and on an emulated FPGA, so the
two can only differ in what data reaches a layer, which is what the emulation checks.
A layer's weights come from a generator seeded by (seed, layer position), so each FPGA
process creates exactly the weights of its own layers and nothing else.
"""

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F

from archipelago.emulate.errors import EmulationError
from archipelago.models.dag import FC, LSTM, Add, Conv, Elementwise, MatMul, ModelDAG, Pool


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
    return []


def model_inputs(dag: ModelDAG, seed: int) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return {la.name: torch.randn(*dag.input_shape(la), generator=gen)
            for la in dag.layers if not la.deps}


def run_layer(dag: ModelDAG, name: str, inputs: list[torch.Tensor],
              weights: list[torch.Tensor]) -> torch.Tensor:
    layer = dag.by_name[name]
    if isinstance(layer, Add):
        out = inputs[0]
        for other in inputs[1:]:
            out = out + other
        return torch.relu(out) if layer.relu else out
    if isinstance(layer, Elementwise):
        return _elementwise(layer, inputs, weights)
    if isinstance(layer, MatMul):
        return _matmul(layer, inputs)
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
    if isinstance(layer, FC):
        out = F.linear(x, weights[0], weights[1])
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


def _matmul(layer: MatMul, inputs: list[torch.Tensor]) -> torch.Tensor:
    """Its two operands, (batch, rows, inner) and (batch, inner, cols), in dependency
    order."""
    left = inputs[0].reshape(layer.batch, layer.rows, layer.inner)
    right = inputs[1].reshape(layer.batch, layer.inner, layer.cols)
    return torch.bmm(left, right).reshape(layer.out_shape)


def _fit(x: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    """An input of an element-wise layer shaped to broadcast over `shape`: all of it, or
    its leading axes (a per-channel scale, squeeze-and-excitation's), or its trailing ones
    (a per-feature vector)."""
    for k in range(len(shape), -1, -1):
        if math.prod(shape[:k]) == x.numel():
            return x.reshape(*shape[:k], *(1,) * (len(shape) - k))
    for k in range(len(shape)):
        if math.prod(shape[k:]) == x.numel():
            return x.reshape(shape[k:])
    raise EmulationError(f"an input of {x.numel()} elements does not broadcast over {shape}")


def _affine(x: torch.Tensor, params: torch.Tensor, axis: int) -> torch.Tensor:
    """Scale and shift per index of `axis`, from the layer's params (scale, then shift)."""
    n = x.shape[axis]
    view = [1] * x.dim()
    view[axis] = n
    return x * params[:n].reshape(view) + params[n:2 * n].reshape(view)


def _layer_norm(x: torch.Tensor, params: torch.Tensor | None) -> torch.Tensor:
    d = x.shape[-1]
    full = params is not None and params.numel() >= 2 * d
    return F.layer_norm(x, (d,), params[:d] if full else None, params[d:2 * d] if full else None)


# Element-wise layers by ONNX operator name (case-insensitive), with ONNX's default
# attributes: Clip as ReLU6 (the bounded activation MobileNets export); LRN over 5
# channels (the size AlexNet, ZFNet and GoogLeNet use, seeds and torchvision alike).
_ONE_INPUT: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "relu": torch.relu, "sigmoid": torch.sigmoid, "tanh": torch.tanh, "erf": torch.erf,
    "hardsigmoid": lambda x: torch.clamp(0.2 * x + 0.5, 0, 1), "hardswish": F.hardswish,
    "gelu": F.gelu, "silu": F.silu, "swish": F.silu, "clip": lambda x: torch.clamp(x, 0, 6),
    "leakyrelu": lambda x: F.leaky_relu(x, 0.01), "softmax": lambda x: torch.softmax(x, -1),
    "lrn": lambda x: F.local_response_norm(x[None], 5)[0], "identity": lambda x: x,
}
_SEVERAL_INPUTS: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "mul": torch.mul, "add": torch.add, "sub": torch.sub, "div": torch.div, "sum": torch.add,
    "max": torch.maximum, "min": torch.minimum,
}
_PARAMETRIZED = ("batchnormalization", "layernormalization")
ELEMENTWISE_OPS = (*_ONE_INPUT, *_SEVERAL_INPUTS, *_PARAMETRIZED)


def _elementwise(layer: Elementwise, inputs: list[torch.Tensor],
                 weights: list[torch.Tensor]) -> torch.Tensor:
    op, shape = layer.op.lower(), tuple(layer.shape)
    if op in _SEVERAL_INPUTS and len(inputs) > 1:
        out = _fit(inputs[0], shape)
        for other in inputs[1:]:
            out = _SEVERAL_INPUTS[op](out, _fit(other, shape))
        return out.expand(shape).clone()
    x = torch.cat([t.flatten() for t in inputs]).reshape(shape)
    params = weights[0] if weights else None
    if op == "batchnormalization":  # inference: a per-channel scale and shift
        return x if params is None else _affine(x, params, 0)
    if op == "layernormalization":
        return _layer_norm(x, params)
    if op in _ONE_INPUT:
        return _ONE_INPUT[op](x)
    return x  # a single-input Mul/Add (its other operand a constant the DAG does not hold)


def check_ops(dag: ModelDAG) -> None:
    """Every element-wise layer names an operator run_layer computes: else one line,
    before any process starts."""
    for layer in dag.layers:
        if isinstance(layer, Elementwise) and layer.op.lower() not in ELEMENTWISE_OPS:
            raise EmulationError(f"layer '{layer.name}': element-wise op '{layer.op}' is not "
                                 f"emulated (valid: {', '.join(ELEMENTWISE_OPS)})")


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
