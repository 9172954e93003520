"""`archi plan model.pt2`: a user's own torch model, saved with `torch.export.save` after
`torch.export.export(module, example_inputs)`. The program carries its ATen graph and the
example inputs it was exported with, which is all `dag_from_module` needs; torch is
imported only when such a file is loaded. The archive is read by pt2_archive, never by
`torch.export.load` (which unpickles whatever the file holds), and what torch logs or
warns while reading it is kept back, so a damaged file is one line.
"""

import stat
from pathlib import Path

from pydantic import ValidationError

from archipelago.errors import ConfigError, first_line
from archipelago.library_logs import kept_library_logs
from archipelago.models.dag import ModelDAG
from archipelago.models.pt2_archive import read_program
from archipelago.models.torch_import import dag_from_module
from archipelago.safe_read import probe


def _positional_inputs(program, source: str) -> tuple:
    inputs = getattr(program, "example_inputs", None)
    if inputs is None:
        raise ConfigError(source, "example_inputs", "the program holds no example inputs; "
                          "export it with torch.export.export(module, example_inputs)")
    args, kwargs = inputs
    if kwargs:
        raise ConfigError(source, "example_inputs", f"keyword inputs {sorted(kwargs)} are not "
                          "supported; pass the model's inputs positionally")
    return args


def dag_from_exported(path: Path, name: str | None = None) -> ModelDAG:
    """The layer DAG of the exported program at `path` (batch size 1)."""
    import torch

    source = str(path)
    info = probe(path, "model")
    if info is None or not stat.S_ISREG(info.st_mode):
        raise ConfigError(source, "file", "not a readable torch.export (.pt2) file")
    with kept_library_logs("torch", "sympy"):
        program = read_program(path, torch)
        args = _positional_inputs(program, source)
        try:
            module = program.module()
        except Exception as err:  # a graph torch deserialized but cannot rebuild
            raise ConfigError(source, "pt2", f"torch cannot rebuild the module: "
                              f"{first_line(err, 160)}") from None
        try:
            dag, _ = dag_from_module(module, args, name or path.stem, source)
        except ValidationError as err:  # a layer the graph describes is out of bounds
            raise ConfigError.from_validation(source, err) from None
    return dag
