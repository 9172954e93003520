"""Registered code named by path: a `module:attribute` string stands for an object the
registry imports the first time it is used, so registering a kind, its workload and its
strategies (and listing them: `archi --help`, `archi catalog`) imports none of their code,
and registering the model and cluster families imports no form's loader."""

import sys
from collections.abc import Callable
from importlib import import_module
from typing import Any, TypeAlias, TypeVar

_T = TypeVar("_T")
# A registered object, or the `module:attribute` path it is imported from on first use.
Ref: TypeAlias = _T | str


def resolve(path: str) -> Any:
    """`package.module:attribute` -> the attribute (imported now, not at registration; a
    module imported already is looked up, which is ten times quicker: a design search asks
    for its strategy's config type once a design)."""
    name, _, attribute = path.partition(":")
    module = sys.modules.get(name) or import_module(name)
    return getattr(module, attribute) if attribute else module


def lazy(path: str) -> Callable[..., Any]:
    """The function at `module:attribute`, its module imported when it is first called."""
    return lambda *args: resolve(path)(*args)


def resolved(ref: Ref[_T]) -> _T:
    """A registered object given as itself or as its `module:attribute` path."""
    return resolve(ref) if isinstance(ref, str) else ref
