"""Archipelago: plan, estimate, emulate and emit deployments of models on FPGA clusters.

As a library (docs/python.md): `archipelago.plan()`, `estimate()`, `compare()`,
`emulate()`, `build()` and `serve()`, their typed results, `to_pandas()` and the enums
`Strategy`, `Device` and `NumberFormat`. Each is imported on first use: the package root
stays free of torch, optuna, plotly and dask, so `import archipelago` and `archi plan`
are fast. Every user mistake is an `ArchipelagoError` (one line; subclasses name the kind
of mistake: `UnknownNameError`, `ConfigError`, `InvalidArgument`, ...).
"""

import functools
import sys
import types
from importlib import import_module
from typing import Any

from archipelago.errors import (
    ArchipelagoError,
    ConfigError,
    InvalidArgument,
    PartitionError,
    UnknownNameError,
)

__version__ = "0.1.0"

_CALLS = ("plan", "estimate", "compare", "emulate", "build", "serve")
# name -> the module that defines it, imported when the name is first read.
_LAZY = dict.fromkeys(("Plan", "Estimate", "Comparison", "Row", "Emulation", "Build", "Service",
                       "to_pandas"), "archipelago.lib.results")
_ENUMS = ("Strategy", "Device", "NumberFormat")  # made from the registries (lib/choices.py)

__all__ = ["ArchipelagoError", "ConfigError", "InvalidArgument", "PartitionError",
           "UnknownNameError", "__version__", *_CALLS, *_LAZY, *_ENUMS]


def __getattr__(name: str) -> Any:
    if name in _CALLS:
        value: Any = _Call(getattr(import_module("archipelago.lib.calls"), name))
    elif name in _LAZY:
        value = getattr(import_module(_LAZY[name]), name)
    elif name in _ENUMS:
        from archipelago.lib.choices import ENUMS

        value = ENUMS[name]()
    else:
        raise AttributeError(f"module 'archipelago' has no attribute '{name}'")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


class _Call:
    """A library call (`archipelago.compare`) that shares its name with the subpackage of
    the code behind it (archipelago/compare/): calling it calls the function, its
    attributes are the subpackage's (`import archipelago.compare.run as run` still
    works), and its name, docstring and signature are the function's."""

    def __init__(self, function: Any) -> None:
        functools.update_wrapper(self, function)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.__wrapped__(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        package = f"archipelago.{self.__wrapped__.__name__}"
        try:
            return getattr(import_module(package), name)
        except ModuleNotFoundError:
            raise AttributeError(f"'{package}' has no attribute '{name}'") from None

    def __repr__(self) -> str:
        return f"<function archipelago.{self.__wrapped__.__name__}>"


class _Package(types.ModuleType):
    """The package whose calls share names with its subpackages: importing such a
    subpackage does not rebind the call's name (Python would set it to the subpackage);
    the subpackage stays importable by its dotted path."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _CALLS and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
