"""The DAG a torch module imports to, by both of `archi`'s torch routes: what tests of
torch networks and of single operators check."""

import torch
from torch import nn

from archipelago.models.dag import ModelDAG
from archipelago.models.torch_import import dag_from_module


def both(module: nn.Module, example: torch.Tensor) -> ModelDAG:
    """The DAG torch.fx traces, checked equal to torch.export's."""
    module.eval()
    traced, _ = dag_from_module(module, (example,), "net")
    exported, _ = dag_from_module(torch.export.export(module, (example,)).module(),
                                  (example,), "net")
    assert exported == traced
    return traced
