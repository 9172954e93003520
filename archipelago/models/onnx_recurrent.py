"""ONNX LSTM and GRU nodes as LSTM layers (seeds/004 §VI: E, H, T): one direction or
bidirectional (`directions=2`, a second set of weights run backwards), a GRU as
`cell="gru"` (three gates). A stacked network is one node per layer, each reading the one
before through the Transpose/Reshape exporters put after the (T, directions, N, H) output;
a layer reading the model's input takes it as (T, E), the batch axis (size 1) dropped.
"""

from typing import Any

from archipelago.models.dag import LSTM
from archipelago.models.onnx_graph import Builder

DIRECTIONS = {"forward": 1, "reverse": 1, "bidirectional": 2}
GATES = {"LSTM": 4, "GRU": 3}


def recurrent(b: Builder, index: int, node: Any, data: list[str]) -> None:
    x = node.input[0]
    if x not in b.src:
        raise b.fail(node, "input 0 (X) must be the model's data")
    for i, name in enumerate(node.input[1:], 1):
        if name in b.src:
            raise b.fail(node, f"input {i} ({name}) is computed from the model's data; "
                         "weights, biases and initial states must be constants")
    weight = b.const(node, 1, 3)  # [directions, gates x hidden, embed]
    b.const(node, 2, 3)
    direction = b.attr(node, "direction", "forward")
    directions = DIRECTIONS.get(direction)
    if directions is None or weight.shape[0] != directions:
        raise b.fail(node, f"direction '{direction}' with weights for {weight.shape[0]} "
                     f"direction(s); one of {', '.join(DIRECTIONS)}")
    gates = GATES[node.op_type]
    hidden = int(b.attr(node, "hidden_size", weight.shape[1] // gates))
    if weight.shape[1] != gates * hidden:
        raise b.fail(node, f"weight {list(weight.shape)} holds no {gates} gates of "
                     f"hidden_size {hidden}")
    layout = b.attr(node, "layout", 0)
    shape = b.shape_of_rank(node, x, 3, "(N, T, E)" if layout else "(T, N, E)")
    steps, batch = (shape[1], shape[0]) if layout else (shape[0], shape[1])
    if batch != 1:
        raise b.fail(node, f"batch {batch}; the import assumes batch size 1")
    embed = int(weight.shape[2])
    b.add_layer(index, node, LSTM, {"embed": embed, "hidden": hidden, "cells": steps,
                                    "cell": node.op_type.lower(), "directions": directions},
                [x], first_input=(steps, embed))
