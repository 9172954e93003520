"""Execute a layer DAG with torch, layer by layer (batch 1), with seeded or given weights.

The same function runs a layer in the unsplit reference and on an emulated FPGA, so the
two can only differ in what data reaches a layer, which is what the emulation checks.
A layer's weights come from a generator seeded by (seed, layer position), so each FPGA
process creates exactly the weights of its own layers and nothing else.
"""

import torch
import torch.nn.functional as F

from archipelago.models.dag import FC, LSTM, Add, Conv, ModelDAG, Pool


def layer_weights(dag: ModelDAG, name: str, seed: int) -> list[torch.Tensor]:
    layer = dag.by_name[name]
    gen = torch.Generator().manual_seed(seed * 1_000_003 + dag.order.index(name))

    def rand(*shape: int, fan_in: int) -> torch.Tensor:
        return (torch.rand(*shape, generator=gen) * 2 - 1) / fan_in ** 0.5

    if isinstance(layer, Conv):
        fan = layer.in_ch * layer.kernel ** 2
        return [rand(layer.out_ch, layer.in_ch, layer.kernel, layer.kernel, fan_in=fan),
                rand(layer.out_ch, fan_in=fan)]
    if isinstance(layer, FC):
        return [rand(layer.out_features, layer.in_features, fan_in=layer.in_features),
                rand(layer.out_features, fan_in=layer.in_features)]
    if isinstance(layer, LSTM):
        h, e = layer.hidden, layer.embed
        return [rand(4 * h, e, fan_in=h), rand(4 * h, h, fan_in=h), rand(4 * h, fan_in=h),
                rand(4 * h, fan_in=h)]
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
    if isinstance(layer, Conv | Pool) and all(x.dim() == 3 for x in inputs):
        x = torch.cat(inputs, 0) if len(inputs) > 1 else inputs[0]
    else:
        x = torch.cat([t.flatten() for t in inputs]) if len(inputs) > 1 else inputs[0].flatten()
    if isinstance(layer, Conv):
        out = F.conv2d(x[None], weights[0], weights[1], layer.stride, layer.padding)[0]
        return torch.relu(out) if layer.relu else out
    if isinstance(layer, Pool):
        pool = F.max_pool2d if layer.kind == "max" else F.avg_pool2d
        return pool(x[None], layer.kernel, layer.stride, layer.padding)[0]
    if isinstance(layer, FC):
        out = F.linear(x, weights[0], weights[1])
        return torch.relu(out) if layer.relu else out
    assert isinstance(layer, LSTM)
    return _lstm(x.reshape(layer.cells, layer.embed), *weights)


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
